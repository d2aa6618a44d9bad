package phases

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

func writeHost(t *testing.T, e *host.Env, hostPath, content string, mode os.FileMode) {
	t.Helper()
	p := e.Paths.Of(hostPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// Reset deletes only its own files, whatever the journal lists.
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
	rep, err := Reset(context.Background(), e, ResetOptions{AllowEtcdQuorumLoss: true}, nil)
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

func TestResetUndoesAWorkerJoinAndIsIdempotent(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	unrelated := h.env.Paths.Of("/etc/kubernetes/unrelated.conf")
	_ = os.WriteFile(unrelated, []byte("x"), 0o600)
	rep, err := Reset(context.Background(), h.env, ResetOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Changed || !rep.KubeletStopped || rep.Node != "w1" || rep.Role != "worker" {
		t.Errorf("report %+v", rep)
	}
	for _, p := range []string{host.KubeletKubeconfig, host.CACertPath, host.KubeletConfigPath, host.KubeletFlagsPath, host.KubeletInstancePath, host.KubeletClientCurrent, JournalPath} {
		if _, err := os.Lstat(h.env.Paths.Of(p)); err == nil {
			t.Errorf("%s survived reset", p)
		}
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Error("reset removed a file the join did not write")
	}
	h.runner.active = false
	rep, err = Reset(context.Background(), h.env, ResetOptions{}, nil)
	if err != nil || rep.Changed {
		t.Errorf("second reset: %+v %v", rep, err)
	}
	// And the node can join again (once its old Node is gone or no longer Ready, kubeadm's rule).
	_ = h.client.CoreV1().Nodes().Delete(context.Background(), "w1", metav1.DeleteOptions{})
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatalf("join after reset: %v", err)
	}
}

func TestResetMarksOrDeletesTheNode(t *testing.T) {
	t.Parallel()
	joined := func(t *testing.T) *testHost {
		h := newTestHost(t)
		if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
			t.Fatal(err)
		}
		return h
	}
	t.Run("mark", func(t *testing.T) {
		h := joined(t)
		rep, err := Reset(context.Background(), h.env, ResetOptions{}, nil)
		if err != nil || rep.NodeDeleted {
			t.Fatalf("%+v %v", rep, err)
		}
		n, err := h.client.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{})
		if err != nil || ready(n) || n.Status.Conditions[0].Reason != "KjoinReset" {
			t.Errorf("node after reset: %+v %v", n.Status.Conditions, err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		h := joined(t)
		if _, err := Reset(context.Background(), h.env, ResetOptions{DeleteNode: true}, nil); operr.CodeOf(err) != operr.Usage || !strings.Contains(err.Error(), "needs admin credentials") {
			t.Fatalf("without admin.conf: %v", err)
		}
		writeHost(t, h.env, host.AdminKubeconfig, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://cp.example:6443'}\nusers:\n- name: u\n  user: {token: admin}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n", 0o600)
		rep, err := Reset(context.Background(), h.env, ResetOptions{DeleteNode: true}, nil)
		if err != nil || !rep.NodeDeleted {
			t.Fatalf("%+v %v", rep, err)
		}
		if _, err := h.client.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{}); err == nil {
			t.Error("the Node survived --delete-node")
		}
	})
}
