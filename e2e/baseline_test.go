//go:build e2e

// Package e2e holds kjoin's lab tests: real components, one lab per package.
package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/tlsbootstrap"
)

func TestMain(m *testing.M) { framework.Main(m) }

// TestKubeadmJoinWorker is the worker baseline: real kubeadm joins w1.
func TestKubeadmJoinWorker(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "w1")
	start := time.Now()
	r := c.MustRun(t, "w1", "kubeadm", "join", lab.Endpoint(), "--token", lab.Token,
		"--discovery-token-ca-cert-hash", c.CAHash, "--ignore-preflight-errors=all")
	joinWall := r.Duration
	c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	ready := time.Since(start)
	fmt.Printf("ANCHOR kubeadm join (worker w1): join wall %s, start->Ready %s\n", joinWall.Round(time.Millisecond), ready.Round(time.Millisecond))

	assertLeaseRenews(t, c, "w1")
	assertKubeletCSRIssued(t, c, "w1", start, "")
	assertNoImagePull(t, c, "w1")
}

// assertNoImagePull: the lab provides every image kubeadm and the kubelet ask for, so a join
// pulls nothing (a pull would hang on an unreachable registry and inflate the anchor). The
// check reads containerd's log; a control plane's log must show its static pods' sandboxes,
// proof that it logs CRI requests (a worker without pods needed no image at all).
func assertNoImagePull(t *testing.T, c *framework.Cluster, host string) {
	t.Helper()
	pulls, sandboxes, err := c.ImagePulls(host)
	switch {
	case err != nil:
		t.Errorf("cannot tell whether %s pulled images: %v", host, err)
	case len(pulls) > 0:
		t.Errorf("%s's containerd was asked to pull images the lab should provide:\n%s", host, strings.Join(pulls, "\n"))
	case sandboxes == 0 && strings.HasPrefix(host, "cp"):
		t.Errorf("%s's containerd log shows no RunPodSandbox request although its static pods run: it does not log CRI requests, so it cannot show a pull", host)
	case sandboxes == 0:
		t.Logf("%s ran no pod sandbox: it needed no image", host)
	}
}

// TestKubeadmJoinControlPlane is the control-plane baseline: real kubeadm joins cp2 with a
// certificate key from `kubeadm init phase upload-certs`.
func TestKubeadmJoinControlPlane(t *testing.T) {
	c := framework.Get(t)
	h := c.Host(t, "cp2")
	key, err := c.UploadCerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := c.MustRun(t, "cp2", "kubeadm", "join", lab.Endpoint(), "--token", lab.Token,
		"--discovery-token-ca-cert-hash", c.CAHash, "--control-plane", "--certificate-key", key,
		"--apiserver-advertise-address", h.IP, "--ignore-preflight-errors=all")
	fmt.Printf("ANCHOR kubeadm join --control-plane (cp2): join wall %s\n", r.Duration.Round(time.Millisecond))
	assertNoImagePull(t, c, "cp2")

	assertEtcdVoters(t, c, 2)
	assertLivez(t, c, h.IP)
	n := c.WaitNodeCondition(t, "cp2", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; !ok {
		t.Errorf("node cp2 lacks the control-plane label: %v", n.Labels)
	}
	if !hasTaint(n, "node-role.kubernetes.io/control-plane", corev1.TaintEffectNoSchedule) {
		t.Errorf("node cp2 lacks the control-plane NoSchedule taint: %v", n.Spec.Taints)
	}
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == key && tn.Effect == effect {
			return true
		}
	}
	return false
}

// assertLeaseRenews checks that the node's Lease in kube-node-lease exists and its renewTime advances.
func assertLeaseRenews(t *testing.T, c *framework.Cluster, node string) {
	t.Helper()
	ctx := context.Background()
	var first time.Time
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false, nil
		}
		if first.IsZero() {
			first = l.Spec.RenewTime.Time
			return false, nil
		}
		return l.Spec.RenewTime.Time.After(first), nil
	})
	if err != nil {
		t.Fatalf("lease kube-node-lease/%s was not renewed (first renewTime %v): %v", node, first, err)
	}
}

// assertKubeletCSRIssued checks the kubelet client CSR of the join that started at since: the
// one CSR for the node created since then (named want, when the tool reported its name) was
// approved and issued. Earlier CSRs of reused host names are not looked at.
func assertKubeletCSRIssued(t *testing.T, c *framework.Cluster, node string, since time.Time, want string) {
	t.Helper()
	csrs, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mine []certificatesv1.CertificateSigningRequest
	for i, csr := range csrs.Items {
		if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && !csr.CreationTimestamp.Time.Before(since.Truncate(time.Second)) &&
			tlsbootstrap.AsksFor(&csrs.Items[i], node) {
			mine = append(mine, csr)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("want exactly one kubelet client CSR for %s created since %s, have %d", node, since.Format(time.RFC3339), len(mine))
	}
	csr := mine[0]
	if want != "" && csr.Name != want {
		t.Fatalf("the CSR created for %s is %s, but the join reported %s", node, csr.Name, want)
	}
	approved := false
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue {
			approved = true
		}
	}
	if !approved || len(csr.Status.Certificate) == 0 {
		t.Fatalf("CSR %s for %s: approved=%v, certificate issued=%v", csr.Name, node, approved, len(csr.Status.Certificate) > 0)
	}
	t.Logf("CSR %s (uid %s, created %s) for %s approved and issued (requested by %s)", csr.Name, csr.UID, csr.CreationTimestamp.Format(time.RFC3339), node, csr.Spec.Username)
}

// assertEtcdVoters waits until etcd has n started, voting members.
func assertEtcdVoters(t *testing.T, c *framework.Cluster, n int) {
	t.Helper()
	ms, err := votersSettled(c, n)
	if err != nil {
		t.Fatalf("etcd: %v, have %+v", err, ms)
	}
	t.Logf("etcd members: %+v", ms)
}

// assertLivez checks that the apiserver on ip answers /livez, trusting only the cluster CA.
func assertLivez(t *testing.T, c *framework.Cluster, ip string) {
	t.Helper()
	ca, err := c.ReadFile("cp1", "/etc/kubernetes/pki/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := fmt.Sprintf("https://%s:%d/livez", ip, lab.APIPort)
	var body string
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			body = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("GET %s: %s", url, body)
	}
}
