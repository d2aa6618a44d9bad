package phases

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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

// A config.yaml already on the node with the same settings in other formatting (kubeadm's,
// or an operator's comment) is left as it is: not rewritten, and the kubelet not disturbed.
func TestKubeletConfigSameSettingsOtherFormattingIsKept(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	p := h.env.Paths.Of(host.KubeletConfigPath)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	kept := append([]byte("# written by kubeadm\n"), b...)
	if err := os.WriteFile(p, kept, 0o644); err != nil {
		t.Fatal(err)
	}
	h.out.Reset()
	s := &State{Opts: h.options(t), BootstrapClient: h.client}
	if err := runPhase(KubeletConfig, h.env, s); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != string(kept) {
		t.Errorf("config.yaml with the same settings was rewritten:\n%s", got)
	}
	if !strings.Contains(h.out.String(), "already hold this configuration") {
		t.Errorf("output:\n%s", h.out)
	}
	// Other settings are written, whatever the formatting.
	if err := os.WriteFile(p, append([]byte("# written by kubeadm\n"), strings.Replace(string(b), "cgroupDriver: cgroupfs", "cgroupDriver: systemd", 1)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runPhase(KubeletConfig, h.env, &State{Opts: h.options(t), BootstrapClient: h.client}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != string(b) {
		t.Errorf("config.yaml with other settings was not rewritten:\n%s", got)
	}
}

// The etcd data directory is empty when absent or holding nothing; a directory that cannot
// be read is an error, never "empty".
func TestEtcdDataDirEmpty(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	check := func(want bool, wantErr bool) {
		t.Helper()
		empty, err := etcdDataDirEmpty(h.env, "/var/lib/etcd")
		if empty != want || (err != nil) != wantErr {
			t.Errorf("empty %v, err %v; want %v, error %v", empty, err, want, wantErr)
		}
	}
	check(true, false) // absent
	if err := os.MkdirAll(h.env.Paths.Of("/var/lib/etcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	check(true, false) // empty
	writeHost(t, h.env, "/var/lib/etcd/member/snap/db", "data", 0o600)
	check(false, false)
	if err := os.RemoveAll(h.env.Paths.Of("/var/lib/etcd")); err != nil {
		t.Fatal(err)
	}
	writeHost(t, h.env, "/var/lib/etcd", "a file", 0o600)
	check(false, true) // not a directory
}

// Reset removes the key of a CSR an interrupted join left pending (the journal names it),
// then the journal, and says the node left.
func TestResetRemovesThePendingKey(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	writeHost(t, h.env, pendingKeyPath, "key", 0o600)
	writeHost(t, h.env, host.CACertPath, "ca", 0o644)
	if err := (&Journal{Node: "w1", CSR: "kjoin-w1-x", PendingKey: pendingKeyPath, Files: []string{host.CACertPath}, Phases: []string{"preflight", "discovery"}}).Save(h.env); err != nil {
		t.Fatal(err)
	}
	rep, err := Reset(context.Background(), h.env, ResetOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.env.Exists(pendingKeyPath) || !slices.Contains(rep.RemovedFiles, pendingKeyPath) || h.env.Exists(JournalPath) {
		t.Errorf("pending key there %v, journal there %v; removed %v", h.env.Exists(pendingKeyPath), h.env.Exists(JournalPath), rep.RemovedFiles)
	}
	if want := fmt.Sprintf("removed %d files; the node left the cluster", len(rep.RemovedFiles)); !strings.Contains(h.out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, h.out)
	}
}

// A fresh CSR is waited for from the create's answer, never read back: here the answer
// already carries the certificate (the fake signs at once), so no other CSR request is made.
// Once it is issued, the journal forgets the pending key, the key file goes, and the log names
// what was written.
func TestTLSBootstrapFromTheCreatesAnswer(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	var verbs []string
	for _, a := range h.client.Actions() {
		if a.GetResource().Resource == "certificatesigningrequests" {
			verbs = append(verbs, a.GetVerb())
		}
	}
	if !slices.Equal(verbs, []string{"create"}) {
		t.Errorf("CSR requests %v, want the create alone", verbs)
	}
	j, err := LoadJournal(h.env)
	if err != nil || j.PendingKey != "" || h.env.Exists(pendingKeyPath) {
		t.Errorf("journal %+v (%v), pending key there %v: want both gone", j, err, h.env.Exists(pendingKeyPath))
	}
	if !strings.Contains(h.out.String(), "wrote "+s.ClientCertPath+" and "+host.KubeletKubeconfig) {
		t.Errorf("output:\n%s", h.out)
	}
}

// kubelet.conf that cannot be written fails the join at tls-bootstrap, naming it.
func TestKubeletKubeconfigUnwritableFailsTheJoin(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.env.Fault = func(p string) {
		if p == "tls-bootstrap/csr-created" {
			writeHost(t, h.env, host.KubeletKubeconfig+"/blocker", "a directory in kubelet.conf's place", 0o600)
		}
	}
	_, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "tls-bootstrap") || !strings.Contains(err.Error(), "kubelet.conf") {
		t.Fatalf("a kubelet.conf that cannot be written: %v\n%s", err, h.out)
	}
	if slices.Contains(h.runner.calls, "systemctl restart kubelet") {
		t.Error("the kubelet was started without its kubelet.conf")
	}
}

// wait-ready reports the Lease: found when it has a renew time, pending when it has none yet;
// and the Node's registration is logged once.
func TestWaitReadyReportsTheLease(t *testing.T) {
	t.Parallel()
	for _, renewed := range []bool{true, false} {
		var objs []runtime.Object
		if !renewed { // a Lease not renewed yet: the kubelet's create then finds it there
			objs = append(objs, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "kube-node-lease"}})
		}
		h := newTestHost(t, objs...)
		s := &State{Opts: h.options(t)}
		if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
			t.Fatalf("%v\n%s", err, h.out)
		}
		out := h.out.String()
		if s.LeaseFound != renewed || strings.Contains(out, `node "w1" holds its Lease`) != renewed || strings.Contains(out, `node "w1": Lease pending`) == renewed {
			t.Errorf("renewed %v: found %v\n%s", renewed, s.LeaseFound, out)
		}
		if n := strings.Count(out, `node "w1" registered`); n != 1 || s.RegisteredAfter <= 0 {
			t.Errorf("registration logged %d times, after %s; want once, after some time\n%s", n, s.RegisteredAfter, out)
		}
	}
}
