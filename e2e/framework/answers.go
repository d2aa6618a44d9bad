//go:build e2e

package framework

import (
	"encoding/json"
	"testing"

	"kjoin.dev/kjoin/e2e/lab"
)

// Answer decodes a command's -o json answer into T, one of the output package's types (the
// very types kjoin prints), failing the test with the command's output when it is not one.
func Answer[T any](t testing.TB, r lab.Result) T {
	t.Helper()
	var out T
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
		t.Fatalf("-o json answer: %v\n%s\n%s", err, r.Stdout, Tail(r.Stderr, 30))
	}
	return out
}

// Tail is the last n lines of s.
func Tail(s string, n int) string { return lab.Tail(s, n) }
