package phases

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kjoin.dev/kjoin/operr"
)

func writeHost(t *testing.T, e *Env, hostPath, content string, mode os.FileMode) {
	t.Helper()
	p := e.Paths.Of(hostPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// Finding 7: reset deletes only its own files, whatever the journal lists.
func TestResetDeletesOnlyItsOwn(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	e := h.env
	writeHost(t, e, "/etc/passwd", "root:x:0:0\n", 0o644)
	writeHost(t, e, "/etc/kubernetes/kubelet.conf", "x", 0o600)
	// /var/lib/kubelet/plugins is a symlink to a directory outside the allowed ones.
	writeHost(t, e, "/srv/precious/ca.crt", "precious", 0o644)
	if err := os.MkdirAll(e.Paths.Of("/var/lib/kubelet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.Paths.Of("/srv/precious"), e.Paths.Of("/var/lib/kubelet/plugins")); err != nil {
		t.Fatal(err)
	}
	j := &Journal{Node: "w1", Files: []string{
		"/etc/passwd", "/etc/kubernetes/../../etc/passwd", "relative/file", "/var/lib/kubelet/plugins/ca.crt", "/etc/kubernetes/kubelet.conf", "/var/lib",
	}}
	if err := j.Save(e); err != nil {
		t.Fatal(err)
	}
	rep, err := Reset(context.Background(), e, ResetOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{"/etc/passwd", "/srv/precious/ca.crt", "/var/lib"} {
		if _, err := os.Stat(e.Paths.Of(keep)); err != nil {
			t.Errorf("reset removed %s: %v", keep, err)
		}
	}
	if e.Exists("/etc/kubernetes/kubelet.conf") {
		t.Error("reset kept its own kubelet.conf")
	}
	w := strings.Join(rep.Warnings, "\n")
	for _, want := range []string{"/etc/passwd: outside", "relative/file: not an absolute path", "parent /var/lib/kubelet/plugins is a symlink"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
}

func TestResetRefusesAJournalOthersCouldWrite(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	writeHost(t, h.env, "/etc/kubernetes/kubelet.conf", "x", 0o600)
	if err := (&Journal{Node: "w1", Files: []string{"/etc/kubernetes/kubelet.conf"}}).Save(h.env); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(h.env.Paths.Of(JournalPath), 0o666); err != nil {
		t.Fatal(err)
	}
	_, err := Reset(context.Background(), h.env, ResetOptions{}, nil)
	if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "mode 0666") || !strings.Contains(operr.HintOf(err), "chmod 600") {
		t.Fatalf("got %v (hint %q)", err, operr.HintOf(err))
	}
	if !h.env.Exists("/etc/kubernetes/kubelet.conf") {
		t.Error("a refused reset removed files")
	}
}

const etcdManifest = `apiVersion: v1
kind: Pod
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://127.0.0.1:1
    - --initial-advertise-peer-urls=https://10.0.0.12:2380
    - --data-dir=/var/lib/etcd
    - --trusted-ca-file=/srv/certs/etcd/ca.crt
`

// Without its etcd client certificate, reset cannot remove the member: it must not wipe the
// member's data either (it may still be in the cluster), unless --force.
func TestResetKeepsEtcdDataWhileMemberMayRemain(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	e := h.env
	writeHost(t, e, "/etc/kubernetes/manifests/etcd.yaml", etcdManifest, 0o600)
	writeHost(t, e, "/var/lib/etcd/member/snap/db", "data", 0o600)
	_, err := Reset(context.Background(), e, ResetOptions{}, nil)
	if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "etcd client certificate") || !strings.Contains(err.Error(), "/srv/certs/etcd/ca.crt") {
		t.Fatalf("got %v; want a refusal naming the certificate from the manifest's certificates dir", err)
	}
	if !e.Exists("/var/lib/etcd/member/snap/db") || !e.Exists("/etc/kubernetes/manifests/etcd.yaml") {
		t.Fatal("a refused reset removed etcd data or the manifest")
	}
	rep, err := Reset(context.Background(), e, ResetOptions{Force: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Exists("/var/lib/etcd/member") || !e.Exists("/var/lib/etcd") {
		t.Errorf("--force: data dir should be emptied and kept; report %+v", rep)
	}
}

// Reset is a workflow: per-phase results, --skip-phases, the same runner as join.
func TestResetPhasesAndSkip(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := Reset(context.Background(), h.env, ResetOptions{}, []string{"stop-kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, p := range rep.Phases {
		status[p.Name] = p.Status
	}
	want := map[string]string{"delete-node": "skipped", "remove-etcd-member": "skipped", "remove-static-pods": "unchanged",
		"stop-kubelet": "skipped", "mark-node": "skipped", "remove-files": "ran"}
	for name, st := range want {
		if status[name] != st {
			t.Errorf("phase %s: %q, want %q (all: %v)", name, status[name], st, status)
		}
	}
	if !h.runner.active || rep.KubeletStopped {
		t.Error("--skip-phases stop-kubelet stopped the kubelet")
	}
	if _, err := Reset(context.Background(), h.env, ResetOptions{}, []string{"no-such-phase"}); operr.CodeOf(err) != operr.Usage {
		t.Errorf("unknown phase: %v", err)
	}
}
