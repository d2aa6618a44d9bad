package app

import (
	"context"
	"strings"
	"testing"
)

// Each command completes its own flags' values (declared where the command is built), and
// -o wide is accepted exactly by the commands whose table has a wide form.
func TestCommandsCompleteTheirOwnFlags(t *testing.T) {
	deps, _, root := adminHost(t)
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"join", "--skip-phases", ""}, []string{"preflight", "kubelet-start", "wait-ready"}},
		{[]string{"reset", "--skip-phases", ""}, []string{"remove-etcd-member", "remove-files"}},
		{[]string{"leave", "--skip-phases", ""}, []string{"cordon", "drain"}},
		{[]string{"token", "create", "--format", ""}, []string{"kjoin", "kubeadm"}},
		{[]string{"token", "list", "--sort-by", ""}, []string{".expires"}},
		{[]string{"nodes", "--sort-by", ""}, []string{".joinedAt"}},
		{[]string{"version", "-o", ""}, []string{"json", "yaml", "wide"}},
	} {
		_, out, errs := runArgs(ctx, deps, append([]string{"__complete"}, c.args...)...)
		for _, w := range c.want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("kjoin %s: no %q among the completions:\n%s%s", strings.Join(c.args, " "), w, out, errs)
			}
		}
	}
	for cmd, wide := range map[string]bool{"nodes": true, "token list": true, "verify": false, "diagnose": false} {
		code, _, errs := runArgs(ctx, deps, append(strings.Fields(cmd), "-o", "wide", "--root", root)...)
		if refused := code == 2 && strings.Contains(errs, "no wide table"); refused == wide {
			t.Errorf("kjoin %s -o wide: exit %d, wide table %v:\n%s", cmd, code, wide, errs)
		}
	}
}

// A flag error is answered in the format asked for, wherever -o stands.
func TestFormatFromArgs(t *testing.T) {
	for args, want := range map[string]string{
		"join --bad -o json":                      "json",
		"join -ojson --bad":                       "json",
		"join --token-file x --output=yaml --bad": "yaml",
		"join --unknown value -o json":            "json",
		"join --bad":                              "",
		"join -- -o json":                         "",
	} {
		if got := formatFromArgs(strings.Fields(args)); got != want {
			t.Errorf("%s: format %q, want %q", args, got, want)
		}
	}
}
