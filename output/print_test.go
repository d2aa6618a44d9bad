package output

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every machine format prints the object with its apiVersion and kind; nil lists print as
// []; templates come inline, from --template or from a file; unknown formats and missing
// templates are refused, naming the formats.
func TestFormats(t *testing.T) {
	file := filepath.Join(t.TempDir(), "t.tmpl")
	if err := os.WriteFile(file, []byte("{{.kind}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ format, template, want string }{
		{"json", "", `"apiVersion": "output.kjoin.dev/v1alpha1"`},
		{"yaml", "", "kind: NodeList\n"},
		{"jsonpath={.kind}", "", "NodeList"},
		{"jsonpath", "{.items}", "[]"},
		{"jsonpath-as-json={.kind}", "", `"NodeList"`},
		{"go-template={{.apiVersion}}", "", "output.kjoin.dev/v1alpha1"},
		{"go-template-file", file, "NodeList"},
	} {
		f := NewFlags()
		f.Format, f.Template = c.format, c.template
		if err := f.Validate(false); err != nil {
			t.Errorf("%s: %v", c.format, err)
			continue
		}
		var b bytes.Buffer
		if err := f.Print(&b, &NodeList{}); err != nil || !strings.Contains(b.String(), c.want) {
			t.Errorf("-o %s: %v %q, want %q", c.format, err, b.String(), c.want)
		}
		if strings.Contains(b.String(), "null") {
			t.Errorf("-o %s printed null: %s", c.format, b.String())
		}
	}
	for _, bad := range []string{"xml", "jsonpath", "go-template={{.kind"} {
		f := NewFlags()
		f.Format = bad
		if err := f.Validate(true); err == nil {
			t.Errorf("-o %s accepted", bad)
		}
	}
	f := NewFlags()
	f.Format = "wide"
	if f.Validate(false) == nil || f.Validate(true) != nil || !f.Text() || f.Structured() {
		t.Error("wide is a text format, only where a command has a wide table")
	}
}

// Durations are seconds beside a human string, to the millisecond; modes octal strings.
func TestDurationAndMode(t *testing.T) {
	d := NewDuration(1234567 * time.Microsecond)
	if d.Seconds != 1.235 || d.String != "1.235s" {
		t.Errorf("duration %+v", d)
	}
	if m := NewFileMode(0o600); m != "0600" {
		t.Errorf("mode %s", m)
	}
}
