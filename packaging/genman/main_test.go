package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kjoin.dev/kjoin/cmd/kjoin/app"
)

// Each page is titled by its own command and documents the exit codes.
func TestPagesHaveTheirOwnTitleAndExitStatus(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "0")
	root := app.NewRootCmd(&app.Deps{Streams: app.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}})
	root.DisableAutoGenTag = true
	if err := write(root, dir, "0.0.0"); err != nil {
		t.Fatal(err)
	}
	for page, title := range map[string]string{"kjoin.1": `"KJOIN"`, "kjoin-join.1": `"KJOIN-JOIN"`, "kjoin-token-delete.1": `"KJOIN-TOKEN-DELETE"`} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.Contains(s, ".TH "+title+` "1"`) || !strings.Contains(s, ".SH EXIT STATUS") || !strings.Contains(s, `\fB7\fP (busy)`) {
			t.Errorf("%s:\n%s", page, s[:min(len(s), 300)])
		}
	}
}
