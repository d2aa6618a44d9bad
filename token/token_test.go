package token

import (
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"abcdef.0123456789abcdef", true},
		{"ABCDEF.0123456789abcdef", false},
		{"abcdef0123456789abcdef", false},
		{"abcde.0123456789abcdef", false},
		{"abcdef.0123456789abcdef ", false},
		{"", false},
	} {
		tok, err := Parse(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("Parse(%q) err=%v, want ok=%v", tc.in, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), "0123456789") {
			t.Errorf("Parse error leaks the secret: %v", err)
		}
		if tc.ok && (tok.ID != "abcdef" || tok.Full() != tc.in) {
			t.Errorf("Parse(%q) = %+v", tc.in, tok)
		}
	}
}

func TestStringRedacts(t *testing.T) {
	tok, _ := Parse("abcdef.0123456789abcdef")
	for _, s := range []string{tok.String(), fmt.Sprintf("%v", tok), fmt.Sprintf("%#v", tok), fmt.Sprint(tok)} {
		if strings.Contains(s, "0123456789abcdef") {
			t.Errorf("secret printed: %s", s)
		}
	}
	if tok.SecretName() != "bootstrap-token-abcdef" {
		t.Errorf("SecretName = %s", tok.SecretName())
	}
}
