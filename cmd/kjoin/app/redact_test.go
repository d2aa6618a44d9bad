package app

import (
	"context"
	"strings"
	"testing"
)

// The flag parser's own errors quote the bad value; when that value is a token given to the
// wrong flag, the renderer is the only layer that redacts it, in text and in JSON.
func TestFlagParserErrorsNeverPrintATokenSecret(t *testing.T) {
	const secret = "0123456789abcdef"
	for _, args := range [][]string{
		{"join", "--apiserver-bind-port", "abcdef." + secret},
		{"join", "--apiserver-bind-port", "abcdef." + secret, "-o", "json"},
		{"join", "-o", "json", "--wait-ready-timeout", "abcdef." + secret},
	} {
		deps, _, _ := testDeps("", nil)
		code, out, errs := runArgs(context.Background(), deps, args...)
		if code == 0 {
			t.Errorf("%v: exit 0", args)
		}
		if strings.Contains(out+errs, secret) {
			t.Errorf("%v printed the token secret:\nstdout: %s\nstderr: %s", args, out, errs)
		}
		if !strings.Contains(out+errs, "abcdef.") {
			t.Errorf("%v: the bad value is not named at all (its id may be shown):\nstdout: %s\nstderr: %s", args, out, errs)
		}
	}
}

// Every usage error exits 2 with the command's usage line, including cobra's argument checks;
// an argument a bare optional-value flag would have taken is named with the '=' form.
func TestArgumentErrorsAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "delete"}, "usage: kjoin token delete"},
		{[]string{"version", "extra"}, "usage: kjoin version"},
		{[]string{"token", "create", "tok", "extra"}, "usage: kjoin token create"},
		// join takes several endpoints: a word that is not one is a bad value, named.
		{[]string{"join", "cp.example:6443", "extra"}, `api-server-endpoint argument "extra": want host:port`},
		{[]string{"join", "--wait", "kubelet", "cp.example:6443"}, "--wait=kubelet"},
		{[]string{"verify", "--wait", "5s", "w1"}, "--wait=5s"},
	} {
		deps, _, _ := testDeps("", nil)
		code, out, errs := runArgs(context.Background(), deps, tc.args...)
		if code != 2 || !strings.Contains(out+errs, tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s%s", tc.args, code, tc.want, out, errs)
		}
	}
}
