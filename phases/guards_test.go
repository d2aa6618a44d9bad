package phases

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/tlsbootstrap"
)

// A re-run keeps the kubelet's client certificate only when it is this node's: a valid
// certificate from the pinned CA for another node is not taken for this one.
func TestResumedIdentityMustNameThisNode(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{Only: []string{"discovery"}}); err != nil {
		t.Fatal(err)
	}
	issue := func(node string) {
		key, _ := pki.NewECKey()
		csr, _ := tlsbootstrap.NewCSR(node, key)
		cert, err := h.server.SignCSR(csr)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, _ := pki.EncodeKey(key)
		p := path.Join(host.KubeletPKIDir, "kubelet-client-2026-01-01-00-00-00.pem")
		writeHost(t, h.env, p, string(cert)+string(keyPEM), 0o600)
		_ = os.Remove(h.env.Paths.Of(host.KubeletClientCurrent))
		if err := os.Symlink(p, h.env.Paths.Of(host.KubeletClientCurrent)); err != nil {
			t.Fatal(err)
		}
	}
	issue("w1")
	if _, ok := validIdentity(h.env, s); !ok {
		t.Fatal("this node's own certificate is not taken")
	}
	issue("w9")
	if _, ok := validIdentity(h.env, s); ok {
		t.Error("another node's certificate (w9) is taken for w1")
	}
}

// A CSR of an interrupted run that has vanished is forgotten, not resumed: the join creates a
// new one and completes.
func TestVanishedCSRIsForgotten(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	kept, _ := pki.NewECKey()
	keyPEM, _ := pki.EncodeKey(kept)
	writeHost(t, h.env, pendingKeyPath, string(keyPEM), 0o600)
	if err := (&Journal{Node: "w1", CSR: "kjoin-w1-0123456789ab", PendingKey: pendingKeyPath, Phases: []string{"preflight", "discovery"}}).Save(h.env); err != nil {
		t.Fatal(err)
	}
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("a vanished CSR broke the join: %v\n%s", err, h.out)
	}
	if s.CSRName == "kjoin-w1-0123456789ab" || !strings.Contains(h.out.String(), "is gone") || strings.Contains(h.out.String(), "could not save the journal") {
		t.Errorf("CSR %q; output:\n%s", s.CSRName, h.out)
	}
	j, _ := LoadJournal(h.env)
	if j.CSR == "kjoin-w1-0123456789ab" {
		t.Error("the journal still names the vanished CSR")
	}
}

// Reset's confinement: the allowed directory itself, a sibling sharing its prefix
// (/etc/kubernetes-backup) and a path climbing out are never removed.
func TestResetConfinementIsExact(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	d := decoys{"/etc/kubernetes-backup/admin.conf": "backup", "/etc/kubernetes/other": "kept", "/var/lib/kubelet-old/x": "old"}
	plant(t, h.env, d)
	if err := (&Journal{Node: "w1", Files: []string{"/etc/kubernetes", "/etc/kubernetes-backup/admin.conf", "/var/lib/kubelet-old/x", "/var/lib/kubelet/../kubelet-old/x", "/var/lib/kjoin"}}).Save(h.env); err != nil {
		t.Fatal(err)
	}
	if _, err := Reset(context.Background(), h.env, ResetOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	d.assertIntact(t, h.env)
	if !h.env.Exists(host.KubernetesDir) {
		t.Error("reset removed /etc/kubernetes itself")
	}
}

// A journal owned by another user is refused (by reset and by a join).
func TestJournalOwnedByAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the journal another owner")
	}
	t.Parallel()
	h := newTestHost(t)
	writeHost(t, h.env, host.KubeletKubeconfig, "x", 0o600)
	if err := (&Journal{Node: "w1", Files: []string{host.KubeletKubeconfig}}).Save(h.env); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(h.env.Paths.Of(JournalPath), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if _, err := Reset(context.Background(), h.env, ResetOptions{}, nil); operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "uid 4242") {
		t.Errorf("reset with a journal of uid 4242: %v", err)
	}
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); operr.CodeOf(err) != operr.Preflight {
		t.Errorf("join with a journal of uid 4242: %v", err)
	}
	if !h.env.Exists(host.KubeletKubeconfig) {
		t.Error("a refused journal's file was removed")
	}
}

// A journal that is a symlink, a FIFO or mode 0644 is refused; it is checked and read through
// one descriptor (a FIFO would block a read, a symlink is never followed).
func TestJournalThatIsNotAPlainPrivateFileIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		make func(t *testing.T, p string)
		want string
	}{
		{"symlink", func(t *testing.T, p string) {
			target := filepath.Join(filepath.Dir(p), "elsewhere.json")
			if err := os.WriteFile(target, []byte(`{"node":"w1"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, "a symlink"},
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"0644", func(t *testing.T, p string) {
			if err := os.WriteFile(p, []byte(`{"node":"w1"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "mode 0644"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHost(t)
			p := h.env.Paths.Of(JournalPath)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			tc.make(t, p)
			_, err := LoadJournal(h.env)
			if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want a refusal naming %q", err, tc.want)
			}
		})
	}
}
