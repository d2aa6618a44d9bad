package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reset asks on a terminal (as kubeadm); only "y" proceeds; -f/--force skips the question; the
// etcd quorum override is a flag of its own.
func TestResetConfirmation(t *testing.T) {
	setup := func(t *testing.T) (string, string) {
		root := t.TempDir()
		conf := filepath.Join(root, "etc/kubernetes/kubelet.conf")
		if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(conf, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return root, conf
	}
	for _, c := range []struct {
		name, stdin string
		terminal    bool
		args        []string
		removed     bool
		code        int
	}{
		{"terminal, no answer", "", true, nil, false, 1},
		{"terminal, n", "n\n", true, nil, false, 1},
		{"terminal, y", "y\n", true, nil, true, 0},
		{"terminal, -f", "", true, []string{"-f"}, true, 0},
		{"terminal, --force", "", true, []string{"--force"}, true, 0},
		{"not a terminal", "", false, nil, true, 0},
		{"terminal, --dry-run", "", true, []string{"--dry-run"}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, conf := setup(t)
			deps, out, errb := testDeps(c.stdin, nil)
			deps.InIsTerminal = func() bool { return c.terminal }
			code := Run(context.Background(), deps, append([]string{"reset", "--root", root, "--skip-phases", "stop-kubelet,mark-node"}, c.args...))
			_, err := os.Stat(conf)
			if code != c.code || (err != nil) != c.removed {
				t.Errorf("exit %d (want %d), kubelet.conf removed %v (want %v)\n%s", code, c.code, err != nil, c.removed, errb)
			}
			if asked := strings.Contains(errb.String(), "Are you sure"); asked != (c.terminal && len(c.args) == 0) {
				t.Errorf("asked %v:\n%s", asked, errb)
			}
			if dry := strings.Contains(out.String(), "Dry run: nothing was changed. Resetting this node (worker) would:\n  - remove /etc/kubernetes/kubelet.conf\n"); dry != (c.name == "terminal, --dry-run") {
				t.Errorf("dry run's plan printed %v:\n%s", dry, out)
			}
		})
	}
	cmd := NewCmdReset(&Deps{}, newGlobals())
	if f := cmd.Flags().Lookup("force"); f == nil || f.Shorthand != "f" || !strings.Contains(f.Usage, "confirmation") {
		t.Errorf("--force: %+v", f)
	}
	if cmd.Flags().Lookup("allow-etcd-quorum-loss") == nil {
		t.Error("no --allow-etcd-quorum-loss")
	}
}
