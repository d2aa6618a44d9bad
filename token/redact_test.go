package token

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	key := strings.Repeat("0a", 32)
	for in, want := range map[string]string{
		"abcdef.0123456789abcdef":                 "abcdef.<hidden>",
		`endpoint "abcdef.0123456789abcdef:6443"`: `endpoint "abcdef.<hidden>:6443"`,
		"pin " + key:                   "pin <hidden: 64 hex digits>",
		"sha256:" + key:                "sha256:" + key,
		"cp.example:6443":              "cp.example:6443",
		"kjoin-w1-0123456789ab":        "kjoin-w1-0123456789ab",
		"x" + key + "0":                "x" + key + "0", // 65 hex digits: not a key
		"a.b abcdefg.0123456789abcdef": "a.b abcdefg.0123456789abcdef",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
