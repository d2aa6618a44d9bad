//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kjoin.dev/kjoin/approver"
	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/phases"
	"kjoin.dev/kjoin/token"
)

// startApprover runs kjoin approver on cp1 as a transient systemd service (resync 2 s, so a
// used token goes within seconds of its node's registration), stopped when the test ends.
func startApprover(t *testing.T, c *framework.Cluster, unit string) (stop func()) {
	t.Helper()
	c.MustRun(t, "cp1", "systemd-run", "--unit", unit, "kjoin", "approver", "--resync", "2s")
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			c.Run(t, "cp1", "systemctl", "stop", unit)
		}
	}
	t.Cleanup(stop)
	return stop
}

// boundToken creates a token bound to node on cp1 and returns its join string and ID.
func boundToken(t *testing.T, c *framework.Cluster, node string, extra ...string) (joinString, id string) {
	t.Helper()
	r := c.MustRun(t, "cp1", append([]string{"kjoin", "token", "create", "--node", node, "--print-join-string", "-o", "json"}, extra...)...)
	ji := framework.Answer[output.JoinCommand](t, r)
	return ji.JoinString, strings.SplitN(ji.Token, ".", 2)[0]
}

// joinWith joins host with a join string on standard input (JSON answer).
func joinWith(t *testing.T, c *framework.Cluster, host, js string, extra ...string) lab.Result {
	t.Helper()
	return joinWithBinary(t, c, host, "kjoin", js, extra...)
}

// joinWithBinary is joinWith with another kjoin (the package's /usr/bin/kjoin).
func joinWithBinary(t *testing.T, c *framework.Cluster, host, kjoin, js string, extra ...string) lab.Result {
	t.Helper()
	argv := append([]string{kjoin, "join", "--join-string-file", "-", "-o", "json"}, extra...)
	r := c.ExecEnv(context.Background(), host, nil, strings.NewReader(js+"\n"), argv...)
	t.Logf("%s$ %s  (exit %d, %s)", host, strings.Join(argv, " "), r.ExitCode, r.Duration.Round(time.Millisecond))
	return r
}

// csrOfToken is the one CSR sent with bootstrap token id.
func csrOfToken(t *testing.T, c *framework.Cluster, id string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	l, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mine []*certificatesv1.CertificateSigningRequest
	for i := range l.Items {
		if l.Items[i].Spec.Username == "system:bootstrap:"+id {
			mine = append(mine, &l.Items[i])
		}
	}
	if len(mine) != 1 {
		t.Fatalf("want one CSR sent with token %s, have %d", id, len(mine))
	}
	return mine[0]
}

// decisions are a CSR's Approved and Denied conditions, as "Type/Reason".
func decisions(csr *certificatesv1.CertificateSigningRequest) []string {
	var out []string
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			out = append(out, string(c.Type)+"/"+c.Reason)
		}
	}
	return out
}

