package phases

import (
	"context"
	"crypto/x509"
	"net/http"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/operr"
)

func TestControlPlaneJoin(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	s := &State{Opts: c.options(t)}
	results, err := Run(context.Background(), c.env, s, Join, RunOptions{})
	if err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	for _, r := range results {
		if r.Status == "skipped" || r.Status == "failed" {
			t.Errorf("phase %s %s (%s)", r.Name, r.Status, r.Reason)
		}
	}
	modes := map[string]os.FileMode{
		"/etc/kubernetes/pki/ca.crt": 0o644, "/etc/kubernetes/pki/ca.key": 0o600, "/etc/kubernetes/pki/sa.pub": 0o644, "/etc/kubernetes/pki/sa.key": 0o600,
		"/etc/kubernetes/pki/etcd/ca.key": 0o600, "/etc/kubernetes/pki/apiserver.crt": 0o644, "/etc/kubernetes/pki/apiserver.key": 0o600,
		"/etc/kubernetes/pki/etcd/healthcheck-client.crt": 0o644, "/etc/kubernetes/admin.conf": 0o600, "/etc/kubernetes/scheduler.conf": 0o600,
		"/etc/kubernetes/controller-manager.conf": 0o600, "/etc/kubernetes/manifests/etcd.yaml": 0o600, "/etc/kubernetes/manifests/kube-apiserver.yaml": 0o600,
		"/etc/kubernetes/manifests/kube-controller-manager.yaml": 0o600, "/etc/kubernetes/manifests/kube-scheduler.yaml": 0o600,
	}
	for p, mode := range modes {
		st, err := os.Stat(c.env.Paths.Of(p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %04o, want %04o", p, st.Mode().Perm(), mode)
		}
	}
	// etcd: one learner added, then promoted, under the join lock.
	if len(c.etcd.added) != 1 || len(c.etcd.promoted) != 1 || c.etcd.added[0] != c.etcd.promoted[0] || s.EtcdMemberID != c.etcd.added[0] {
		t.Errorf("etcd: added %x promoted %x state %x", c.etcd.added, c.etcd.promoted, s.EtcdMemberID)
	}
	if c.etcd.locks != 1 || c.etcd.unlocks != 1 {
		t.Errorf("join lock taken %d, released %d times", c.etcd.locks, c.etcd.unlocks)
	}
	manifest, _ := c.env.ReadFile(path.Join(ManifestsDir, "etcd.yaml"))
	for _, flag := range []string{"--initial-cluster=cp1=https://10.0.0.11:2380,cp2=https://10.0.0.12:2380", "--initial-cluster-state=existing", "--data-dir=/var/lib/etcd"} {
		if !hasFlag(manifest, flag) {
			t.Errorf("etcd.yaml lacks %s:\n%s", flag, manifest)
		}
	}
	node, err := c.client.CoreV1().Nodes().Get(context.Background(), "cp2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := node.Labels[LabelControlPlane]; !ok || len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != LabelControlPlane {
		t.Errorf("node labels %v taints %v", node.Labels, node.Spec.Taints)
	}
	j, _ := LoadJournal(c.env)
	if j.Role != "control-plane" || j.EtcdMemberID != s.EtcdMemberID {
		t.Errorf("journal %+v", j)
	}
}

func TestControlPlaneRerunAddsNoMember(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	c.env.PortInUse = func(int) bool { return true }
	s := &State{Opts: c.options(t)}
	if _, err := Run(context.Background(), c.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("re-run: %v\n%s", err, c.out)
	}
	if len(c.etcd.added) != 1 || len(c.etcd.promoted) != 1 {
		t.Errorf("re-run changed etcd: added %x promoted %x", c.etcd.added, c.etcd.promoted)
	}
	if s.Changed() {
		t.Error("re-run reports changed")
	}
}

// A learner left by an interrupted run is promoted, not added again.
func TestEtcdJoinResumesItsLearner(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	if _, err := c.etcd.MemberAddAsLearner(context.Background(), []string{"https://10.0.0.12:2380"}); err != nil {
		t.Fatal(err)
	}
	s := &State{Opts: c.options(t)}
	if _, err := Run(context.Background(), c.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	if len(c.etcd.added) != 1 || len(c.etcd.promoted) != 1 || s.EtcdMemberID != c.etcd.added[0] {
		t.Errorf("added %x promoted %x member %x", c.etcd.added, c.etcd.promoted, s.EtcdMemberID)
	}
}

// Another joiner holds the lock past the timeout: busy (exit 7), retryable, nothing added.
func TestEtcdJoinLockContentionIsBusy(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	c.etcd.lockHeld = true
	o := c.options(t)
	o.Timeouts.EtcdAPICall = 200 * time.Millisecond
	_, err := Run(context.Background(), c.env, &State{Opts: o}, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Busy || !strings.Contains(err.Error(), "etcd join lock") {
		t.Fatalf("got %v, want busy", err)
	}
	if e, _ := operr.As(err); !e.Retryable {
		t.Error("busy is not marked retryable")
	}
	if len(c.etcd.added) != 0 {
		t.Errorf("a member was added without the lock: %x", c.etcd.added)
	}
}

// A learner that never catches up: the join fails and removes the learner it added.
func TestEtcdJoinRemovesItsLearnerOnFailure(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	c.etcd.promoteRefusals = -1
	o := c.options(t)
	o.Timeouts.EtcdAPICall = 300 * time.Millisecond
	_, err := Run(context.Background(), c.env, &State{Opts: o}, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "did not catch up") {
		t.Fatalf("got %v", err)
	}
	if len(c.etcd.added) != 1 || len(c.etcd.removed) != 1 || c.etcd.removed[0] != c.etcd.added[0] {
		t.Errorf("added %x removed %x: the failed join must remove its own learner", c.etcd.added, c.etcd.removed)
	}
}

func TestControlPlanePrepareRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(c *cpHost, o *Options)
		code operr.Code
		want string
	}{
		{"wrong certificate key", func(c *cpHost, o *Options) {
			o.CertificateKey = strings.Repeat("ab", 32)
		}, operr.Auth, "does not match the uploaded certificates"},
		{"no controlPlaneEndpoint", func(c *cpHost, o *Options) {
			cm, _ := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
			cm.Data["ClusterConfiguration"] = strings.Replace(cm.Data["ClusterConfiguration"], "controlPlaneEndpoint: control-plane.lab:6443\n", "", 1)
			_, _ = c.client.CoreV1().ConfigMaps("kube-system").Update(context.Background(), cm, metav1.UpdateOptions{})
		}, operr.Preflight, "no controlPlaneEndpoint"},
		{"no kubeadm-config", func(c *cpHost, o *Options) {
			_ = c.client.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "kubeadm-config", metav1.DeleteOptions{})
		}, operr.Other, "no kube-system/kubeadm-config"},
		{"certificates expired from the cluster", func(c *cpHost, o *Options) {
			_ = c.client.CoreV1().Secrets("kube-system").Delete(context.Background(), "kubeadm-certs", metav1.DeleteOptions{})
		}, operr.Auth, "expire 2 hours after upload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCPHost(t)
			o := c.options(t)
			tc.edit(c, &o)
			_, err := Run(context.Background(), c.env, &State{Opts: o}, Join, RunOptions{})
			if operr.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (code %d), want code %d with %q", err, operr.CodeOf(err), tc.code, tc.want)
			}
			if len(c.etcd.added) != 0 {
				t.Error("etcd was changed by a refused join")
			}
		})
	}
}

