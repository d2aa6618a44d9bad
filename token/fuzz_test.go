package token

import (
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{"abcdef.0123456789abcdef", "ABCDEF.0123456789abcdef", "abcdef0123456789abcdef", "abcdef.0123456789abcdef\n", "", "......"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := Parse(s)
		if err != nil {
			if strings.Contains(err.Error(), s) && len(s) > 8 {
				t.Errorf("the error repeats the input (a possible secret): %v", err)
			}
			return
		}
		if tk.Full() != s {
			t.Errorf("Full() = %q, want %q", tk.Full(), s)
		}
		if strings.Contains(tk.String(), tk.Secret) {
			t.Errorf("String() reveals the secret: %q", tk.String())
		}
	})
}