func tokenGone(c *framework.Cluster, id string, within time.Duration) error {
	return wait.PollUntilContextTimeout(context.Background(), time.Second, within, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// nodeClient is a client that talks to the API server as host's node (its kubelet's client
// certificate, read from the host).
func nodeClient(t *testing.T, c *framework.Cluster, host string) kubernetes.Interface {
	t.Helper()
	// kubelet-client-current.pem links to an absolute path inside the host: read it there.
	pair := []byte(c.MustRun(t, host, "cat", "/var/lib/kubelet/pki/kubelet-client-current.pem").Stdout)
	caPEM, err := c.ReadFile("cp1", "/etc/kubernetes/pki/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: "https://" + net.JoinHostPort(c.Hosts["cp1"].IP, strconv.Itoa(lab.APIPort)),
		TLSClientConfig: rest.TLSClientConfig{CertData: pair, KeyData: pair, CAData: caPEM, ServerName: lab.ControlPlaneName}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestBoundTokens: tokens bound to one node, decided by kjoin's approver on real
// components. A bound token joins its node (the approver's reason on the very CSR) and is gone
// afterwards; used again it fails; used on another machine under another name its CSR is
// denied, no certificate issued, the token deleted; with the approver stopped a bound
// token's CSR stays pending (the controller-manager never approves it) and the join waits,
// then completes when the approver starts; a worker joined with
// --kubelet-serving-certificates gets a serving certificate the approver approved for its own
// addresses, which a client trusting only the cluster CA accepts, verify passes it and kubectl
// logs works, while a serving CSR the node sends for an address it does not have is denied;
// a single-use token (--uses 1) joins one machine under its own name and refuses the next;
// two approvers at once decide once; a control plane joins with a bound token, with kjoin's
// package installed: its join enables and starts kjoin-approver.service, which alone then
// approves the next bound token's CSR, and reset stops and disables it.
func TestBoundTokens(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	stop := startApprover(t, c, "kjoin-approver")

	t.Run("a bound token joins its node once", func(t *testing.T) {
		c.Host(t, "w1")
		js, id := boundToken(t, c, "w1")
		r := joinWith(t, c, "w1", js)
		out := framework.Answer[output.JoinResult](t, r)
		if r.ExitCode != 0 {
			c.DumpLogs(t, "w1")
			t.Fatalf("join: exit %d %s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
		}
		csr := csrOfToken(t, c, id)
		if csr.Name != out.CSR || strings.Join(decisions(csr), ",") != "Approved/"+approver.ReasonApproved || len(csr.Status.Certificate) == 0 {
			t.Errorf("CSR %s (the join's: %s): decisions %v, issued %v", csr.Name, out.CSR, decisions(csr), len(csr.Status.Certificate) > 0)
		}
		c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
		if err := tokenGone(c, id, time.Minute); err != nil {
			t.Errorf("bound token %s still exists a minute after w1 registered", id)
		}
		// Used again, on another machine: the token is gone, the join fails, nothing registers.
		c.Host(t, "w2")
		again := joinWith(t, c, "w2", js, "--wait=none")
		if again.ExitCode == 0 {
			t.Errorf("the used token joined w2: %s", again.Stdout)
		}
		if _, err := c.Client.CoreV1().Nodes().Get(ctx, "w2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Node w2 exists after a join with a used token: %v", err)
		}
	})

	t.Run("a bound token used under another name is denied and deleted", func(t *testing.T) {
		c.Host(t, "w3")
		js, id := boundToken(t, c, "w4") // made for w4, used by w3
		r := joinWith(t, c, "w3", js, "--wait=none")
		out := framework.Answer[output.JoinResult](t, r)
		if r.ExitCode == 0 || out.Error == nil || !strings.Contains(out.Error.Message, approver.ReasonNotForNode) {
			t.Errorf("exit %d, error %+v: want the denial, reason %s", r.ExitCode, out.Error, approver.ReasonNotForNode)
		}
		csr := csrOfToken(t, c, id)
		if strings.Join(decisions(csr), ",") != "Denied/"+approver.ReasonNotForNode || len(csr.Status.Certificate) != 0 {
			t.Errorf("CSR %s: decisions %v, issued %v; want denied, no certificate", csr.Name, decisions(csr), len(csr.Status.Certificate) > 0)
		}
		if err := tokenGone(c, id, 10*time.Second); err != nil {
			t.Errorf("the leaked token %s was not deleted", id)
		}
	})

	t.Run("with the approver stopped the join waits, then completes", func(t *testing.T) {
		c.Host(t, "w4")
		stop()
		js, id := boundToken(t, c, "w4")
		done := make(chan lab.Result, 1)
		go func() { done <- joinWith(t, c, "w4", js) }()
		var csr *certificatesv1.CertificateSigningRequest
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for i := range l.Items {
				if l.Items[i].Spec.Username == "system:bootstrap:"+id {
					csr = &l.Items[i]
				}
			}
			return csr != nil, nil
		}); err != nil {
			t.Fatalf("the join made no CSR with token %s", id)
		}
		time.Sleep(15 * time.Second) // the controller-manager approves kubeadm's tokens' CSRs within a second
		if now := csrOfToken(t, c, id); len(decisions(now)) != 0 {
			t.Fatalf("CSR %s was decided with the approver stopped: %v", now.Name, decisions(now))
		}
		select {
		case r := <-done:
			t.Fatalf("the join ended while its CSR was pending: exit %d %s", r.ExitCode, r.Stdout)
		default:
		}
		startApprover(t, c, "kjoin-approver-again")
		var r lab.Result
		select {
		case r = <-done:
		case <-time.After(3 * time.Minute):
			t.Fatal("the join did not finish after the approver started")
		}
		if r.ExitCode != 0 || !strings.Contains(r.Stderr, "kjoin's approver, not the controller-manager, decides") {
			t.Errorf("join: exit %d %s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
		}
		if got := decisions(csrOfToken(t, c, id)); strings.Join(got, ",") != "Approved/"+approver.ReasonApproved {
			t.Errorf("CSR %s: %v", csr.Name, got)
		}
	})

	t.Run("kubelet serving certificates: approved for the node's own addresses, verified against the CA", func(t *testing.T) {
		startApprover(t, c, "kjoin-approver-serving")
		h := c.Host(t, "w5")
		if r := kjoinJoin(t, c, "w5", "--kubelet-serving-certificates"); r.Err != nil {
			t.Fatal(r.Error())
		}
		c.WaitNodeCondition(t, "w5", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
		// The kubelet's serving CSR, decided by kjoin's approver.
		var serving *certificatesv1.CertificateSigningRequest
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for i := range l.Items {
				if x := &l.Items[i]; x.Spec.SignerName == certificatesv1.KubeletServingSignerName && x.Spec.Username == "system:node:w5" && len(x.Status.Certificate) > 0 {
					serving = x
				}
			}
			return serving != nil, nil
		}); err != nil {
			t.Fatalf("no issued kubelet serving CSR of w5: %v", err)
		}
		if got := strings.Join(decisions(serving), ","); got != "Approved/"+approver.ReasonServingApproved {
			t.Errorf("serving CSR %s: %s", serving.Name, got)
		}
		// The kubelet serves it: a TLS client that trusts only the cluster CA and checks w5's
		// address accepts it.
		caPEM, err := c.ReadFile("cp1", "/etc/kubernetes/pki/ca.crt")
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		var lastErr error
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", net.JoinHostPort(h.IP, "10250"), &tls.Config{RootCAs: roots, ServerName: h.IP})
			if lastErr = err; err != nil {
				return false, nil
			}
			conn.Close()
			return true, nil
		}); err != nil {
			t.Fatalf("w5's kubelet does not serve a certificate the cluster CA verifies for %s: %v", h.IP, lastErr)
		}
		// --wait: the Lease comes a few seconds after the Node.
		out := framework.Answer[output.VerifyReport](t, c.MustRun(t, "cp1", "kjoin", "verify", "w5", "--wait=2m", "-o", "json"))
		found := false
		for _, ch := range out.Checks {
			if ch.ID == "node.serving-cert" {
				found = true
				if ch.Status != "pass" {
					t.Errorf("verify's node.serving-cert of w5: %+v", ch)
				}
			}
		}
		if !found {
			t.Errorf("verify has no node.serving-cert check: %+v", out.Checks)
		}
		// kubectl logs of a pod on w5 goes through that kubelet.
		pod := pausePod(c, "w5")
		pod.Name = "serving-logs"
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.CoreV1().Pods("default").Delete(context.Background(), "serving-logs", metav1.DeleteOptions{})
		})
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, "serving-logs", metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning, nil
		}); err != nil {
			t.Fatalf("pod serving-logs does not run on w5: %v", err)
		}
		if r := c.Kubectl(ctx, "logs", "-n", "default", "serving-logs"); r.Err != nil {
			t.Errorf("kubectl logs of a pod on w5: %v", r.Error())
		}
		// A serving CSR, sent as w5 itself, for an address w5 does not have: denied.
		asNode := nodeClient(t, c, "w5")
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:w5", Organization: []string{"system:nodes"}},
			DNSNames: []string{"w5"}, IPAddresses: []net.IP{net.ParseIP(h.IP), net.ParseIP("10.77.0.250")}}, key)
		if err != nil {
			t.Fatal(err)
		}
		bad, err := asNode.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "w5-foreign-address-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), SignerName: certificatesv1.KubeletServingSignerName,
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			now, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, bad.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			bad = now
			return len(decisions(now)) > 0, nil
		}); err != nil {
			t.Fatalf("CSR %s was never decided", bad.Name)
		}
		if got := strings.Join(decisions(bad), ","); got != "Denied/"+approver.ReasonServingDenied || len(bad.Status.Certificate) != 0 || !strings.Contains(bad.Status.Conditions[0].Message, "10.77.0.250") {
			t.Errorf("CSR %s for a foreign address: %s %+v", bad.Name, got, bad.Status.Conditions)
		}
	})

	t.Run("the Ansible playbook joins a worker with a token bound to it", func(t *testing.T) {
		startApprover(t, c, "kjoin-approver-ansible")
		c.Host(t, "w6")
		inv := filepath.Join(t.TempDir(), "inventory.ini")
		content := "[first_control_plane]\ncp1 ansible_become_method=su " + c.AnsibleHost("cp1") + "\n\n[workers]\nw6 ansible_become_method=su " + c.AnsibleHost("w6") + "\n"
		if err := os.WriteFile(inv, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		res, _ := runPlaybookFile(t, c, "site.yml", inv, false, "--limit", "w6", "-e", "kjoin_bound_tokens=true")
		if r := recapOf(t, res, "w6"); r.changed == "0" || r.failed != "0" {
			t.Errorf("w6: %+v, want joined", r)
		}
		c.WaitNodeCondition(t, "w6", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
		// Its CSR was a bound token's, approved by kjoin's approver for w6.
		l, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var id string
		for i := range l.Items {
			x := &l.Items[i]
			if strings.HasPrefix(x.Name, "kjoin-w6-") && slices.Contains(x.Spec.Groups, token.BoundGroup) {
				id = strings.TrimPrefix(x.Spec.Username, "system:bootstrap:")
				if got := strings.Join(decisions(x), ","); got != "Approved/"+approver.ReasonApproved {
					t.Errorf("w6's CSR %s: %s", x.Name, got)
				}
			}
		}
		if id == "" {
			t.Fatal("w6 joined without a bound token's CSR")
		}
		if err := tokenGone(c, id, time.Minute); err != nil {
			t.Errorf("w6's bound token %s still exists a minute after it registered", id)
		}
	})

	t.Run("a single-use token joins one machine under its own name, and no second", func(t *testing.T) {
		startApprover(t, c, "kjoin-approver-single")
		c.Host(t, "w8")
		c.Host(t, "w9")
		ji := framework.Answer[output.JoinCommand](t, c.MustRun(t, "cp1", "kjoin", "token", "create", "--uses", "1", "--print-join-string", "-o", "json"))
		id := strings.SplitN(ji.Token, ".", 2)[0]
		r := joinWith(t, c, "w8", ji.JoinString)
		out := framework.Answer[output.JoinResult](t, r)
		if r.ExitCode != 0 {
			c.DumpLogs(t, "w8")
			t.Fatalf("join: exit %d %s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
		}
		csr := csrOfToken(t, c, id)
		if csr.Name != out.CSR || strings.Join(decisions(csr), ",") != "Approved/"+approver.ReasonApproved || !strings.Contains(csr.Status.Conditions[0].Message, "single-use token "+id+", for node w8") {
			t.Errorf("CSR %s (the join's: %s): %+v", csr.Name, out.CSR, csr.Status.Conditions)
		}
		// The same token on another machine, under its own name: refused (denied as a reuse,
		// or the token already swept), nothing registered, no certificate issued.
		again := joinWith(t, c, "w9", ji.JoinString, "--wait=none")
		if again.ExitCode == 0 {
			t.Errorf("the used single-use token joined w9: %s", again.Stdout)
		}
		if _, err := c.Client.CoreV1().Nodes().Get(ctx, "w9", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Node w9 exists after a join with a used single-use token: %v", err)
		}
		l, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			x := &l.Items[i]
			if x.Spec.Username == "system:bootstrap:"+id && x.Name != csr.Name {
				// Denied as a reuse; or, when the approver swept the used token (its node had
				// registered) between w9's CSR and its decision, as a token that no longer
				// exists, which it must then no longer do.
				got := strings.Join(decisions(x), ",")
				_, gerr := c.Client.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
				swept := got == "Denied/"+approver.ReasonTokenUnknown && apierrors.IsNotFound(gerr)
				if got != "Denied/"+approver.ReasonTokenUsed && !swept || len(x.Status.Certificate) != 0 {
					t.Errorf("w9's CSR %s with the used token: %s, issued %v", x.Name, got, len(x.Status.Certificate) > 0)
				}
			}
		}
		if err := tokenGone(c, id, time.Minute); err != nil {
			t.Errorf("single-use token %s still exists a minute after w8 registered", id)
		}
	})

	t.Run("two approvers at once decide once; a control plane joins with a bound token and runs the package's approver", func(t *testing.T) {
		// Two approvers on cp1, both running before the join (the earlier subtests' approvers
		// were stopped when their subtests ended).
		units := []string{"kjoin-approver-two-a", "kjoin-approver-two-b"}
		stops := []func(){startApprover(t, c, units[0]), startApprover(t, c, units[1])}
		for _, u := range units {
			if r := c.Run(t, "cp1", "systemctl", "is-active", u); r.ExitCode != 0 {
				t.Fatalf("approver %s is not running: %s", u, r.Stdout)
			}
		}
		// cp2 has kjoin's package (its kjoin-approver.service, disabled as dpkg leaves it) and
		// joins with the packaged kjoin.
		c.Host(t, "cp2")
		installDeb(t, c, "cp2")
		if s := strings.TrimSpace(c.Run(t, "cp2", "systemctl", "is-enabled", phases.ApproverUnit).Stdout); s != "disabled" {
			t.Fatalf("the package's %s on cp2 is %q before the join, want disabled", phases.ApproverUnit, s)
		}
		js, id := boundToken(t, c, "cp2", "--control-plane")
		r := joinWithBinary(t, c, "cp2", "/usr/bin/kjoin", js, "--apiserver-advertise-address", c.Hosts["cp2"].IP)
		if r.ExitCode != 0 {
			c.DumpLogs(t, "cp2")
			t.Fatalf("control-plane join: exit %d %s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
		}
		csr := csrOfToken(t, c, id)
		if got := decisions(csr); strings.Join(got, ",") != "Approved/"+approver.ReasonApproved {
			t.Errorf("CSR %s: decisions %v, want one approval", csr.Name, got)
		}
		// Each approver's journal: one of them approved it.
		n := 0
		for _, unit := range units {
			n += strings.Count(c.MustRun(t, "cp1", "journalctl", "-u", unit, "--no-pager", "-o", "cat").Stdout, fmt.Sprintf("approved CSR %s:", csr.Name))
		}
		if n != 1 {
			t.Errorf("CSR %s approved %d times in the approvers' journals, want once", csr.Name, n)
		}
		assertEtcdVoters(t, c, 2)
		if err := tokenGone(c, id, time.Minute); err != nil {
			t.Errorf("bound token %s still exists a minute after cp2 registered", id)
		}

		// The join enabled and started the package's approver on cp2; with cp1's stopped, it
		// alone decides the next bound token's CSR.
		for _, q := range []string{"is-enabled", "is-active"} {
			if r := c.Run(t, "cp2", "systemctl", q, phases.ApproverUnit); r.ExitCode != 0 {
				t.Errorf("after the join, systemctl %s %s on cp2: %s", q, phases.ApproverUnit, r.Stdout)
			}
		}
		for _, stop := range stops {
			stop()
		}
		if out := c.Run(t, "cp1", "systemctl", "list-units", "--state=active", "--no-legend", "kjoin-approver*").Stdout; strings.TrimSpace(out) != "" {
			t.Fatalf("approvers still run on cp1: %s", out)
		}
		c.Host(t, "w7")
		js, id = boundToken(t, c, "w7")
		r = joinWith(t, c, "w7", js, "--wait=kubelet")
		out := framework.Answer[output.JoinResult](t, r)
		if r.ExitCode != 0 {
			c.DumpLogs(t, "w7", "cp2")
			t.Fatalf("w7's join with only cp2's approver: exit %d %s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
		}
		if j := c.MustRun(t, "cp2", "journalctl", "-u", phases.ApproverUnit, "--no-pager", "-o", "cat").Stdout; !strings.Contains(j, fmt.Sprintf("approved CSR %s:", out.CSR)) {
			t.Errorf("cp2's %s did not approve w7's CSR %s:\n%s", phases.ApproverUnit, out.CSR, framework.Tail(j, 10))
		}

		// Reset stops the approver and disables the unit the join enabled.
		reset := framework.Answer[output.ResetResult](t, c.MustRun(t, "cp2", "/usr/bin/kjoin", "reset", "-f", "-o", "json"))
		for _, p := range reset.Phases {
			t.Logf("cp2 reset: %s %s %s", p.Name, p.Status, p.Duration.String)
		}
		if !reset.ApproverStopped {
			t.Errorf("cp2's reset did not stop %s: %+v", phases.ApproverUnit, reset)
		}
		if s := strings.TrimSpace(c.Run(t, "cp2", "systemctl", "is-enabled", phases.ApproverUnit).Stdout); s != "disabled" {
			t.Errorf("after reset %s on cp2 is %q, want disabled (the join enabled it)", phases.ApproverUnit, s)
		}
		if r := c.Run(t, "cp2", "systemctl", "is-active", phases.ApproverUnit); r.ExitCode == 0 {
			t.Errorf("%s still runs on cp2 after reset", phases.ApproverUnit)
		}
	})
}
