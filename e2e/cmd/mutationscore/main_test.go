package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A survivor's key names its function and its line's text, not its line number: code that
// moves keeps its key; a changed line gets a new one.
func TestKeysSurviveMovedCode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.go")
	src := "package x\n\ntype T struct{}\n\nfunc (t *T) Check(a, b int) bool {\n\treturn a  <  b\n}\n\nvar v = 1 + 2\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := readSource(p)
	if err != nil {
		t.Fatal(err)
	}
	if f, l := s.funcAt(6), s.line(6); f != "T.Check" || l != "return a < b" {
		t.Errorf("line 6: %q %q", f, l)
	}
	if f := s.funcAt(9); f != "(package level)" {
		t.Errorf("line 9: %q", f)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(src, "type T struct{}\n", "type T struct{}\n\n// moved\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	moved, err := readSource(p)
	if err != nil {
		t.Fatal(err)
	}
	if f, l := moved.funcAt(8), moved.line(8); f != "T.Check" || l != "return a < b" {
		t.Errorf("moved line 8: %q %q", f, l)
	}
}

// The baseline's lines need a reason; the order it is written in is stable.
func TestBaselineRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.tsv")
	k := "token/manage.go\tList\tCONDITIONALS_BOUNDARY\treturn out[i].ID < out[j].ID\t1"
	if err := writeBaseline(p, map[string]string{k: "sort order only"}, []string{k, k}); err != nil {
		t.Fatal(err)
	}
	m, order, err := readBaseline(p)
	if err != nil || len(order) != 1 || m[k] != "sort order only" {
		t.Fatalf("%v %v %v", m, order, err)
	}
	if err := os.WriteFile(p, []byte(k+"\t\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readBaseline(p); err == nil {
		t.Error("a baseline line without a reason was accepted")
	}
	if got := pkgOfKey(k); got != "token" {
		t.Errorf("pkgOfKey %q", got)
	}
}
