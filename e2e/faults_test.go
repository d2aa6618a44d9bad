//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
)

// pausedJoin is a kjoin join stopped at a fault point inside a phase (the kjoin_fault
// build's KJOIN_FAULT_PAUSE_AT): the test disturbs the cluster there, then lets it go on or
// kills it.
type pausedJoin struct {
	c     *framework.Cluster
	host  string
	point string
	pid   int
	mark  string // host path of the mark file; removing it releases the join
	done  chan lab.Result
}

// writeJoinConfig writes a v1beta4 JoinConfiguration for host (the lab's token discovery, then
// rest) to /run/lab/join.yaml there and returns that path.
func writeJoinConfig(t *testing.T, c *framework.Cluster, host, rest string) string {
	t.Helper()
	cfg := fmt.Sprintf("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: %s\n    token: %s\n    caCertHashes: [%s]\n",
		lab.Endpoint(), lab.Token, c.CAHash) + rest
	if err := os.WriteFile(c.HostPath(host, "/run/lab/join.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return "/run/lab/join.yaml"
}

// controlPlaneConfig is the control-plane part of a JoinConfiguration for host, with an etcd
// API call timeout.
func controlPlaneConfig(c *framework.Cluster, host, key, etcdAPICall string) string {
	return fmt.Sprintf("controlPlane:\n  certificateKey: %s\n  localAPIEndpoint:\n    advertiseAddress: %s\ntimeouts:\n  etcdAPICall: %s\n", key, c.Hosts[host].IP, etcdAPICall)
}

// joinArgs is the lab's join command line for host (control plane when certKey is set).
func joinArgs(c *framework.Cluster, host, certKey string, extra ...string) []string {
	args := []string{"kjoin", "join", lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash}
	if certKey != "" {
		args = append(args, "--control-plane", "--certificate-key", certKey, "--apiserver-advertise-address", c.Hosts[host].IP)
	}
	return append(args, extra...)
}

// startPaused starts a join on host that pauses at point, and waits until it is there.
func startPaused(t *testing.T, c *framework.Cluster, host, point, certKey string) *pausedJoin {
	t.Helper()
	writeToken(t, c, host, lab.Token)
	mark := "/run/lab/fault-" + strings.ReplaceAll(point, "/", "-")
	p := &pausedJoin{c: c, host: host, point: point, mark: c.HostPath(host, mark), done: make(chan lab.Result, 1)}
	_ = os.Remove(p.mark)
	env := []string{"KJOIN_FAULT_PAUSE_AT=" + point, "KJOIN_FAULT_MARK=" + mark}
	argv := joinArgs(c, host, certKey, "-o", "json", "-v", "1")
	go func() { p.done <- c.ExecEnv(context.Background(), host, env, nil, argv...) }()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if b, err := os.ReadFile(p.mark); err == nil && strings.HasSuffix(string(b), "\n") {
			p.pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			t.Logf("%s: kjoin (pid %d) paused at %s", host, p.pid, point)
			return p
		}
		select {
		case r := <-p.done:
			c.DumpLogs(t, host, "cp1")
			t.Fatalf("kjoin on %s ended before reaching %s: exit %d\n%s\n%s", host, point, r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kjoin on %s did not reach %s", host, point)
		}
	}
}

// release lets the paused join go on.
func (p *pausedJoin) release(t *testing.T) {
	t.Helper()
	if err := os.Remove(p.mark); err != nil {
		t.Fatal(err)
	}
}

// wait returns the join's result.
func (p *pausedJoin) wait(t *testing.T) lab.Result {
	t.Helper()
	select {
	case r := <-p.done:
		t.Logf("%s: paused kjoin ended: exit %d signal %v after %s", p.host, r.ExitCode, r.Signal, r.Duration.Round(time.Millisecond))
		return r
	case <-time.After(8 * time.Minute):
		t.Fatalf("kjoin on %s did not end", p.host)
	}
	return lab.Result{}
}

// kill kills the paused join with SIGKILL and proves that the signal is what ended it.
func (p *pausedJoin) kill(t *testing.T) {
	t.Helper()
	// The mark holds kjoin's PID as the host sees it (its own PID namespace).
	pid, err := p.c.MachinePID(p.host, p.pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill kjoin pid %d (%d on %s): %v", pid, p.pid, p.host, err)
	}
	r := p.wait(t)
	if r.Signal != syscall.SIGKILL {
		t.Fatalf("kjoin on %s was not ended by SIGKILL at %s: exit %d signal %v\n%s", p.host, p.point, r.ExitCode, r.Signal, framework.Tail(r.Stderr, 20))
	}
	_ = os.Remove(p.mark)
}

// rerun runs the same join again (JSON) and requires success.
func rerun(t *testing.T, c *framework.Cluster, host, certKey string) output.JoinResult {
	t.Helper()
	writeToken(t, c, host, lab.Token)
	r := c.Run(t, host, joinArgs(c, host, certKey, "-o", "json")...)
	if r.Err != nil {
		c.DumpLogs(t, host, "cp1")
		t.Fatalf("re-run on %s: %v", host, r.Error())
	}
	return framework.Answer[output.JoinResult](t, r)
}

// leaseTTL is an etcd lease's remaining TTL in seconds (-1: no such lease).
func leaseTTL(t *testing.T, c *framework.Cluster, id int64) int64 {
	t.Helper()
	cli, err := c.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		t.Fatalf("lease %x: %v", id, err)
	}
	return resp.TTL
}

// nodeCSRs lists the CSRs kjoin made for node.
func nodeCSRs(t *testing.T, c *framework.Cluster, node string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, csr := range list.Items {
		if strings.HasPrefix(csr.Name, "kjoin-"+node+"-") {
			out = append(out, csr)
		}
	}
	return out
}

// memberOn returns the etcd member whose peer URL is on host.
func memberOn(t *testing.T, c *framework.Cluster, host string) (lab.EtcdMember, bool) {
	t.Helper()
	ms, err := c.EtcdMembers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, u := range m.PeerURLs {
			if strings.Contains(u, "//"+c.Hosts[host].IP+":") {
				return m, true
			}
		}
	}
	return lab.EtcdMember{}, false
}

