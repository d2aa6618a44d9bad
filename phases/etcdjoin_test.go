package phases

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/operr"
)

func TestControlPlaneJoin(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	// The fixture's keys are ECDSA (fast); this one join uses kubeadm's default, RSA-2048.
	editClusterConfiguration(t, c, "encryptionAlgorithm: ECDSA-P256", "encryptionAlgorithm: RSA-2048")
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
	if b, _ := c.env.ReadFile("/etc/kubernetes/pki/apiserver.key"); !strings.Contains(string(b), "RSA PRIVATE KEY") {
		t.Errorf("apiserver.key is not the RSA key the cluster's encryptionAlgorithm asks for:\n%.40s", b)
	}
	// etcd: one learner added, then promoted, under the join lock.
	if len(c.etcd.Added) != 1 || len(c.etcd.Promoted) != 1 || c.etcd.Added[0] != c.etcd.Promoted[0] || s.EtcdMemberID != c.etcd.Added[0] {
		t.Errorf("etcd: added %x promoted %x state %x", c.etcd.Added, c.etcd.Promoted, s.EtcdMemberID)
	}
	if c.etcd.Locks != 1 || c.etcd.Unlocks != 1 {
		t.Errorf("join lock taken %d, released %d times", c.etcd.Locks, c.etcd.Unlocks)
	}
	manifest, _ := c.env.ReadFile(path.Join(host.ManifestsDir, "etcd.yaml"))
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
	if len(c.etcd.Added) != 1 || len(c.etcd.Promoted) != 1 {
		t.Errorf("re-run changed etcd: added %x promoted %x", c.etcd.Added, c.etcd.Promoted)
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
	if len(c.etcd.Added) != 1 || len(c.etcd.Promoted) != 1 || s.EtcdMemberID != c.etcd.Added[0] {
		t.Errorf("added %x promoted %x member %x", c.etcd.Added, c.etcd.Promoted, s.EtcdMemberID)
	}
}

// A run killed holding the join lock left its lease in the journal: the next run revokes it
// (instead of waiting out its TTL), and records its own lease while it holds the lock.
func TestEtcdJoinRevokesTheLockLeaseOfAnInterruptedRun(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	c.etcd.LockLeases = map[int64]bool{0x77: true}
	s := &State{Opts: c.options(t), Journal: &Journal{EtcdLockLease: 0x77}}
	if _, err := Run(context.Background(), c.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	if len(c.etcd.Revoked) != 1 || c.etcd.Revoked[0] != 0x77 {
		t.Errorf("revoked %x, want the interrupted run's lease 77", c.etcd.Revoked)
	}
	if s.Journal.EtcdLockLease != 0 {
		t.Errorf("the journal still names lock lease %x after the lock was released", s.Journal.EtcdLockLease)
	}
	j, err := LoadJournal(c.env)
	if err != nil || j.EtcdLockLease != 0 {
		t.Errorf("saved journal names lock lease %x (%v)", j.EtcdLockLease, err)
	}
}

// A journal naming a lease that holds no join lock (another's lease, say the API server's)
// makes the join revoke nothing.
func TestEtcdJoinRevokesOnlyALockLease(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	c.etcd.LockLeases = map[int64]bool{0x4b1: true}
	s := &State{Opts: c.options(t), Journal: &Journal{EtcdLockLease: 0x99}}
	if _, err := Run(context.Background(), c.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	if len(c.etcd.Revoked) != 0 {
		t.Errorf("revoked %x: a lease that holds no join lock must be left alone", c.etcd.Revoked)
	}
}

// Another joiner holds the lock past the timeout: busy (exit 7), retryable, nothing added.
func TestEtcdJoinLockContentionIsBusy(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	c.etcd.LockHeld = true
	o := c.options(t)
	o.Timeouts.EtcdAPICall = 200 * time.Millisecond
	_, err := Run(context.Background(), c.env, &State{Opts: o}, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Busy || !strings.Contains(err.Error(), "etcd join lock") {
		t.Fatalf("got %v, want busy", err)
	}
	if e, _ := operr.As(err); !e.Retryable {
		t.Error("busy is not marked retryable")
	}
	if len(c.etcd.Added) != 0 {
		t.Errorf("a member was added without the lock: %x", c.etcd.Added)
	}
}

// A learner that never catches up: the join fails and removes the learner it added.
func TestEtcdJoinRemovesItsLearnerOnFailure(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	c.etcd.PromoteRefusals = -1
	o := c.options(t)
	o.Timeouts.EtcdAPICall = 300 * time.Millisecond
	_, err := Run(context.Background(), c.env, &State{Opts: o}, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "did not catch up") {
		t.Fatalf("got %v", err)
	}
	if len(c.etcd.Added) != 1 || len(c.etcd.Removed) != 1 || c.etcd.Removed[0] != c.etcd.Added[0] {
		t.Errorf("added %x removed %x: the failed join must remove its own learner", c.etcd.Added, c.etcd.Removed)
	}
	// No manifest is left that would start the removed member's etcd.
	if c.env.Exists(path.Join(host.ManifestsDir, "etcd.yaml")) {
		t.Error("the etcd manifest of the removed learner is still there")
	}
}

// The API server, controller-manager and scheduler start only once the local etcd member
// votes: no manifest of theirs exists while the learner catches up or when it is promoted.
func TestControlPlaneManifestsWaitForEtcdVoter(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	pods := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	early := map[string]bool{}
	seen := func() {
		for _, p := range pods {
			if c.env.Exists(path.Join(host.ManifestsDir, p+".yaml")) {
				early[p] = true
			}
		}
	}
	started := c.etcd.Started
	c.etcd.Started = func() bool { seen(); return started() }
	promotions := 0
	c.etcd.OnPromote = func() { promotions++; seen() }
	if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	if promotions != 1 {
		t.Fatalf("the learner was promoted %d times, want 1", promotions)
	}
	if len(early) != 0 {
		t.Errorf("manifests written before the etcd member voted: %v", early)
	}
	for _, p := range pods {
		if !c.env.Exists(path.Join(host.ManifestsDir, p+".yaml")) {
			t.Errorf("%s.yaml not written after the join", p)
		}
	}
}

// control-plane-start run on its own (kjoin join phase control-plane-start) renders the
// manifests from the cluster's configuration and writes them, and nothing else.
func TestControlPlaneStartAlone(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{Only: []string{"control-plane-start"}}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	for _, p := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		b, err := c.env.ReadFile(path.Join(host.ManifestsDir, p+".yaml"))
		if err != nil || !strings.Contains(string(b), "component: "+p) {
			t.Errorf("%s.yaml: %v\n%s", p, err, b)
		}
	}
	if c.env.Exists(path.Join(host.ManifestsDir, "etcd.yaml")) || c.env.Exists("/etc/kubernetes/pki/apiserver.crt") || len(c.etcd.Added) != 0 {
		t.Error("control-plane-start alone did more than write its three manifests")
	}
}

// restartEtcd signals exactly this node's etcd: named after the node, with its peer URL.
func TestRestartEtcdSignalsOnlyThisNodesEtcd(t *testing.T) {
	t.Parallel()
	procs := []host.Process{
		{PID: 2}, // a kernel thread: no command line
		{PID: 10, Args: []string{"etcd", "--name=cp3", "--initial-advertise-peer-urls=https://10.0.0.13:2380"}},
		{PID: 11, Args: []string{"/usr/local/bin/etcd", "--name=cp2", "--initial-advertise-peer-urls=https://10.0.0.12:2380"}},
		{PID: 12, Args: []string{"kube-apiserver", "--name=cp2", "--initial-advertise-peer-urls=https://10.0.0.12:2380"}},
		{PID: 13, Args: []string{"etcd", "--name=cp2", "--initial-advertise-peer-urls=https://10.0.0.99:2380"}},
	}
	var signalled []int
	e := &host.Env{
		Processes: func() ([]host.Process, error) { return procs, nil },
		Signal:    func(pid int, sig syscall.Signal) error { signalled = append(signalled, pid); return nil },
	}
	if err := restartEtcd(e, "cp2", "https://10.0.0.12:2380"); err != nil || !slices.Equal(signalled, []int{11}) {
		t.Fatalf("err %v, signalled %v; want only pid 11", err, signalled)
	}
	signalled = nil
	procs = append(procs, host.Process{PID: 14, Args: []string{"etcd", "--name=cp2", "--initial-advertise-peer-urls=https://10.0.0.12:2380"}})
	if err := restartEtcd(e, "cp2", "https://10.0.0.12:2380"); err == nil || len(signalled) != 0 {
		t.Errorf("two matching processes: err %v, signalled %v; want an error and no signal", err, signalled)
	}
	if err := restartEtcd(e, "cp9", "https://10.0.0.19:2380"); err == nil || len(signalled) != 0 {
		t.Errorf("no matching process: err %v, signalled %v", err, signalled)
	}
	if err := restartEtcd(&host.Env{}, "cp2", "https://10.0.0.12:2380"); err == nil {
		t.Error("no process access: want an error")
	}
}

// An IPv6 control plane: its learner is added with a bracketed peer URL, and etcd.yaml lists
// it so beside the existing members (as kubeadm writes it).
func TestControlPlaneJoinIPv6(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	o := c.options(t)
	o.AdvertiseAddress = "fd77::12"
	s := &State{Opts: o}
	if _, err := Run(context.Background(), c.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	ms, _ := c.etcd.MemberList(context.Background())
	var peer string
	for _, m := range ms.Members {
		if m.ID == s.EtcdMemberID {
			peer = m.PeerURLs[0]
		}
	}
	if peer != "https://[fd77::12]:2380" {
		t.Errorf("learner added with peer URL %q", peer)
	}
	manifest, _ := c.env.ReadFile(path.Join(host.ManifestsDir, "etcd.yaml"))
	for _, flag := range []string{"--initial-cluster=cp1=https://10.0.0.11:2380,cp2=https://[fd77::12]:2380", "--listen-client-urls=https://[::1]:2379,https://[fd77::12]:2379"} {
		if !hasFlag(manifest, flag) {
			t.Errorf("etcd.yaml lacks %s:\n%s", flag, manifest)
		}
	}
}

// A control plane's dry run looks at etcd read-only (identities issued in memory from the
// downloaded CAs) and lists the dead learner a real run would remove; without the flag it
// meets the real run's refusal. Nothing is written, nothing in etcd changes.
func TestControlPlaneDryRunPlansEtcdRepairs(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	c.etcd.Members = append(c.etcd.Members, &etcdserverpb.Member{ID: 0x77, PeerURLs: []string{"https://10.0.0.99:2380"}, IsLearner: true})
	c.etcd.Started = func() bool { return false }
	c.env.EtcdPeer = func(_ context.Context, u string) bool { return u != "https://10.0.0.99:2380" }
	s := &State{Opts: c.options(t)}
	s.Opts.DryRun, s.Opts.RemoveDeadLearners = true, true
	if _, err := Run(context.Background(), c.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	if len(s.Repairs) != 1 || s.Repairs[0].Kind != "etcd-learner" || s.Repairs[0].ID != "77" || s.Repairs[0].Action != "would remove" || s.Changed() {
		t.Errorf("repairs %+v changed %v", s.Repairs, s.Changed())
	}
	if plan := strings.Join(s.PlannedActions(), "\n"); !strings.Contains(plan, "remove etcd learner 77") {
		t.Errorf("the plan does not list the learner's removal:\n%s", plan)
	}
	s = &State{Opts: c.options(t)}
	s.Opts.DryRun = true
	_, err := Run(context.Background(), c.env, s, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Busy || !strings.Contains(err.Error(), "member 77") {
		t.Errorf("dry run without the flag: %v, want the refusal naming member 77", err)
	}
	if len(c.etcd.Removed) != 0 || len(c.etcd.Added) != 0 {
		t.Errorf("a dry run changed etcd: removed %v added %v", c.etcd.Removed, c.etcd.Added)
	}
	assertNothingWritten(t, c.testHost)
}

// A stacked control plane's kubelet starts inside this node's etcd turn: kubelet-start only
// enables it, and etcd-join restarts it once the join lock is held, so a control plane
// waiting behind others has no kubelet backing off against its own API server. A run
// without etcd-join (one phase, or skipped) starts it in kubelet-start as before; a join
// that never gets the lock never starts it.
func TestControlPlaneKubeletStartsInItsEtcdTurn(t *testing.T) {
	t.Parallel()
	restarts := func(c *cpHost) int {
		c.runner.mu.Lock()
		defer c.runner.mu.Unlock()
		return strings.Count(strings.Join(c.runner.calls, "\n"), "systemctl restart kubelet")
	}
	c := newCPHost(t)
	atLock := -1
	c.env.Fault = func(p string) {
		if p == "etcd-join/locked" {
			atLock = restarts(c)
		}
	}
	res, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{})
	if err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	if atLock != 0 || restarts(c) != 1 || !c.runner.active {
		t.Errorf("kubelet restarts when the lock was taken: %d, in all: %d (running %v); want 0, then 1", atLock, restarts(c), c.runner.active)
	}
	if !strings.Contains(c.out.String(), "etcd-join starts it once this node's turn") {
		t.Errorf("kubelet-start does not say the kubelet starts in etcd-join:\n%s", c.out)
	}
	for _, r := range res {
		if r.Name == "kubelet-start" && r.Status == "skipped" {
			t.Errorf("kubelet-start skipped: %+v", r)
		}
	}

	for _, o := range []RunOptions{{Only: []string{"kubelet-start"}}, {Skip: []string{"etcd-join"}}} {
		c := newCPHost(t)
		if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, o); err != nil && len(o.Only) == 0 {
			t.Logf("%+v: %v (after kubelet-start)", o, err)
		}
		if restarts(c) != 1 {
			t.Errorf("%+v: %d kubelet restarts, want kubelet-start's one (etcd-join does not run)", o, restarts(c))
		}
	}

	busy := newCPHost(t)
	busy.etcd.LockHeld = true
	o := busy.options(t)
	o.Timeouts.EtcdAPICall = 200 * time.Millisecond
	if _, err := Run(context.Background(), busy.env, &State{Opts: o}, Join, RunOptions{}); operr.CodeOf(err) != operr.Busy {
		t.Fatalf("got %v, want busy", err)
	}
	if restarts(busy) != 0 {
		t.Errorf("the kubelet was started by a join that never held the etcd join lock")
	}
}

// etcd-join is a stacked control plane's: a worker and an external etcd skip it, and a
// control plane without the cluster's configuration yet (one phase run alone) does not.
func TestEtcdJoinSkips(t *testing.T) {
	t.Parallel()
	external := &clusterconfig.ClusterConfiguration{}
	external.Etcd.External = &clusterconfig.ExternalEtcd{Endpoints: []string{"https://10.0.0.50:2379"}}
	stacked := &clusterconfig.ClusterConfiguration{}
	stacked.Etcd.Local = &clusterconfig.LocalEtcd{DataDir: "/var/lib/etcd"}
	cp := joinrequest.Options{ControlPlane: true}
	for _, tc := range []struct {
		s    *State
		want string
	}{
		{&State{Opts: joinrequest.Options{}, Cluster: stacked}, "worker node"},
		{&State{Opts: cp, Cluster: external}, "external etcd"},
		{&State{Opts: cp, Cluster: stacked}, ""},
		{&State{Opts: cp}, ""},
	} {
		if got := EtcdJoin.Skip(tc.s); got != tc.want {
			t.Errorf("control plane %v, cluster %+v: skip %q, want %q", tc.s.Opts.ControlPlane, tc.s.Cluster, got, tc.want)
		}
	}
}

// While this node holds (or waits for) the etcd join lock, the journal on disk names the
// lock's lease, so a re-run after a kill can revoke it; once released it names none.
func TestEtcdJoinJournalsItsLockLeaseWhileHeld(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	var held int64 = -1
	c.env.Fault = func(p string) {
		if p == "etcd-join/locked" {
			j, err := LoadJournal(c.env)
			if err != nil {
				t.Errorf("journal while locked: %v", err)
				return
			}
			held = j.EtcdLockLease
		}
	}
	s := &State{Opts: c.options(t), Journal: &Journal{}}
	if _, err := Run(context.Background(), c.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	if held != 0x4b1 {
		t.Errorf("journal on disk named lock lease %x while the lock was held, want the session's 4b1", held)
	}
	if j, err := LoadJournal(c.env); err != nil || j.EtcdLockLease != 0 {
		t.Errorf("after the join the journal names lease %x (%v), want none", j.EtcdLockLease, err)
	}
}

// The learner's data in the etcd data directory is this join's to remove when this join found
// the directory empty, now or (per the journal) in the interrupted run that began it.
func TestClaimEtcdDataDir(t *testing.T) {
	t.Parallel()
	const dir = "/var/lib/etcd"
	for _, tc := range []struct {
		name    string
		journal *Journal
		data    bool // member/ already in the directory
		owned   bool
	}{
		{"empty, journaled", &Journal{}, false, true},
		{"empty, no journal", nil, false, true},
		{"the interrupted run's learner data", &Journal{EtcdDataDir: dir}, true, true},
		{"someone else's data", &Journal{}, true, false},
		{"someone else's data, no journal", nil, true, false},
		{"another directory journaled", &Journal{EtcdDataDir: "/data/etcd"}, true, false},
	} {
		h := newTestHost(t)
		if tc.data {
			if err := os.MkdirAll(h.env.Paths.Of(path.Join(dir, etcdMemberData, "wal")), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		s := &State{Journal: tc.journal}
		owned, err := claimEtcdDataDir(h.env, s, dir)
		if err != nil || owned != tc.owned {
			t.Errorf("%s: owned %v (%v), want %v", tc.name, owned, err, tc.owned)
		}
		if st, err := os.Stat(h.env.Paths.Of(dir)); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: data directory %v (%v), want it made 0700", tc.name, st, err)
		}
		if tc.journal != nil && tc.owned {
			saved, err := LoadJournal(h.env)
			if tc.journal.EtcdDataDir != dir || (!tc.data && (err != nil || saved.EtcdDataDir != dir)) {
				t.Errorf("%s: journal %+v, saved %+v (%v): want the claim recorded and saved", tc.name, tc.journal, saved, err)
			}
		}
	}
}

// The learner's own state is read from its plain-HTTP metrics URL, when there is one and a
// client to read it with.
func TestEtcdLocalStateReadsTheMetricsURL(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			asked.Add(1)
		}
		_, _ = w.Write([]byte("etcd_server_has_leader 1\n"))
	}))
	defer srv.Close()
	e := &host.Env{HTTPClient: func(*x509.CertPool) *http.Client { return srv.Client() }}
	if etcdLocalState(e, "") != nil || etcdLocalState(&host.Env{}, srv.URL) != nil {
		t.Error("a reader without a metrics URL or without an HTTP client")
	}
	read := etcdLocalState(e, srv.URL)
	if read == nil {
		t.Fatal("no reader for a metrics URL with a client")
	}
	_, _ = read(context.Background())
	if asked.Load() != 1 {
		t.Errorf("the reader asked %s/metrics %d times, want once", srv.URL, asked.Load())
	}
}

// The etcd pods' advertised client URLs, not this node's own (a re-run's) and not a pod
// without kubeadm's annotation; none of another node's is an error once the call's time is up.
func TestEtcdEndpointsAreTheOtherMembers(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	pod := func(name, node, url string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{"component": "etcd", "tier": "control-plane"}},
			Spec: corev1.PodSpec{NodeName: node}}
		if url != "" {
			p.Annotations = map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": url}
		}
		return p
	}
	for _, p := range []*corev1.Pod{pod("etcd-cp2", "cp2", "https://10.0.0.12:2379"), pod("etcd-cp3", "cp3", "")} {
		if _, err := c.client.CoreV1().Pods("kube-system").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := &State{Opts: c.options(t), AdminClient: c.client}
	eps, err := etcdEndpoints(context.Background(), c.env, s)
	if err != nil || !slices.Equal(eps, []string{"https://10.0.0.11:2379"}) {
		t.Errorf("endpoints %v (%v), want cp1's alone", eps, err)
	}
	if err := c.client.CoreV1().Pods("kube-system").Delete(context.Background(), "etcd-cp1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Opts.Timeouts.KubernetesAPICall = 2 * time.Second
	if eps, err := etcdEndpoints(context.Background(), c.env, s); err == nil || !strings.Contains(err.Error(), "found no etcd pods") {
		t.Errorf("only this node's and an unannotated etcd pod: endpoints %v (%v), want the error", eps, err)
	}
}

// A dry run reads etcd with a client certificate it issues in memory from the downloaded etcd
// CA: valid when it dials (not from a minute ahead), for client auth.
func TestControlPlaneDryRunEtcdClientCertificate(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	var cfg *tls.Config
	var at time.Time
	dial := c.env.DialEtcd
	c.env.DialEtcd = func(eps []string, tc *tls.Config) (etcd.Conn, error) {
		cfg, at = tc, c.env.Clock.Now()
		return dial(eps, tc)
	}
	s := &State{Opts: c.options(t)}
	s.Opts.DryRun = true
	if _, err := Run(context.Background(), c.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	if cfg == nil || len(cfg.Certificates) != 1 || cfg.RootCAs == nil {
		t.Fatalf("dry run dialled etcd with %+v: want one client certificate and the etcd CA", cfg)
	}
	cert, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if cert.NotBefore.After(at) || !cert.NotAfter.After(at) || !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("client certificate valid %s to %s, usages %v; dialled at %s", cert.NotBefore, cert.NotAfter, cert.ExtKeyUsage, at)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: cfg.RootCAs, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the certificate does not verify against the etcd CA it trusts: %v", err)
	}
}
