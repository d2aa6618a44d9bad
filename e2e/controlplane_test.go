//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
)

// kjoinControlPlane joins host as a control plane with kjoin (token through a file).
func kjoinControlPlane(t *testing.T, c *framework.Cluster, host, certKey string, extra ...string) lab.Result {
	t.Helper()
	writeToken(t, c, host, lab.Token)
	args := append([]string{"kjoin", "join", c.JoinEndpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash,
		"--control-plane", "--certificate-key", certKey, "--apiserver-advertise-address", c.Hosts[host].IP}, extra...)
	return c.Run(t, host, args...)
}

// TestKjoinControlPlane joins cp2 with kjoin and checks etcd, its API server, its marking,
// its manifests against kubeadm's for the same node, and that the cluster survives cp1's API
// server going away.
func TestKjoinControlPlane(t *testing.T) {
	c := framework.Get(t)
	h := c.Host(t, "cp2")
	key, err := c.UploadCerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cp1Etcd := c.Pids("cp1", "etcd")
	r := kjoinControlPlane(t, c, "cp2", key)
	if r.Err != nil {
		t.Fatalf("%v", r.Error())
	}
	fmt.Printf("MEASURE kjoin join --control-plane (cp2): join wall %s\n", r.Duration.Round(time.Millisecond))
	assertOnlyOwnEtcdRestarted(t, c, r, "cp2", map[string][]int{"cp1": cp1Etcd})

	assertEtcdVoters(t, c, 2)
	assertLivez(t, c, h.IP)
	n := c.WaitNodeCondition(t, "cp2", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	assertVerified(t, c, 2, "cp1", "cp2")
	for _, l := range []string{"node-role.kubernetes.io/control-plane", "node.kubernetes.io/exclude-from-external-load-balancers"} {
		if _, ok := n.Labels[l]; !ok {
			t.Errorf("node cp2 lacks label %s: %v", l, n.Labels)
		}
	}
	if !hasTaint(n, "node-role.kubernetes.io/control-plane", corev1.TaintEffectNoSchedule) {
		t.Errorf("node cp2 lacks the control-plane taint: %v", n.Spec.Taints)
	}

	t.Run("manifests equal kubeadm's", func(t *testing.T) {
		// kubeadm renders the same node's manifests in a dry run; they must be identical.
		c.MustRun(t, "cp2", "kubeadm", "join", "phase", "control-plane-prepare", "control-plane", "--control-plane", "--apiserver-advertise-address", h.IP, "--dry-run")
		dirs, _ := filepath.Glob(c.HostPath("cp2", "/etc/kubernetes/tmp/kubeadm-join-dryrun*"))
		if len(dirs) == 0 {
			t.Fatal("kubeadm wrote no dry-run manifests")
		}
		for _, m := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			theirs, err1 := os.ReadFile(filepath.Join(dirs[0], m+".yaml"))
			ours, err2 := c.ReadFile("cp2", "/etc/kubernetes/manifests/"+m+".yaml")
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: %v %v", m, err1, err2)
			}
			if string(ours) != string(theirs) {
				t.Errorf("%s differs from kubeadm's:\n--- kjoin\n%s\n--- kubeadm\n%s", m, ours, theirs)
			}
		}
		// etcd: the same as cp1's (written by kubeadm init) up to node values and the join flags.
		ours, _ := c.ReadFile("cp2", "/etc/kubernetes/manifests/etcd.yaml")
		theirs, _ := c.ReadFile("cp1", "/etc/kubernetes/manifests/etcd.yaml")
		norm := func(b []byte, name, ip string) string {
			var keep []string
			for _, l := range strings.Split(strings.NewReplacer(ip, "IP", "="+name, "=NAME").Replace(string(b)), "\n") {
				if !strings.Contains(l, "--initial-cluster") {
					keep = append(keep, l)
				}
			}
			return strings.Join(keep, "\n")
		}
		if a, b := norm(ours, "cp2", h.IP), norm(theirs, "cp1", c.Hosts["cp1"].IP); a != b {
			t.Errorf("etcd.yaml differs from kubeadm's beyond node values:\n--- kjoin\n%s\n--- kubeadm (cp1)\n%s", a, b)
		}
		if !strings.Contains(string(ours), "--initial-cluster-state=existing") {
			t.Error("etcd.yaml does not join the existing cluster")
		}
	})

	t.Run("survives cp1 api server stopping", func(t *testing.T) {
		moved := "/run/lab/kube-apiserver.yaml.parked"
		c.MustRun(t, "cp1", "mv", "/etc/kubernetes/manifests/kube-apiserver.yaml", moved)
		defer func() {
			c.MustRun(t, "cp1", "mv", moved, "/etc/kubernetes/manifests/kube-apiserver.yaml")
			assertLivez(t, c, c.Hosts["cp1"].IP)
		}()
		waitDown(t, c.Hosts["cp1"].IP)
		via := clientVia(t, c, h.IP)
		ctx := context.Background()
		nodes, err := via.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) < 2 {
			t.Fatalf("list nodes through cp2 with cp1's API server down: %v", err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "through-cp2-", Namespace: "default"}, Data: map[string]string{"a": "b"}}
		if _, err := via.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("write through cp2 with cp1's API server down: %v", err)
		}
	})
}

