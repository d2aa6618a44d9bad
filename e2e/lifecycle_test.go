//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/pki"
)

// repairOf returns the answer's one repair of kind, failing the test without it.
func repairOf(t *testing.T, out output.JoinResult, kind string) output.Repair {
	t.Helper()
	var found []output.Repair
	for _, r := range out.Repairs {
		if r.Kind == kind {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s repair, have %+v", kind, out.Repairs)
	}
	return found[0]
}

// ghostPeerURL is an etcd peer URL in the lab's subnet that no lab host has.
func ghostPeerURL(c *framework.Cluster) string {
	ip := c.Hosts["cp1"].IP
	return "https://" + net.JoinHostPort(ip[:strings.LastIndexAny(ip, ".:")+1]+"99", "2380")
}

// reinstall wipes a lab host without a reset, as a reinstalled machine with the same name
// and address: every process killed (kubelet, containerd, static pods), every file gone
// (kubeadm's and kjoin's, the kubelet's state, etcd's data), then the host brought up bare.
// The cluster is not told: its Node and any etcd member stay.
func reinstall(t *testing.T, c *framework.Cluster, hosts ...string) {
	t.Helper()
	ctx := context.Background()
	for _, h := range hosts {
		if err := c.RemoveHost(ctx, h); err != nil {
			t.Fatalf("wipe %s: %v", h, err)
		}
		if _, err := c.AddHost(ctx, h, t.Logf); err != nil {
			t.Fatalf("bring %s up again: %v", h, err)
		}
		for _, p := range []string{"/etc/kubernetes/kubelet.conf", "/var/lib/kubelet/pki", "/var/lib/etcd", "/var/lib/kjoin"} {
			st, err := os.Stat(c.HostPath(h, p))
			if err != nil {
				continue
			}
			if entries, _ := os.ReadDir(c.HostPath(h, p)); !st.IsDir() || len(entries) > 0 {
				t.Fatalf("%s: %s survived the wipe", h, p)
			}
		}
	}
}

// expireClientCert stops the kubelet of host and replaces its current client certificate with
// one for the same node and key, signed by the cluster CA, that expired an hour ago: the state
// of a node that was off past its certificate's life. It returns the expired certificate.
func expireClientCert(t *testing.T, c *framework.Cluster, host string) *x509.Certificate {
	t.Helper()
	c.MustRun(t, host, "systemctl", "stop", "kubelet")
	target, b := clientCertFile(t, c, host)
	key, err := pki.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := c.ReadFile("cp1", "/etc/kubernetes/pki/ca.crt")
	caKeyPEM, _ := c.ReadFile("cp1", "/etc/kubernetes/pki/ca.key")
	ca, err1 := pki.ParseCert(caPEM)
	caKey, err2 := pki.ParseKey(caKeyPEM)
	if err1 != nil || err2 != nil {
		t.Fatalf("cluster CA: %v %v", err1, err2)
	}
	now := time.Now()
	cert, err := pki.NewSignedCert(pki.CertConfig{CommonName: "system:node:" + host, Organization: []string{"system:nodes"},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)}, key.Public(), ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := pki.EncodeKey(key)
	if err := os.WriteFile(c.HostPath(host, target), append(pki.EncodeCert(cert), keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := currentClientCert(t, c, host); got.SerialNumber.Cmp(cert.SerialNumber) != 0 || !got.NotAfter.Before(time.Now()) {
		t.Fatalf("%s: the expired certificate is not the kubelet's current one", host)
	}
	return cert
}

// clientCertFile is the file kubelet-client-current.pem links to on host, and its content.
func clientCertFile(t *testing.T, c *framework.Cluster, host string) (string, []byte) {
	t.Helper()
	target, err := os.Readlink(c.HostPath(host, "/var/lib/kubelet/pki/kubelet-client-current.pem"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(c.HostPath(host, target))
	if err != nil {
		t.Fatal(err)
	}
	return target, b
}

func currentClientCert(t *testing.T, c *framework.Cluster, host string) *x509.Certificate {
	t.Helper()
	_, b := clientCertFile(t, c, host)
	cert, err := pki.ParseCert(b)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func nodeUID(t *testing.T, c *framework.Cluster, name string) types.UID {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.UID
}

// operatorMarks labels and taints a Node as an operator would (team=blue, dedicated=gpu).
func operatorMarks(t *testing.T, c *framework.Cluster, name string) {
	t.Helper()
	patch := `{"metadata":{"labels":{"team":"blue"},"annotations":{"example.com/owner":"alice"}},"spec":{"taints":[{"key":"dedicated","value":"gpu","effect":"NoSchedule"}]}}`
	if _, err := c.Client.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func memberID(t *testing.T, c *framework.Cluster, name string) uint64 {
	t.Helper()
	ms, err := c.EtcdMembers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == name {
			return m.ID
		}
	}
	t.Fatalf("no etcd member named %s: %+v", name, ms)
	return 0
}

// TestNodesThatHaveLived: what happens to nodes after their join, on real components.
//   - a learner left for a peer URL no host has blocks cp2's join: named at once, removed
//     with --remove-dead-etcd-learners; verify and diagnose name it meanwhile;
//   - expired kubelet client certificates (a kubeadm-joined w2, a kjoin-joined w5) renewed in
//     place: same Node UID, new serial, the other files as they were;
//   - reinstalled machines (wiped without a reset, the cluster not told): w1 rejoined without
//     --replace (takes the Node over, told what it inherits), w3 with it (a new Node UID,
//     nothing inherited), w4 with kubeadm beside them (takes it over silently), cp3 of three
//     voters (its former member removed, three started voters, none of them the old one).
func TestNodesThatHaveLived(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	for _, h := range []string{"cp2", "cp3", "w1", "w2", "w3", "w4", "w5"} {
		c.Host(t, h)
	}
	key, err := c.UploadCerts(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A learner some other join added and never started: its machine died after the member add.
	cli, err := c.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ghost := ghostPeerURL(c)
	added, err := cli.MemberAddAsLearner(ctx, []string{ghost})
	if err != nil {
		t.Fatalf("add the ghost learner %s: %v", ghost, err)
	}
	ghostID := added.Member.ID
	t.Cleanup(func() { _ = etcd.RemoveMember(context.Background(), cli, ghostID, clock.RealClock{}) })
	ghostHex := fmt.Sprintf("%x", ghostID)

	t.Run("verify and diagnose name the learner left behind", func(t *testing.T) {
		out, _ := runVerify(t, c, "cp1")
		found := false
		for _, ch := range out.Checks {
			if ch.ID == "etcd.stale" {
				found = true
				if ch.Status != "fail" || !strings.Contains(ch.Summary, "member "+ghostHex) || !strings.Contains(ch.Summary, "learner never started") {
					t.Errorf("verify etcd.stale = %+v", ch)
				}
			}
		}
		if !found {
			t.Errorf("verify has no etcd.stale check: %+v", out.Checks)
		}
		r := c.Run(t, "cp1", "kjoin", "diagnose", "-o", "json")
		if !strings.Contains(r.Stdout, `"etcd.members"`) || !strings.Contains(r.Stdout, "member "+ghostHex+" (no name, "+ghost) {
			t.Errorf("diagnose on cp1 does not name the ghost:\n%s", r.Stdout)
		}
	})

	t.Run("cp2 refused at once, then joined with --remove-dead-etcd-learners", func(t *testing.T) {
		r := kjoinControlPlane(t, c, "cp2", key, "-o", "json")
		out := framework.Answer[output.JoinResult](t, r)
		if r.ExitCode != 7 || out.Error == nil || !strings.Contains(out.Error.Message, "member "+ghostHex) || !strings.Contains(out.Error.Message, ghost) ||
			!strings.Contains(out.Error.Hint, "--remove-dead-etcd-learners") {
			t.Fatalf("exit %d, error %+v: want 7 naming the learner %s and the flag\n%s", r.ExitCode, out.Error, ghostHex, framework.Tail(r.Stderr, 20))
		}
		if strings.Contains(r.Stderr, "(retrying)") {
			t.Errorf("the refusal came after retries:\n%s", framework.Tail(r.Stderr, 20))
		}
		ms, _ := c.EtcdMembers(ctx)
		if len(ms) != 2 || !slices.ContainsFunc(ms, func(m lab.EtcdMember) bool { return m.ID == ghostID }) {
			t.Fatalf("the refused join changed etcd: %s", describe(ms))
		}
		fmt.Printf("MEASURE kjoin join --control-plane blocked by a dead learner: refused in %s (exit %d)\n", r.Duration.Round(time.Millisecond), r.ExitCode)

		r = kjoinControlPlane(t, c, "cp2", key, "--remove-dead-etcd-learners", "-o", "json")
		if r.Err != nil {
			t.Fatalf("%v\n%s", r.Error(), framework.Tail(r.Stderr, 30))
		}
		if rp := repairOf(t, framework.Answer[output.JoinResult](t, r), "etcd-learner"); rp.ID != ghostHex || rp.Action != "removed" {
			t.Errorf("repair %+v, want the ghost %s removed", rp, ghostHex)
		}
		assertEtcdVoters(t, c, 2)
		ms, _ = c.EtcdMembers(ctx)
		if slices.ContainsFunc(ms, func(m lab.EtcdMember) bool { return m.ID == ghostID }) {
			t.Errorf("the ghost %s is still a member: %s", ghostHex, describe(ms))
		}
		fmt.Printf("MEASURE kjoin join --control-plane --remove-dead-etcd-learners (cp2): join wall %s\n", r.Duration.Round(time.Millisecond))
	})
	if t.Failed() {
		return
	}

	if r := kjoinControlPlane(t, c, "cp3", key); r.Err != nil {
		t.Fatalf("%v\n%s", r.Error(), framework.Tail(r.Stderr, 30))
	}
	assertEtcdVoters(t, c, 3)
	formerCP3 := memberID(t, c, "cp3")
	for _, w := range []string{"w1", "w3", "w5"} {
		if r := kjoinJoin(t, c, w); r.Err != nil {
			t.Fatalf("%v\n%s", r.Error(), framework.Tail(r.Stderr, 30))
		}
	}
	for _, w := range []string{"w2", "w4"} {
		c.MustRun(t, w, "kubeadm", "join", lab.Endpoint(), "--token", lab.Token, "--discovery-token-ca-cert-hash", c.CAHash, "--ignore-preflight-errors=all")
		c.WaitNodeCondition(t, w, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	}
	former := map[string]types.UID{}
	for _, w := range []string{"w1", "w3", "w4"} {
		operatorMarks(t, c, w)
		former[w] = nodeUID(t, c, w)
	}

	t.Run("expired client certificates renewed in place", func(t *testing.T) {
		for _, w := range []string{"w2", "w5"} { // joined by kubeadm, by kjoin
			uid := nodeUID(t, c, w)
			cfg, _ := c.ReadFile(w, "/var/lib/kubelet/config.yaml")
			flags, _ := c.ReadFile(w, "/var/lib/kubelet/kubeadm-flags.env")
			old := expireClientCert(t, c, w)
			r := kjoinJoin(t, c, w, "-o", "json")
			if r.Err != nil {
				t.Fatalf("%s: %v\n%s", w, r.Error(), framework.Tail(r.Stderr, 30))
			}
			rp := repairOf(t, framework.Answer[output.JoinResult](t, r), "client-certificate")
			if rp.ID != "serial "+old.SerialNumber.Text(16) || rp.Action != "renewed" || !strings.Contains(rp.Detail, "expired") {
				t.Errorf("%s: repair %+v, want serial %s renewed", w, rp, old.SerialNumber.Text(16))
			}
			now := currentClientCert(t, c, w)
			if now.SerialNumber.Cmp(old.SerialNumber) == 0 || !now.NotAfter.After(time.Now()) || now.Subject.CommonName != "system:node:"+w {
				t.Errorf("%s: current certificate %s (serial %s, until %s)", w, now.Subject.CommonName, now.SerialNumber.Text(16), now.NotAfter)
			}
			n := c.WaitNodeCondition(t, w, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
			if n.UID != uid {
				t.Errorf("%s: Node UID %s, want the same Node %s", w, n.UID, uid)
			}
			cfg2, _ := c.ReadFile(w, "/var/lib/kubelet/config.yaml")
			flags2, _ := c.ReadFile(w, "/var/lib/kubelet/kubeadm-flags.env")
			if string(cfg) != string(cfg2) || string(flags) != string(flags2) {
				t.Errorf("%s: the renewal changed the kubelet's configuration", w)
			}
			fmt.Printf("MEASURE kjoin join renewing an expired client certificate (%s): wall %s, serial %s -> %s\n", w, r.Duration.Round(time.Millisecond), old.SerialNumber.Text(16), now.SerialNumber.Text(16))
		}
	})

	// The machines are reinstalled: same names and addresses, nothing on disk, the cluster not told.
	reinstall(t, c, "w1", "w3", "w4", "cp3")
	start := time.Now()
	for _, h := range []string{"w1", "w3", "w4", "cp3"} {
		c.WaitNodeCondition(t, h, corev1.NodeReady, corev1.ConditionUnknown, 3*time.Minute)
	}
	t.Logf("w1, w3, w4 and cp3 NotReady %s after the wipe", time.Since(start).Round(time.Second))
	if ms, _ := c.EtcdMembers(ctx); !slices.ContainsFunc(ms, func(m lab.EtcdMember) bool { return m.ID == formerCP3 && !m.Learner }) {
		t.Fatalf("cp3's former member %x is not a voter before the rejoin: %s", formerCP3, describe(ms))
	}
	// The permission --replace needs on a worker (the Node authorizer never lets a node delete
	// its Node by itself); taken back when the test ends, with the token this made.
	tok := c.MustRun(t, "cp1", "kjoin", "token", "create", "--allow-node-replace", "--ttl", "10m")
	t.Cleanup(func() {
		c.Run(t, "cp1", "kjoin", "token", "delete", strings.TrimSpace(tok.Stdout))
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), "kjoin:node-replace-self", metav1.DeleteOptions{})
		_ = c.Client.RbacV1().ClusterRoles().Delete(context.Background(), "kjoin:node-replace-self", metav1.DeleteOptions{})
	})
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Get(ctx, "kjoin:node-replace-self", metav1.GetOptions{}); err != nil {
		t.Fatalf("kjoin token create --allow-node-replace made no binding: %v", err)
	}

	t.Run("w1 without --replace takes the Node over and is told what it inherits", func(t *testing.T) {
		r := kjoinJoin(t, c, "w1", "-o", "json")
		if r.Err != nil {
			t.Fatalf("%v\n%s", r.Error(), framework.Tail(r.Stderr, 30))
		}
		warn := strings.Join(framework.Answer[output.JoinResult](t, r).Warnings, "\n")
		for _, want := range []string{"uid " + string(former["w1"]), "NotReady (Ready=Unknown)", "labels team=blue", "taints dedicated=gpu:NoSchedule", "annotations example.com/owner", "--replace"} {
			if !strings.Contains(warn, want) {
				t.Errorf("warnings lack %q:\n%s", want, warn)
			}
		}
		n := c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		if n.UID != former["w1"] || n.Labels["team"] != "blue" {
			t.Errorf("w1: uid %s labels %v: want the former Node taken over", n.UID, n.Labels)
		}
	})

	t.Run("w3 with --replace registers afresh", func(t *testing.T) {
		r := kjoinJoin(t, c, "w3", "--replace", "-o", "json")
		if r.Err != nil {
			t.Fatalf("%v\n%s", r.Error(), framework.Tail(r.Stderr, 30))
		}
		rp := repairOf(t, framework.Answer[output.JoinResult](t, r), "node")
		if rp.ID != string(former["w3"]) || rp.Action != "deleted" || !strings.Contains(rp.Detail, "team=blue") {
			t.Errorf("repair %+v, want the former Node %s deleted", rp, former["w3"])
		}
		n := c.WaitNodeCondition(t, "w3", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		if n.UID == former["w3"] || n.Labels["team"] != "" || n.Annotations["example.com/owner"] != "" || hasTaint(n, "dedicated", corev1.TaintEffectNoSchedule) {
			t.Errorf("w3: uid %s labels %v taints %v: want a new Node with only what the join sets", n.UID, n.Labels, n.Spec.Taints)
		}
		if n.Labels["kjoin.dev/joined-by"] != "kjoin" {
			t.Errorf("w3's new Node lacks the join's own label: %v", n.Labels)
		}
	})

	t.Run("w4 with kubeadm join, beside them", func(t *testing.T) {
		r := c.MustRun(t, "w4", "kubeadm", "join", lab.Endpoint(), "--token", lab.Token, "--discovery-token-ca-cert-hash", c.CAHash, "--ignore-preflight-errors=all")
		n := c.WaitNodeCondition(t, "w4", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		said := strings.Contains(r.Stdout+r.Stderr, "team") || strings.Contains(r.Stdout+r.Stderr, "dedicated")
		fmt.Printf("ANCHOR kubeadm join on a reinstalled worker (w4): wall %s, same Node %v, kept team=blue %v, kept taint dedicated %v, said so %v\n",
			r.Duration.Round(time.Millisecond), n.UID == former["w4"], n.Labels["team"] == "blue", hasTaint(n, "dedicated", corev1.TaintEffectNoSchedule), said)
	})

	t.Run("cp3 rejoins: its former member replaced", func(t *testing.T) {
		r := kjoinControlPlane(t, c, "cp3", key, "-o", "json")
		if r.Err != nil {
			t.Fatalf("%v\n%s", r.Error(), framework.Tail(r.Stderr, 40))
		}
		rp := repairOf(t, framework.Answer[output.JoinResult](t, r), "etcd-member")
		if rp.ID != fmt.Sprintf("%x", formerCP3) || rp.Action != "removed" {
			t.Errorf("repair %+v, want the former member %x removed", rp, formerCP3)
		}
		ms, err := votersSettled(c, 3)
		if err != nil {
			t.Fatalf("etcd: %v: %s", err, describe(ms))
		}
		if slices.ContainsFunc(ms, func(m lab.EtcdMember) bool { return m.ID == formerCP3 }) {
			t.Errorf("the former member %x is still there: %s", formerCP3, describe(ms))
		}
		c.WaitNodeCondition(t, "cp3", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		assertLivez(t, c, c.Hosts["cp3"].IP)
		fmt.Printf("MEASURE kjoin join --control-plane on a reinstalled cp3: wall %s, member %x -> %x\n", r.Duration.Round(time.Millisecond), formerCP3, memberID(t, c, "cp3"))
	})
}