func TestMarkControlPlaneKeepsExistingTaintsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	h := newTestHost(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp2"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}}}})
	s := &State{Opts: Options{NodeName: "cp2", ControlPlane: true, Timeouts: DefaultTimeouts()}, AdminClient: h.client}
	if err := MarkControlPlane.Run(context.Background(), h.env, s); err != nil || !s.Changed() {
		t.Fatalf("first: %v changed=%v", err, s.Changed())
	}
	s2 := &State{Opts: s.Opts, AdminClient: h.client}
	if err := MarkControlPlane.Run(context.Background(), h.env, s2); err != nil || s2.Changed() {
		t.Fatalf("second: %v changed=%v", err, s2.Changed())
	}
	n, _ := h.client.CoreV1().Nodes().Get(context.Background(), "cp2", metav1.GetOptions{})
	if len(n.Spec.Taints) != 2 || n.Labels[LabelExcludeFromLB] != "" {
		t.Errorf("taints %v labels %v", n.Spec.Taints, n.Labels)
	}
}

func TestMarkControlPlaneWaitsForRegistration(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: Options{NodeName: "cp2", ControlPlane: true, Timeouts: DefaultTimeouts()}, AdminClient: h.client}
	err := MarkControlPlane.Run(context.Background(), h.env, s)
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), `node "cp2" did not register`) {
		t.Fatalf("got %v", err)
	}
}