// assertOnlyOwnEtcdRestarted checks etcd-join's restart of a stalled learner: the joining
// host's etcd container ran once, or twice when the join says it restarted it (and then it
// served again); every other host's etcd runs as before the join (same pids).
func assertOnlyOwnEtcdRestarted(t *testing.T, c *framework.Cluster, r lab.Result, host string, before map[string][]int) {
	t.Helper()
	restarted := strings.Contains(r.Stderr, "restarting it (a learner holds no vote)")
	if restarted && !strings.Contains(r.Stderr, "serves clients") {
		t.Errorf("%s: the join restarted its etcd learner but never saw it serve:\n%s", host, framework.Tail(r.Stderr, 20))
	}
	logs, _ := filepath.Glob(c.HostPath(host, "/var/log/pods/kube-system_etcd-"+host+"_*/etcd/*.log"))
	want := 1
	if restarted {
		want = 2
	}
	if len(logs) != want {
		t.Errorf("%s's etcd container ran %d times (%v), want %d (restart reported: %v)", host, len(logs), logs, want, restarted)
	}
	if restarted && len(logs) == 2 {
		// The restart was justified: the join knew it from the learner's own state (not by
		// time), and the first run of the learner had applied the leader's snapshot and never
		// published its name (so it was waiting out its request timeout, not about to serve).
		if !strings.Contains(r.Stderr, "inside the leader's snapshot") {
			t.Errorf("%s: the join restarted its learner without reading its state:\n%s", host, framework.Tail(r.Stderr, 20))
		}
		slices.Sort(logs)
		first, err := os.ReadFile(logs[0])
		switch {
		case err != nil:
			t.Errorf("read the restarted learner's first log: %v", err)
		case !strings.Contains(string(first), "applied snapshot") || strings.Contains(string(first), "published local member to cluster through raft"):
			t.Errorf("%s: the restarted learner's first run did not stall in its publish after the leader's snapshot (%s):\n%s", host, logs[0], framework.Tail(string(first), 15))
		}
	}
	for h, pids := range before {
		if now := c.Pids(h, "etcd"); len(pids) == 0 || !slices.Equal(now, pids) {
			t.Errorf("%s's etcd changed during %s's join: pids %v before, %v after", h, host, pids, now)
		}
	}
	t.Logf("%s: etcd learner restarted by the join: %v", host, restarted)
}

// waitDown waits until the API server on ip stops answering.
func waitDown(t *testing.T, ip string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return !livez(ip), nil
	})
	if err != nil {
		t.Fatalf("the API server on %s did not stop", ip)
	}
}

