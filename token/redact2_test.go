package token

import (
	"strings"
	"testing"
)

// Two tokens one character apart are both hidden (a regexp match eats the separator).
func TestRedactTokensOneCharacterApart(t *testing.T) {
	for _, in := range []string{"abcdef.0123456789abcdef ghijkl.0123456789abcdef", "abcdef.0123456789abcdef,ghijkl.0123456789abcdef",
		"abcdef.0123456789abcdef.abcdef.0123456789abcdef", "x=abcdef.0123456789abcdef,y=ghijkl.0123456789abcdef,z=mnopqr.0123456789abcdef"} {
		if got := Redact(in); strings.Contains(got, "0123456789abcdef") || strings.Count(got, "<hidden>") != strings.Count(in, "0123456789abcdef") {
			t.Errorf("Redact(%q) = %q", in, got)
		}
	}
}