func TestWaitControlPlaneNamesTheUnhealthyComponent(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.env.HTTPClient = func(*x509.CertPool) *http.Client {
		return &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			code := http.StatusOK
			if r.URL.Port() == "10257" {
				code = http.StatusServiceUnavailable
			}
			return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: http.NoBody, Request: r, Header: http.Header{}}, nil
		})}
	}
	s := &State{Opts: Options{NodeName: "cp2", ControlPlane: true, AdvertiseAddress: "10.0.0.12", BindPort: 6443, Timeouts: DefaultTimeouts()},
		Discovery: &discovery.Result{CAData: h.server.CAPEM}}
	err := WaitControlPlane.Run(context.Background(), h.env, s)
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "kube-controller-manager is not healthy") || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(h.out.String(), "kube-apiserver is healthy") {
		t.Errorf("the API server check did not pass first:\n%s", h.out)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Reset of a control plane: refused when removing its member would cost etcd its quorum,
// allowed with --force; with a healthy peer the member goes and so does its data.
func TestResetControlPlaneQuorum(t *testing.T) {
	t.Parallel()
	join := func(t *testing.T) *cpHost {
		c := newCPHost(t)
		if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
			t.Fatal(err)
		}
		writeHost(t, c.env, "/var/lib/etcd/member/snap/db", "data", 0o600)
		return c
	}
	t.Run("peer unhealthy: refused", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		c.etcd.unhealthy["https://10.0.0.11:2379"] = true
		_, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
		if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "lose quorum") {
			t.Fatalf("got %v", err)
		}
		if c.etcd.member("https://10.0.0.12:2380") == nil || !c.env.Exists("/var/lib/etcd/member/snap/db") || !c.env.Exists("/etc/kubernetes/manifests/etcd.yaml") {
			t.Error("a refused reset removed the member, its data or its manifest")
		}
		rep, err := Reset(context.Background(), c.env, ResetOptions{Force: true}, nil)
		if err != nil || rep.EtcdMemberRemoved == "" || c.etcd.member("https://10.0.0.12:2380") != nil {
			t.Fatalf("--force: %+v %v", rep, err)
		}
	})
	t.Run("peer healthy: removed", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		rep, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.etcd.member("https://10.0.0.12:2380") != nil || rep.EtcdMemberRemoved == "" || rep.Role != "control-plane" {
			t.Errorf("report %+v", rep)
		}
		if c.env.Exists("/var/lib/etcd/member") || c.env.Exists("/etc/kubernetes/manifests/etcd.yaml") || c.env.Exists("/etc/kubernetes/pki/ca.key") {
			t.Error("reset left etcd data, a manifest or a key behind")
		}
	})
	t.Run("last member: refused", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		_, _ = c.etcd.MemberRemove(context.Background(), 1)
		_, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
		if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "last etcd member") {
			t.Fatalf("got %v", err)
		}
	})
}