// clientVia is an admin client that talks to the API server on ip only.
func clientVia(t *testing.T, c *framework.Cluster, ip string) kubernetes.Interface {
	t.Helper()
	b, err := c.ReadFile("cp1", "/etc/kubernetes/admin.conf")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = fmt.Sprintf("https://%s:%d", ip, lab.APIPort)
	cfg.TLSClientConfig.ServerName = lab.ControlPlaneName
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestControlPlaneParallel joins cp2, cp3 and cp4 at the same moment, KJOIN_PARALLEL_ROUNDS
// rounds (2 in make test, 20 in make bench), with kjoin (asserted: every join succeeds, every
// round ends with four started voters, no learner, every API server healthy) and, in make
// bench only, with kubeadm doing the same (reported beside it: a comparison, not a check, so
// make test does not spend its time on it).
func TestControlPlaneParallel(t *testing.T) {
	c := framework.Get(t)
	rounds := framework.Env().ParallelRounds
	type outcome struct {
		ok      int
		details []string
	}
	results := map[string]*outcome{"kjoin": {}, "kubeadm": {}}
	rng := benchRand(t)
	first := 1
	tools := []string{"kjoin"}
	if framework.Env().Bench {
		first = 0 // make bench: round 0 is a warm-up, recorded but left out, as in the other sections
		tools = append(tools, "kubeadm")
	}
	for round := first; round <= rounds; round++ {
		order := slices.Clone(tools)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for pos, tool := range order {
			hosts := []string{"cp2", "cp3", "cp4"}
			for _, h := range hosts {
				if _, err := c.AddHost(context.Background(), h, t.Logf); err != nil {
					t.Fatal(err)
				}
			}
			key, err := c.UploadCerts(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			res := make([]lab.Result, len(hosts))
			start := time.Now()
			for i, h := range hosts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if tool == "kjoin" {
						res[i] = kjoinControlPlane(t, c, h, key, "-o", "json", "-v", "1") // -v: the etcd lock wait and restarts on stderr
					} else {
						res[i] = c.Run(t, h, "kubeadm", "join", lab.Endpoint(), "--token", lab.Token, "--discovery-token-ca-cert-hash", c.CAHash,
							"--control-plane", "--certificate-key", key, "--apiserver-advertise-address", c.Hosts[h].IP, "--ignore-preflight-errors=all")
					}
				}()
			}
			wg.Wait()
			wall := time.Since(start)
			members, verr := votersSettled(c, 4)
			if verr == nil {
				for _, h := range append([]string{"cp1"}, hosts...) {
					if !livezEventually(c.Hosts[h].IP) {
						verr = fmt.Errorf("the API server of %s is not live", h)
					}
				}
			}
			var failed []string
			pulls := 0
			for i, r := range res {
				if r.Err != nil {
					failed = append(failed, fmt.Sprintf("%s exit %d: %s", hosts[i], r.ExitCode, lastLine(r.Stderr)))
				}
				// As in the other rounds: no join may wait on an image pull (the lab has every image).
				if p, _, perr := c.ImagePulls(hosts[i]); perr != nil || len(p) > 0 {
					pulls += len(p)
					t.Errorf("%s on %s pulled images: %v %v", tool, hosts[i], p, perr)
				}
			}
			ok := len(failed) == 0 && verr == nil
			detail := fmt.Sprintf("round %d: all three joins in %s; etcd %s", round, wall.Round(time.Millisecond), describe(members))
			if !ok {
				detail += fmt.Sprintf("; FAILED %v %v", failed, verr)
			} else if round > 0 {
				results[tool].ok++
			}
			if round == 0 {
				detail = "warm-up " + detail
			}
			results[tool].details = append(results[tool].details, detail)
			t.Logf("%s %s", tool, detail)
			sample := Sample{Section: "parallel-control-plane", Tool: tool + " join --control-plane x3", Round: round, Warmup: round == 0, Order: pos + 1, OK: ok,
				WallMs: wall.Milliseconds(), ImagePulls: pulls}
			sample.Extra = map[string]float64{}
			for i, r := range res {
				sample.Extra[hosts[i]+"WallMs"] = float64(r.Duration.Milliseconds())
				if tool == "kjoin" && r.Err == nil {
					// Where each join's time went (etcd-join includes its wait for the join lock).
					phases, _ := kjoinPhases(r.Stdout)
					for name, ms := range phases {
						sample.Extra[hosts[i]+"/"+name+"Ms"] = float64(ms)
					}
					sample.Extra[hosts[i]+"LockWaitMs"] = 0 // the first to take the lock says nothing
					if m := lockWaited.FindStringSubmatch(r.Stderr); m != nil {
						if d, err := time.ParseDuration(m[1]); err == nil {
							sample.Extra[hosts[i]+"LockWaitMs"] = float64(d.Milliseconds())
						}
					}
					if strings.Contains(r.Stderr, "restarting it (a learner holds no vote)") {
						sample.Extra[hosts[i]+"EtcdRestarted"] = 1
					}
					if framework.Env().ParallelLog {
						t.Logf("%s round %d, %s's progress:\n%s", tool, round, hosts[i], r.Stderr)
					}
				}
			}
			if !ok {
				sample.Error = fmt.Sprintf("%v %v", failed, verr)
			}
			recordSample(t, sample)
			if tool == "kjoin" && !ok {
				c.DumpLogs(t, "cp1", "cp2", "cp3", "cp4")
				t.Errorf("kjoin parallel round %d failed: %s", round, detail)
			} else if tool == "kjoin" && framework.Env().ParallelLog {
				c.DumpLogs(t, hosts...) // the kubelets' and pods' logs, kept under _artifacts
			}
			if tool == "kjoin" && round == rounds && ok {
				// The last round's control planes: cp4 goes, then cp3 leaves a control plane of three.
				c.Forget(t, "cp4")
				leaveOneOfThree(t, c)
				hosts = hosts[:2]
			}
			for _, h := range hosts {
				c.Forget(t, h)
			}
			if left, err := c.EtcdMembers(context.Background()); err != nil || len(left) != 1 {
				t.Fatalf("after round %d etcd should have only cp1, has %+v (%v)", round, left, err)
			}
		}
	}
	for _, tool := range tools {
		fmt.Printf("PARALLEL %s join --control-plane x3: %d/%d rounds ended with 4 voters, no learner, every API server live\n", tool, results[tool].ok, rounds)
		for _, d := range results[tool].details {
			fmt.Printf("  %s\n", d)
		}
	}
}