// assertOneMemberPerControlPlane: exactly the hosts' members, all started voters.
func assertOneMemberPerControlPlane(t *testing.T, c *framework.Cluster, hosts ...string) {
	t.Helper()
	ms, err := votersSettled(c, len(hosts))
	if err != nil {
		t.Fatalf("etcd: %v: %s", err, describe(ms))
	}
	for _, h := range hosts {
		n := 0
		for _, m := range ms {
			for _, u := range m.PeerURLs {
				if strings.Contains(u, "//"+c.Hosts[h].IP+":") {
					n++
				}
			}
		}
		if n != 1 {
			t.Errorf("%s has %d etcd members: %s", h, n, describe(ms))
		}
	}
}

// stopProcess SIGSTOPs a host's component (etcd, kube-controller-manager, …) and returns
// the function that lets it go on (SIGCONT); that also runs when the test ends.
func stopProcess(t *testing.T, c *framework.Cluster, host, name string) (resume func()) {
	t.Helper()
	pids, err := c.Signal(host, name, syscall.SIGSTOP)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped %s's %s (pids %v)", host, name, pids)
	var once sync.Once
	resume = func() { once.Do(func() { _, _ = c.Signal(host, name, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

// twoControlPlanes brings up cp2 and cp3 and joins cp2 with kjoin (two voters).
func twoControlPlanes(t *testing.T, c *framework.Cluster, key string) {
	t.Helper()
	c.Host(t, "cp2")
	c.Host(t, "cp3")
	if r := kjoinControlPlane(t, c, "cp2", key); r.Err != nil {
		t.Fatal(r.Error())
	}
	assertEtcdVoters(t, c, 2)
}

// restartAPIServer kills cp1's kube-apiserver process, proves it went down, and returns
// the killed pids; the kubelet starts it again.
func restartAPIServer(t *testing.T, c *framework.Cluster) []int {
	t.Helper()
	pids, err := c.Signal("cp1", "kube-apiserver", syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	waitDown(t, c.Hosts["cp1"].IP)
	t.Logf("killed cp1's kube-apiserver (pids %v); it is down", pids)
	return pids
}

// assertAPIServerBack waits until cp1's API server answers again from a new process.
func assertAPIServerBack(t *testing.T, c *framework.Cluster, old []int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		return livez(c.Hosts["cp1"].IP), nil
	})
	if err != nil {
		t.Fatal("cp1's API server did not come back")
	}
	now := c.Pids("cp1", "kube-apiserver")
	for _, p := range now {
		for _, o := range old {
			if p == o {
				t.Fatalf("kube-apiserver pid %d survived the kill", p)
			}
		}
	}
}

// waitReadyz waits until the API server on ip answers /readyz (etcd reachable, caches synced).
func waitReadyz(t *testing.T, ip string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		resp, err := client.Get(fmt.Sprintf("https://%s:%d/readyz", ip, lab.APIPort))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the API server on %s is not ready", ip)
	}
}

// assertJoined: Node Ready, kjoin verify passes, no CSR of the node pending, and for control
// planes one started voter per control plane.
func assertJoined(t *testing.T, c *framework.Cluster, host string, controlPlanes ...string) {
	t.Helper()
	c.WaitNodeCondition(t, host, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	assertNoPendingCSR(t, c, host)
	if len(controlPlanes) > 0 {
		assertOneMemberPerControlPlane(t, c, controlPlanes...)
	}
	assertVerified(t, c, len(controlPlanes), host)
}

// holdAPIServerDown stops cp1's API server (the controlPlaneEndpoint's) until restore: its
// manifest is moved away, so the kubelet does not start it again. It returns the stopped
// process IDs.
func holdAPIServerDown(t *testing.T, c *framework.Cluster) ([]int, func()) {
	t.Helper()
	old := c.Pids("cp1", "kube-apiserver")
	manifest := c.HostPath("cp1", "/etc/kubernetes/manifests/kube-apiserver.yaml")
	away := c.HostPath("cp1", "/etc/kubernetes/kube-apiserver.yaml.away")
	if err := os.Rename(manifest, away); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := os.Rename(away, manifest); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitDown(t, c.Hosts["cp1"].IP)
	return old, restore
}

// TestJoinFaults injects faults while a join is inside a step (paused there by the fault
// build's hook, so the fault lands where the test says) and checks the outcome and that the
// same command converges afterwards.
func TestJoinFaults(t *testing.T) {
	c := framework.Get(t)
	// The subtests stop the controller-manager, whose bootstrap signer signs cluster-info for
	// the token: on a lab this fresh the signature may not be there yet, and discovery would
	// wait for it. Wait for it first.
	id, _, _ := strings.Cut(lab.Token, ".")
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := c.Client.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
		return err == nil && cm.Data["jws-kubeconfig-"+id] != "", nil
	})
	if err != nil {
		t.Fatalf("cluster-info was never signed for token %s: %v", id, err)
	}

	t.Run("worker killed while its CSR is pending", func(t *testing.T) {
		c.Host(t, "w8")
		// Hold the controller-manager (it approves and signs) so the CSR stays pending.
		cont := stopProcess(t, c, "cp1", "kube-controller-manager")
		start := time.Now()
		p := startPaused(t, c, "w8", "tls-bootstrap/csr-created", "")
		csrs := csrsSince(t, c, "w8", start)
		if len(csrs) != 1 {
			t.Fatalf("want the one CSR kjoin created, have %d", len(csrs))
		}
		made := csrs[0]
		if len(made.Status.Certificate) > 0 || len(made.Status.Conditions) > 0 {
			t.Fatalf("CSR %s is not pending: %+v", made.Name, made.Status.Conditions)
		}
		p.kill(t)
		if again, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), made.Name, metav1.GetOptions{}); err != nil || len(again.Status.Certificate) > 0 {
			t.Fatalf("CSR %s should still be pending after the kill: %v", made.Name, err)
		}
		cont()
		out := rerun(t, c, "w8", "")
		if out.CSR != made.Name {
			t.Errorf("re-run used CSR %q, want the killed run's %s", out.CSR, made.Name)
		}
		after := csrsSince(t, c, "w8", start)
		if len(after) != 1 || after[0].UID != made.UID || !after[0].CreationTimestamp.Equal(&made.CreationTimestamp) {
			t.Errorf("want exactly CSR %s (uid %s, created %s), have %d CSRs", made.Name, made.UID, made.CreationTimestamp, len(after))
		} else if len(after[0].Status.Certificate) == 0 {
			t.Errorf("CSR %s was not issued", made.Name)
		}
		assertJoined(t, c, "w8")
	})

	t.Run("API server restarted during a worker's TLS bootstrap", func(t *testing.T) {
		c.Host(t, "w8")
		cont := stopProcess(t, c, "cp1", "kube-controller-manager")
		p := startPaused(t, c, "w8", "tls-bootstrap/csr-created", "")
		old := restartAPIServer(t, c)
		cont()
		p.release(t) // it waits for its CSR while the API server is away
		r := p.wait(t)
		assertAPIServerBack(t, c, old)
		assertOutcome(t, r)
		rerun(t, c, "w8", "")
		assertJoined(t, c, "w8")
	})

	t.Run("worker cut off from the API server for 10s mid-join", func(t *testing.T) {
		c.Host(t, "w8")
		p := startPaused(t, c, "w8", "tls-bootstrap/csr-created", "")
		heal, err := c.Partition(context.Background(), "w8", "cp1")
		if err != nil {
			t.Fatal(err)
		}
		healed := false
		defer func() {
			if !healed {
				_ = heal()
			}
		}()
		// Prove the cut: a TCP connection to the API server no longer opens.
		probe := c.Exec(context.Background(), "w8", "timeout", "2", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", c.Hosts["cp1"].IP, lab.APIPort))
		if probe.ExitCode == 0 {
			t.Fatal("the partition does not cut w8 off from cp1's API server")
		}
		p.release(t)
		time.Sleep(10 * time.Second)
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		healed = true
		r := p.wait(t)
		assertOutcome(t, r)
		rerun(t, c, "w8", "")
		assertJoined(t, c, "w8")
	})

	if testing.Short() { // go test -short: the worker cases only
		return
	}
	key, err := c.UploadCerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("control plane killed between learner add and promotion", func(t *testing.T) {
		c.Host(t, "cp2")
		p := startPaused(t, c, "cp2", "etcd-join/learner-added", key)
		m, ok := memberOn(t, c, "cp2")
		if !ok || !m.Learner {
			t.Fatalf("no learner of cp2 at the pause: %+v", m)
		}
		p.kill(t)
		// The killed run held the join lock: its lease is in the journal and still alive.
		var j struct {
			Lease int64 `json:"etcdLockLease"`
		}
		if b, err := c.ReadFile("cp2", "/var/lib/kjoin/journal.json"); err != nil || json.Unmarshal(b, &j) != nil || j.Lease == 0 {
			t.Fatalf("the killed run's journal names no etcd lock lease: %v %s", err, b)
		}
		if ttl := leaseTTL(t, c, j.Lease); ttl <= 0 {
			t.Fatalf("the killed run's lock lease %x is not alive before the re-run (TTL %d)", j.Lease, ttl)
		}
		writeToken(t, c, "cp2", lab.Token)
		r := c.Run(t, "cp2", joinArgs(c, "cp2", key, "-o", "json", "-v", "1")...) // -v: progress on stderr
		if r.Err != nil {
			c.DumpLogs(t, "cp2", "cp1")
			t.Fatalf("re-run on cp2: %v", r.Error())
		}
		// Revoked by the re-run (a revoke of an expired lease fails and is not reported).
		if want := fmt.Sprintf("released the etcd join lock lease %x of an interrupted run", j.Lease); !strings.Contains(r.Stderr, want) {
			t.Errorf("the re-run did not release the killed run's lock lease %x:\n%s", j.Lease, framework.Tail(r.Stderr, 20))
		}
		if ttl := leaseTTL(t, c, j.Lease); ttl != -1 {
			t.Errorf("lease %x still exists after the re-run (TTL %d)", j.Lease, ttl)
		}
		after, ok := memberOn(t, c, "cp2")
		if !ok || after.ID != m.ID {
			t.Errorf("cp2's member is %x after the re-run, want the learner %x promoted (no new member)", after.ID, m.ID)
		}
		assertJoined(t, c, "cp2", "cp1", "cp2")
	})

	t.Run("API server down while a control plane finishes its join", func(t *testing.T) {
		h := c.Host(t, "cp2")
		p := startPaused(t, c, "cp2", "etcd-join/promoting", key)
		// cp1's API server (the endpoint, which admin.conf names) stays down until the test
		// brings it back.
		old, restore := holdAPIServerDown(t, c)
		defer restore()
		p.release(t)
		// The join goes on through etcd and starts cp2's own API server; it cannot finish
		// (marking the node needs the endpoint) while cp1's is down.
		if !livezEventually(h.IP) {
			restore()
			c.DumpLogs(t, "cp2")
			t.Fatal("cp2's own API server did not come up while cp1's was down")
		}
		time.Sleep(5 * time.Second)
		select {
		case r := <-p.done:
			p.done <- r
			t.Fatalf("the join finished while the endpoint was down: exit %d\n%s", r.ExitCode, framework.Tail(r.Stderr, 20))
		default:
		}
		restore()
		r := p.wait(t)
		assertAPIServerBack(t, c, old)
		assertOutcome(t, r)
		assertJoined(t, c, "cp2", "cp1", "cp2")
	})

	t.Run("several endpoints: a worker joins through cp2 while cp1's API server is down", func(t *testing.T) {
		if c.Hosts["cp2"] == nil {
			twoControlPlanes(t, c, key)
		} else if _, ok := memberOn(t, c, "cp2"); !ok {
			twoControlPlanes(t, c, key)
		}
		c.Host(t, "w7")
		cp1, cp2 := c.Hosts["cp1"].IP, c.Hosts["cp2"].IP
		ep1, ep2 := net.JoinHostPort(cp1, strconv.Itoa(lab.APIPort)), net.JoinHostPort(cp2, strconv.Itoa(lab.APIPort))
		old, restore := holdAPIServerDown(t, c)
		defer restore()
		writeToken(t, c, "w7", lab.Token)
		// The kubelet is to use the cluster's controlPlaneEndpoint, which is cp1 here: the join
		// waits for the kubelet's health, not the Node, which registers once cp1 is back.
		r := c.Run(t, "w7", "kjoin", "join", ep1, ep2, "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash,
			"--wait=kubelet", "-o", "json", "-v", "1")
		if livez(cp1) {
			t.Fatal("cp1's API server answered during the join: the fault did not hold")
		}
		if r.Err != nil {
			c.DumpLogs(t, "w7", "cp2")
			t.Fatalf("join through %s and %s with %s down: %v\n%s", ep1, ep2, ep1, r.Error(), framework.Tail(r.Stderr, 30))
		}
		res := framework.Answer[output.JoinResult](t, r)
		if res.Endpoint != ep2 || len(res.EndpointsTried) != 2 || res.EndpointsTried[0].Endpoint != ep1 || res.EndpointsTried[0].Error == "" ||
			res.EndpointsTried[1].Endpoint != ep2 || res.EndpointsTried[1].Error != "" {
			t.Errorf("served by %q, tried %+v: want %s failed, then %s served", res.Endpoint, res.EndpointsTried, ep1, ep2)
		}
		if want := "https://" + lab.Endpoint(); res.KubeletServer != want {
			t.Errorf("kubelet.conf names %q, want the cluster's controlPlaneEndpoint %q", res.KubeletServer, want)
		}
		// The very CSR this join made was issued, read through cp2 (cp1's is down).
		csr, err := clientVia(t, c, cp2).CertificatesV1().CertificateSigningRequests().Get(context.Background(), res.CSR, metav1.GetOptions{})
		if err != nil || len(csr.Status.Certificate) == 0 || !strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") {
			t.Fatalf("CSR %q: %v; want it issued to the bootstrap token", res.CSR, err)
		}
		t.Logf("joined through %s while %s was down (%s: %s); CSR %s by %s", ep2, ep1, ep1, res.EndpointsTried[0].Error, csr.Name, csr.Spec.Username)
		restore()
		assertAPIServerBack(t, c, old)
		assertJoined(t, c, "w7")
	})

	t.Run("etcd leader moved during a control-plane join", func(t *testing.T) {
		twoControlPlanes(t, c, key)
		p := startPaused(t, c, "cp3", "etcd-join/promoting", key)
		leader, err := c.EtcdLeader(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		to := "cp2"
		if m, _ := memberOn(t, c, "cp2"); m.ID == leader {
			to = "cp1"
		}
		from, toID, err := c.MoveEtcdLeader(context.Background(), to)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("etcd leader moved %x → %x (%s) while cp3's learner waited to be promoted", from, toID, to)
		p.release(t)
		if r := p.wait(t); r.Err != nil {
			c.DumpLogs(t, "cp3")
			t.Fatalf("join across a leader change: %v", r.Error())
		}
		assertJoined(t, c, "cp3", "cp1", "cp2", "cp3")
	})

	t.Run("killed while holding the etcd join lock", func(t *testing.T) {
		c.Host(t, "cp2")
		c.Host(t, "cp3")
		holder := startPaused(t, c, "cp2", "etcd-join/locked", key)
		// A join given 5 s for etcd gives up with the busy code (7) while the lock is held.
		writeToken(t, c, "cp3", lab.Token)
		busy := c.Run(t, "cp3", "kjoin", "join", "--config", writeJoinConfig(t, c, "cp3", controlPlaneConfig(c, "cp3", key, "5s")), "-o", "json")
		out := framework.Answer[output.JoinResult](t, busy)
		if busy.ExitCode != 7 || out.Error == nil || !strings.Contains(out.Error.Message, "etcd join lock") {
			t.Fatalf("want exit 7 naming the etcd join lock, got exit %d: %s %s", busy.ExitCode, busy.Stdout, framework.Tail(busy.Stderr, 10))
		}
		// A waiting join proceeds once the killed holder's lease (30 s) expires.
		waiting := make(chan lab.Result, 1)
		go func() {
			waiting <- c.Exec(context.Background(), "cp3", joinArgs(c, "cp3", key, "-o", "json", "-v", "1")...)
		}()
		time.Sleep(2 * time.Second)
		holder.kill(t)
		killedAt := time.Now()
		// The dead holder's lease still holds the lock, and cp3 still waits on it.
		var jr struct {
			Lease int64 `json:"etcdLockLease"`
		}
		if b, err := c.ReadFile("cp2", "/var/lib/kjoin/journal.json"); err != nil || json.Unmarshal(b, &jr) != nil || jr.Lease == 0 {
			t.Fatalf("the killed holder's journal names no etcd lock lease: %v %s", err, b)
		}
		ttl := leaseTTL(t, c, jr.Lease)
		select {
		case r := <-waiting:
			t.Fatalf("cp3 finished while the killed holder's lease %x was alive (TTL %d): exit %d\n%s", jr.Lease, ttl, r.ExitCode, framework.Tail(r.Stderr, 20))
		default:
		}
		if ttl <= 0 {
			t.Fatalf("the killed holder's lock lease %x is not alive after the kill (TTL %d)", jr.Lease, ttl)
		}
		r := <-waiting
		if r.Err != nil {
			c.DumpLogs(t, "cp3")
			t.Fatalf("the waiting join failed: %v", r.Error())
		}
		t.Logf("cp3 finished %s after the lock holder was killed (its lease had %d s left)", time.Since(killedAt).Round(time.Second), ttl)
		// The lock went to cp3 because the lease expired (cp3 revokes no other run's lease).
		if left := leaseTTL(t, c, jr.Lease); left != -1 {
			t.Errorf("the killed holder's lease %x still exists after cp3 took the lock (TTL %d)", jr.Lease, left)
		}
		if !strings.Contains(r.Stderr, "another control-plane node is joining etcd") || !strings.Contains(r.Stderr, "etcd join lock acquired after") {
			t.Errorf("cp3 did not wait for the lock:\n%s", framework.Tail(r.Stderr, 20))
		}
		rerun(t, c, "cp2", key)
		assertJoined(t, c, "cp2", "cp1", "cp2", "cp3")
		assertJoined(t, c, "cp3", "cp1", "cp2", "cp3")
	})

	t.Run("quorum lost during a control-plane join", func(t *testing.T) {
		twoControlPlanes(t, c, key)
		p := startPaused(t, c, "cp3", "etcd-join/promoting", key)
		learner, ok := memberOn(t, c, "cp3")
		if !ok || !learner.Learner {
			t.Fatalf("no learner of cp3 at the pause: %+v", learner)
		}
		// Stop cp2's etcd: 1 of 2 voters left, no quorum.
		resume := stopProcess(t, c, "cp2", "etcd")
		p.release(t)
		released := time.Now()
		r := p.wait(t)
		took := time.Since(released)
		t.Logf("the join under lost quorum ended %s after its release:\n%s", took.Round(time.Millisecond), framework.Tail(r.Stderr, 25))
		out := framework.Answer[output.JoinResult](t, r)
		if r.ExitCode != 1 || out.Error == nil || !strings.Contains(out.Error.Message, "etcd lost quorum") {
			t.Fatalf("want exit 1 naming the lost quorum, got exit %d: %s", r.ExitCode, r.Stdout)
		}
		// The README's contract: it waits out a 10 s grace on the voters' status (a leader
		// election is not a lost quorum), and fails then, not at its two-minute etcd timeout.
		if !regexp.MustCompile(`etcd has no quorum: [01] of 2 voting members have a leader`).MatchString(r.Stderr) {
			t.Errorf("the join never said it waits on the voters' status:\n%s", framework.Tail(r.Stderr, 25))
		}
		if took < 10*time.Second || took >= 2*time.Minute {
			t.Errorf("the join failed %s after its release; want after the 10 s grace and before the 2 min etcd timeout", took.Round(time.Millisecond))
		}
		if !strings.Contains(out.Error.Message, fmt.Sprintf("learner %x", learner.ID)) {
			t.Errorf("the error does not name the learner %x left behind: %s", learner.ID, out.Error.Message)
		}
		if _, err := os.Stat(c.HostPath("cp3", "/etc/kubernetes/manifests/etcd.yaml")); err == nil {
			t.Error("the failed join left an etcd manifest on cp3")
		}
		resume()
		// Quorum is back (and the API server has re-synced its caches, or it refuses the
		// bootstrap token for a moment): the same command resumes the learner and converges.
		waitReadyz(t, c.Hosts["cp1"].IP)
		rerun(t, c, "cp3", key)
		if m, _ := memberOn(t, c, "cp3"); m.ID != learner.ID {
			t.Errorf("cp3's member is %x, want the learner %x", m.ID, learner.ID)
		}
		assertJoined(t, c, "cp3", "cp1", "cp2", "cp3")
	})
}

// assertOutcome: a join under a fault that kjoin rides out completes: exit 0, not a crash,
// not a documented failure code (the README promises it).
func assertOutcome(t *testing.T, r lab.Result) {
	t.Helper()
	if r.Signal != 0 {
		t.Fatalf("kjoin died of signal %v", r.Signal)
	}
	if r.ExitCode != 0 {
		var out output.JoinResult
		_ = json.Unmarshal([]byte(r.Stdout), &out)
		t.Fatalf("kjoin did not ride out the fault: exit %d: %s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
	}
}
