// Command genman writes kjoin's man pages (section 1, one per command: kjoin.1,
// kjoin-join.1, ...) from the cobra command tree into a directory, for the .deb.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"kjoin.dev/kjoin/cmd/kjoin/app"
	"kjoin.dev/kjoin/operr"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: genman DIR VERSION")
		os.Exit(2)
	}
	root := app.NewRootCmd(&app.Deps{Streams: app.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}})
	root.DisableAutoGenTag = true // reproducible pages: no generation date
	if err := os.MkdirAll(os.Args[1], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := write(root, os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "genman:", err)
		os.Exit(1)
	}
}

// write writes the page of cmd and of each command under it: titled by its own name
// (KJOIN-JOIN(1), not KJOIN(1) for all), with an EXIT STATUS section (operr's codes).
func write(cmd *cobra.Command, dir, version string) error {
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := write(c, dir, version); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	header := &doc.GenManHeader{Section: "1", Source: "kjoin " + version, Manual: "kjoin manual"} // Title: from the command's name
	if err := doc.GenMan(cmd, header, &b); err != nil {
		return err
	}
	b.WriteString(exitStatus())
	name := strings.ReplaceAll(cmd.CommandPath(), " ", "-") + ".1"
	return os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644)
}

// exitStatus is the EXIT STATUS section in roff: every documented exit code.
func exitStatus() string {
	var b strings.Builder
	b.WriteString(".SH EXIT STATUS\n")
	for _, c := range operr.Codes {
		fmt.Fprintf(&b, ".TP\n\\fB%d\\fP (%s)\n%s\n", int(c), c.Reason(), strings.ReplaceAll(strings.ReplaceAll(operr.Meanings[c], "`", ""), "\\", "\\\\"))
	}
	return b.String()
}