// leaveOneOfThree: cp3, whose etcd member is made the leader, leaves a control plane of three
// (cp1, cp2, cp3) with kjoin leave while a probe writes through the API (a write needs etcd's
// quorum) and asks cp1's and cp2's API servers every 200 ms. Leave hands etcd's leadership
// to another member before removing its own; two voters remain, and the cluster served
// throughout: no probe failed.
func leaveOneOfThree(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	if _, err := votersSettled(c, 3); err != nil {
		t.Fatal(err)
	}
	member, ok := memberOn(t, c, "cp3")
	if !ok {
		t.Fatal("cp3 has no etcd member")
	}
	if _, _, err := c.MoveEtcdLeader(ctx, "cp3"); err != nil {
		t.Fatal(err)
	}
	if leader, err := c.EtcdLeader(ctx); err != nil || leader != member.ID {
		t.Fatalf("cp3's member %x should lead etcd before it leaves; the leader is %x (%v)", member.ID, leader, err)
	}
	node, err := c.Client.CoreV1().Nodes().Get(ctx, "cp3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease := c.NodeLease(t, "cp3")
	probe := probeServing(t, c, "cp1", "cp2")
	before := probe.waitFor(t, 2)                                         // the probe ran before the leave began
	r := c.Run(t, "cp3", "kjoin", "leave", "-f", "-o", "json", "-v", "1") // -v 1: its progress on stderr
	during := probe.waitFor(t, 0) - before
	probe.waitFor(t, before+during+3) // and runs on after it ended
	probes, failures := probe.stop()
	out := framework.Answer[output.LeaveResult](t, r)
	if r.ExitCode != 0 {
		c.DumpLogs(t, "cp1", "cp2", "cp3")
		t.Fatalf("cp3's leave: exit %d: %s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
	}
	if out.Role != "control-plane" || out.EtcdMemberRemoved != fmt.Sprintf("%x", member.ID) || !out.NodeDeleted || !out.LeaseDeleted ||
		out.Credentials != "admin (/etc/kubernetes/admin.conf)" || len(out.Left) != 0 {
		t.Errorf("cp3's leave report: %+v", out)
	}
	if !strings.Contains(r.Stderr, fmt.Sprintf("handed etcd leadership from %x to ", member.ID)) {
		t.Errorf("cp3's leave did not hand etcd's leadership on before removing its member:\n%s", framework.Tail(r.Stderr, 20))
	}
	ms, err := votersSettled(c, 2)
	if err != nil {
		t.Fatalf("after cp3 left: %v (%s)", err, describe(ms))
	}
	for _, m := range ms {
		if m.ID == member.ID {
			t.Errorf("cp3's member %x is still in etcd: %s", member.ID, describe(ms))
		}
	}
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, "cp3", metav1.GetOptions{}); err == nil {
		t.Errorf("Node cp3 (UID %s, was %s) is there after leave", n.UID, node.UID)
	}
	if l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "cp3", metav1.GetOptions{}); err == nil && l.UID == lease.UID {
		t.Errorf("cp3's Lease (UID %s) is there after leave", l.UID)
	}
	assertHostStopped(t, c, "cp3")
	if len(failures) > 0 || during < 1 {
		t.Errorf("the cluster did not serve throughout cp3's leave: %d probes (%d while it ran), %d failed: %v", probes, during, len(failures), failures)
	}
	t.Logf("cp3 left a control plane of three: %d probes (%d while the leave ran, %.1fs), none failed; etcd %s", probes, during, r.Duration.Seconds(), describe(ms))
}

