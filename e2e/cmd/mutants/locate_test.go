package main

import (
	"strings"
	"testing"
)

const src = `package p

const (
	A Code = 1
	B Code = 2
)

func (s *S) check(x int) bool {
	if x  >  0 &&
		x < 9 {
		return true
	}
	return false
}

func other(x int) bool {
	if x > 0 && x < 9 {
		return true
	}
	return x > 0 && x < 9
}
`

// A mutation finds its code inside its declaration whatever the spacing, and nowhere else.
func TestApplyFindsTheCodeInItsDeclaration(t *testing.T) {
	out, err := apply("p.go", []byte(src), "S.check", "if x > 0 && x < 9 {", "if false {")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "func (s *S) check(x int) bool {\n\tif false {\n\t\treturn true") || !strings.Contains(string(out), "func other(x int) bool {\n\tif x > 0 && x < 9 {") {
		t.Errorf("mutated:\n%s", out)
	}
	if out, err := apply("p.go", []byte(src), "B", "B Code = 2", "B Code = 7"); err != nil || !strings.Contains(string(out), "B Code = 7") {
		t.Errorf("const: %v\n%s", err, out)
	}
	for _, bad := range []struct{ decl, from string }{
		{"check", "if x > 0"},       // a method is named with its type
		{"S.check", "if x >= 0"},    // code not there
		{"other", "x > 0 && x < 9"}, // there twice
		{"missing", "return true"},  // no such declaration
	} {
		if _, err := apply("p.go", []byte(src), bad.decl, bad.from, "x"); err == nil {
			t.Errorf("%s %q: applied", bad.decl, bad.from)
		}
	}
}
