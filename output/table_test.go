package output

import (
	"bytes"
	"strings"
	"testing"
)

func TestTableEscapesWhatANodeWroteIntoItsFields(t *testing.T) {
	var b bytes.Buffer
	tb := NewTable(&b, "NAME", "VERSION")
	tb.Row("w1", "v1.37.2\x1b[2K\x1b[1A\rw9\tReady")
	tb.Row("w2\u202e", "v1.37.2\nw3  Ready")
	tb.Row("naïve-ü", "v1.37.2")
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\nw3"} {
		if strings.Contains(out, bad) {
			t.Errorf("table holds %q raw:\n%s", bad, out)
		}
	}
	if lines := strings.Split(strings.TrimRight(out, "\n"), "\n"); len(lines) != 4 {
		t.Errorf("want 4 lines (header and 3 rows), have %d:\n%s", len(lines), out)
	}
	for _, want := range []string{`v1.37.2\x1b[2K\x1b[1A\rw9\tReady`, `w2\u202e`, "naïve-ü", `v1.37.2\nw3  Ready`} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if got := EscapeCell("ok\xffx"); got != `ok\xffx` {
		t.Errorf("invalid UTF-8: %q", got)
	}
}