// probeServing writes a ConfigMap through the test's client and asks each host's API server
// for /readyz every 200 ms until stop is called, which reports how many probes ran and what
// failed.
func probeServing(t *testing.T, c *framework.Cluster, hosts ...string) *servingProbe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cms := c.Client.CoreV1().ConfigMaps("default")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "serving-probe"}, Data: map[string]string{"n": "0"}}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := &servingProbe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for n := 1; ctx.Err() == nil; n++ {
			cm.Data["n"] = strconv.Itoa(n)
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := cms.Update(wctx, cm, metav1.UpdateOptions{})
			wcancel()
			if err != nil && ctx.Err() == nil {
				p.fail(fmt.Sprintf("%s write: %v", time.Now().Format("15:04:05.000"), err))
			}
			for _, h := range hosts {
				if !readyz(c.Hosts[h].IP) && ctx.Err() == nil {
					p.fail(fmt.Sprintf("%s %s /readyz failed", time.Now().Format("15:04:05.000"), h))
				}
			}
			p.probes.Store(int64(n))
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		p.stop()
		_ = cms.Delete(context.Background(), "serving-probe", metav1.DeleteOptions{})
	})
	return p
}

// servingProbe is probeServing's running probe.
type servingProbe struct {
	probes   atomic.Int64 // probes completed
	mu       sync.Mutex
	failures []string
	cancel   context.CancelFunc
	done     chan struct{}
}

func (p *servingProbe) fail(f string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, f)
}

// waitFor waits up to 30 s until at least n probes completed and returns how many have.
func (p *servingProbe) waitFor(t *testing.T, n int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for int(p.probes.Load()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the serving probe completed %d probes in 30s, waited for %d", p.probes.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return int(p.probes.Load())
}

// stop ends the probe and reports how many probes completed and what failed.
func (p *servingProbe) stop() (int, []string) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return int(p.probes.Load()), p.failures
}

// readyz asks the API server on ip whether it is ready to serve.
func readyz(ip string) bool { return apiHealth(ip, "/readyz") }

// lockWaited finds etcd-join's "etcd join lock acquired after 2.5s" in kjoin's -v 1 progress.
var lockWaited = regexp.MustCompile(`etcd join lock acquired after (\S+)`)

// votersSettled waits up to a minute for n started voters and no learner.
func votersSettled(c *framework.Cluster, n int) ([]lab.EtcdMember, error) {
	var last []lab.EtcdMember
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		ms, err := c.EtcdMembers(ctx)
		if err != nil {
			return false, nil
		}
		last = ms
		voters := 0
		for _, m := range ms {
			if m.Started && !m.Learner {
				voters++
			}
		}
		return len(ms) == n && voters == n, nil
	})
	if err != nil {
		return last, fmt.Errorf("want %d started voters and no learner", n)
	}
	return last, nil
}

func describe(ms []lab.EtcdMember) string {
	var parts []string
	for _, m := range ms {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("%x", m.ID)
		}
		parts = append(parts, name+"("+m.Status()+")")
	}
	return strings.Join(parts, " ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// livez reports whether the API server on ip answers /livez (any TLS; used only to see it go down).
func livez(ip string) bool { return apiHealth(ip, "/livez") }

// apiHealth asks the API server on ip for a health endpoint (its certificate not checked).
func apiHealth(ip, path string) bool {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(fmt.Sprintf("https://%s:%d%s", ip, lab.APIPort, path))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// livezEventually waits up to a minute for the API server on ip to answer /livez.
func livezEventually(ip string) bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if livez(ip) {
			return true
		}
	}
	return false
}
