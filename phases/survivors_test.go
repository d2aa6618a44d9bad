package phases

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
)

// The node key of a pending CSR is kept on the node for a resumed join: 0600 from the start.
func TestPendingKeyIsPrivate(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	var mode os.FileMode
	h.env.Fault = func(p string) {
		if p == "tls-bootstrap/csr-created" {
			if st, err := os.Stat(h.env.Paths.Of(pendingKeyPath)); err == nil {
				mode = st.Mode().Perm()
			}
		}
	}
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	if mode != 0o600 {
		t.Errorf("pending key mode %04o while the CSR was pending, want 0600", mode)
	}
}

// A node whose name is not its hostname registers under its name only with
// --hostname-override; one whose name is its hostname gets no override.
func TestHostnameOverrideWhenTheNameDiffers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want bool
	}{{"w1", false}, {"worker-one", true}} {
		h := newTestHost(t)
		h.runner.node = tc.name
		o := h.options(t)
		o.NodeName = tc.name
		s := &State{Opts: o}
		if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, h.out)
		}
		flags, _ := os.ReadFile(h.env.Paths.Of(host.KubeletFlagsPath))
		if got := strings.Contains(string(flags), "--hostname-override="+tc.name); got != tc.want {
			t.Errorf("node %q on host w1: override %v, want %v:\n%s", tc.name, got, tc.want, flags)
		}
	}
}

// nodeRegistration.taints: [] means no taint at all, not kubeadm's default NoSchedule.
func TestMarkControlPlaneWithNoTaints(t *testing.T) {
	t.Parallel()
	h := newTestHost(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp2"}})
	s := &State{Opts: joinrequest.Options{NodeName: "cp2", ControlPlane: true, Timeouts: joinrequest.DefaultTimeouts(), TaintsSet: true}, AdminClient: h.client}
	if err := runPhase(MarkControlPlane, h.env, s); err != nil {
		t.Fatal(err)
	}
	n, _ := h.client.CoreV1().Nodes().Get(context.Background(), "cp2", metav1.GetOptions{})
	if len(n.Spec.Taints) != 0 || n.Labels[LabelControlPlane] != "" {
		t.Errorf("taints %v (want none), labels %v", n.Spec.Taints, n.Labels)
	}
}

// --wait-ready waits --wait-ready-timeout, not the short grace of a plain join.
func TestWaitReadyHonoursItsTimeout(t *testing.T) {
	t.Parallel()
	h := newTestHost(t, notReadyNode("w1"), leaseOf("w1"))
	o := h.options(t)
	o.WaitReady, o.WaitReadyTimeout, o.ReadyGrace = true, 3*time.Minute, time.Second
	start := h.env.Clock.Now()
	s := &State{Opts: o, NodeClient: h.client, Started: start}
	err := runPhase(WaitReady, h.env, s)
	if err == nil || !strings.Contains(err.Error(), "not Ready after 3m0s") {
		t.Fatalf("a Node NotReady throughout with --wait-ready-timeout 3m: %v", err)
	}
	if waited := h.env.Clock.Since(start); waited < 3*time.Minute {
		t.Errorf("gave up after %s of the clock, before --wait-ready-timeout", waited)
	}
}

// The control-plane components run with the host's proxy variables, as kubeadm's do; etcd
// without them.
func TestControlPlaneManifestsCarryTheProxy(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	c.env.Environ = func() []string {
		return []string{"PATH=/usr/bin", "HTTPS_PROXY=http://proxy.example:3128", "no_proxy=10.96.0.0/12"}
	}
	if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	for _, m := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"} {
		b, _ := os.ReadFile(c.env.Paths.Of("/etc/kubernetes/manifests/" + m + ".yaml"))
		has := strings.Contains(string(b), "name: HTTPS_PROXY\n      value: http://proxy.example:3128") && strings.Contains(string(b), "name: no_proxy")
		if has != (m != "etcd") || strings.Contains(string(b), "PATH") {
			t.Errorf("%s: proxy variables %v, want %v:\n%s", m, has, m != "etcd", b)
		}
	}
}

// Unpinned discovery is never silent: a warning naming the CA that was not verified and the
// pin to use, and the progress line says "NOT verified" instead of "verified".
func TestUnpinnedDiscoveryWarns(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	o := h.options(t)
	o.Pins, o.UnsafeSkipCAVerification = nil, true
	s := &State{Opts: o}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{Only: []string{"discovery"}}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	w := strings.Join(s.Warnings, "\n")
	if !strings.Contains(w, "cluster CA "+h.server.Pin+" was NOT verified") || !strings.Contains(w, "--discovery-token-ca-cert-hash "+h.server.Pin) {
		t.Errorf("warnings %q", w)
	}
	if strings.Contains(h.out.String(), " verified; ") || !strings.Contains(h.out.String(), "NOT verified (no pin)") {
		t.Errorf("progress:\n%s", h.out)
	}
	pinned := newTestHost(t)
	ps := &State{Opts: pinned.options(t)}
	if _, err := Run(context.Background(), pinned.env, ps, Join, RunOptions{Only: []string{"discovery"}}); err != nil || len(ps.Warnings) != 0 {
		t.Errorf("pinned discovery: %v, warnings %q", err, ps.Warnings)
	}
}

// As another user and without a container runtime, preflight reports both at once, root
// first; the runtime check is ignorable as kubeadm's (no socket found: kubeadm's default).
func TestPreflightReportsRootFirstAndTheRuntimeWithTheRest(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if err := os.Remove(h.env.Paths.Of("/var/run/containerd/containerd.sock")); err != nil {
		t.Fatal(err)
	}
	h.env.Geteuid = func() int { return 1000 }
	h.env.SocketReachable = func(string) bool { return false }
	o := h.options(t)
	if o.CRISocket != "unix:///var/run/containerd/containerd.sock" {
		t.Fatalf("no socket found: CRI socket %q, want kubeadm's default", o.CRISocket)
	}
	err := runPhase(Preflight, h.env, &State{Opts: o})
	lines := strings.Split(err.Error(), "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], "IsPrivilegedUser") || !strings.Contains(lines[2], "[ERROR CRI]: no container runtime socket") {
		t.Errorf("want root first, then the runtime:\n%v", err)
	}
	o.IgnorePreflight = map[string]bool{"cri": true}
	h.env.Geteuid = func() int { return 0 }
	s := &State{Opts: o}
	if err := runPhase(Preflight, h.env, s); err != nil || !strings.Contains(strings.Join(s.Warnings, "\n"), "CRI") {
		t.Errorf("--ignore-preflight-errors=CRI: %v, warnings %v", err, s.Warnings)
	}
	if err := RequireRoot(&host.Env{Geteuid: func() int { return 1000 }}, "kjoin reset"); err == nil || !strings.Contains(err.Error(), "kjoin reset must run as root") {
		t.Errorf("reset as another user: %v", err)
	}
}
