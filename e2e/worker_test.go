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
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/pki"
)

// kjoinJoin runs kjoin join on host with the lab's token passed through a file, never argv.
func kjoinJoin(t *testing.T, c *framework.Cluster, host string, extra ...string) lab.Result {
	t.Helper()
	writeToken(t, c, host, lab.Token)
	args := append([]string{"kjoin", "join", c.JoinEndpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash}, extra...)
	return c.Run(t, host, args...)
}

func writeToken(t *testing.T, c *framework.Cluster, host, tok string) {
	t.Helper()
	if err := os.WriteFile(c.HostPath(host, "/run/lab/token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestKjoinWorker joins w1 with kjoin: Node Ready, Lease renewing, CSR issued, and the kubelet
// keeps working after a restart (its certificate and kubeconfig are right).
func TestKjoinWorker(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "w1")
	start := time.Now()
	r := kjoinJoin(t, c, "w1", "--output", "json")
	if r.Err != nil {
		t.Fatalf("%v", r.Error())
	}
	out := framework.Answer[output.JoinResult](t, r)
	if out.Node != "w1" || len(out.CACertHashes) != 1 || out.CACertHashes[0] != c.CAHash || !out.Changed || out.Error != nil {
		t.Errorf("unexpected join result: %+v", out)
	}
	if strings.Contains(r.Stdout+r.Stderr, strings.Split(lab.Token, ".")[1]) {
		t.Error("the token secret appears in kjoin's output")
	}
	c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	assertLeaseRenews(t, c, "w1")
	assertKubeletCSRIssued(t, c, "w1", start, out.CSR)
	assertVerified(t, c, 0, "w1")

	c.MustRun(t, "w1", "systemctl", "restart", "kubelet")
	time.Sleep(2 * time.Second)
	assertLeaseRenews(t, c, "w1")
	c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	// kjoin verify names a stopped kubelet (its Lease stops renewing), and passes once it runs.
	c.MustRun(t, "w1", "systemctl", "stop", "kubelet")
	assertVerifyFails(t, c, "w1", "node.lease", 2*time.Minute)
	c.MustRun(t, "w1", "systemctl", "start", "kubelet")
	c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	assertLeaseRenews(t, c, "w1")
	assertVerified(t, c, 0, "w1")
	// Through two kubelet restarts the kubelet kept kjoin's kubelet.conf: it never fell back to
	// a bootstrap kubeconfig (kjoin writes none) and made no CSR of its own (still exactly the
	// join's one CSR for w1).
	if _, err := os.Stat(c.HostPath("w1", "/etc/kubernetes/bootstrap-kubelet.conf")); err == nil {
		t.Error("a bootstrap kubeconfig exists on w1: kjoin writes none")
	}
	assertKubeletCSRIssued(t, c, "w1", start, out.CSR)
}

// joinFiles are the files a worker join writes (kubeadm's layout).
var joinFiles = []string{
	"/etc/kubernetes/kubelet.conf",
	"/etc/kubernetes/pki/ca.crt",
	"/var/lib/kubelet/config.yaml",
	"/var/lib/kubelet/instance-config.yaml",
	"/var/lib/kubelet/kubeadm-flags.env",
	"/var/lib/kubelet/pki/kubelet-client-current.pem",
}

// TestKjoinFilesMatchKubeadm joins w2 with kjoin and w3 with kubeadm and compares what they wrote.
func TestKjoinFilesMatchKubeadm(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "w2")
	c.Host(t, "w3")
	if r := kjoinJoin(t, c, "w2"); r.Err != nil {
		t.Fatalf("%v", r.Error())
	}
	c.MustRun(t, "w3", "kubeadm", "join", lab.Endpoint(), "--token", lab.Token, "--discovery-token-ca-cert-hash", c.CAHash, "--ignore-preflight-errors=all")
	c.WaitNodeCondition(t, "w2", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	c.WaitNodeCondition(t, "w3", corev1.NodeReady, corev1.ConditionTrue, time.Minute)

	for _, f := range joinFiles {
		ours, err1 := os.Lstat(c.HostPath("w2", f))
		theirs, err2 := os.Lstat(c.HostPath("w3", f))
		if err1 != nil || err2 != nil {
			t.Errorf("%s: kjoin %v, kubeadm %v", f, err1, err2)
			continue
		}
		if ours.Mode() != theirs.Mode() {
			t.Errorf("%s: mode %v (kjoin) vs %v (kubeadm)", f, ours.Mode(), theirs.Mode())
		}
	}
	// The client certificate: a timestamped pem behind the -current symlink, same mode.
	for _, h := range []string{"w2", "w3"} {
		target, err := os.Readlink(c.HostPath(h, "/var/lib/kubelet/pki/kubelet-client-current.pem"))
		if err != nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") {
			t.Errorf("%s: kubelet-client-current.pem -> %q, %v", h, target, err)
			continue
		}
		st, err := os.Stat(c.HostPath(h, target))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %s mode %v, %v (want 0600)", h, target, st.Mode(), err)
		}
	}
	// Same content where the content is not node-specific; kjoin's kubelet flags are kubeadm's
	// and kjoin's node label (kjoin nodes' JOINED-BY).
	for _, f := range []string{"/etc/kubernetes/pki/ca.crt", "/var/lib/kubelet/instance-config.yaml", "/var/lib/kubelet/kubeadm-flags.env"} {
		a, _ := c.ReadFile("w2", f)
		b, _ := c.ReadFile("w3", f)
		if f == "/var/lib/kubelet/kubeadm-flags.env" {
			b = kubeadmFlagsWithLabel(t, b)
		}
		if string(a) != string(b) {
			t.Errorf("%s differs:\nkjoin:   %q\nkubeadm: %q", f, a, b)
		}
	}
	// Equivalent kubelet configuration (same settings; formatting may differ).
	var ours, theirs map[string]any
	a, _ := c.ReadFile("w2", "/var/lib/kubelet/config.yaml")
	b, _ := c.ReadFile("w3", "/var/lib/kubelet/config.yaml")
	if err := yaml.Unmarshal(a, &ours); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &theirs); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ours, theirs) {
		for k := range merged(ours, theirs) {
			if !reflect.DeepEqual(ours[k], theirs[k]) {
				t.Errorf("config.yaml %s: kjoin %v, kubeadm %v", k, ours[k], theirs[k])
			}
		}
	}
	// kubelet.conf: same server and CA, credentials through the rotating -current.pem.
	var kc1, kc2 map[string]any
	a, _ = c.ReadFile("w2", "/etc/kubernetes/kubelet.conf")
	b, _ = c.ReadFile("w3", "/etc/kubernetes/kubelet.conf")
	_ = yaml.Unmarshal(a, &kc1)
	_ = yaml.Unmarshal(b, &kc2)
	if !reflect.DeepEqual(kc1, kc2) {
		t.Errorf("kubelet.conf differs:\nkjoin:\n%s\nkubeadm:\n%s", a, b)
	}
	// kubeadm removes its bootstrap kubeconfig; kjoin never writes one.
	for _, h := range []string{"w2", "w3"} {
		if _, err := os.Stat(c.HostPath(h, "/etc/kubernetes/bootstrap-kubelet.conf")); err == nil {
			t.Errorf("%s: bootstrap-kubelet.conf left behind", h)
		}
	}
}

func merged(a, b map[string]any) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// TestKjoinTrustFailures runs the trust cases on a lab host: a wrong pin, an unknown token,
// and a hostile endpoint (another CA replaying the real cluster-info) that must never see
// the token.
func TestKjoinTrustFailures(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "w4")

	t.Run("wrong pin", func(t *testing.T) {
		writeToken(t, c, "w4", lab.Token)
		wrong := "sha256:" + strings.Repeat("0", 64)
		r := c.Run(t, "w4", "kjoin", "join", lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", wrong, "-o", "json")
		out := framework.Answer[output.JoinResult](t, r)
		if r.ExitCode != 4 || out.Error == nil || !strings.Contains(out.Error.Message, c.CAHash) {
			t.Errorf("exit %d, error %+v; want exit 4 naming the presented pin %s", r.ExitCode, out.Error, c.CAHash)
		}
	})
	t.Run("unknown token", func(t *testing.T) {
		writeToken(t, c, "w4", "zzzzzz.0123456789abcdef")
		r := c.Run(t, "w4", "kjoin", "join", lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash)
		if r.ExitCode != 5 || !strings.Contains(r.Stderr, `token id "zzzzzz" is unknown`) {
			t.Errorf("exit %d, stderr %s; want exit 5 and an unknown-token message", r.ExitCode, r.Stderr)
		}
		if r.Duration > 30*time.Second {
			t.Errorf("unknown token took %s to fail", r.Duration)
		}
	})
	t.Run("cluster-info refused to anonymous reads", func(t *testing.T) {
		// kubeadm's RoleBinding lets system:anonymous read cluster-info; without it the API
		// server answers 403, as one does for a few seconds after a restart.
		ctx := context.Background()
		rbs := c.Client.RbacV1().RoleBindings("kube-public")
		rb, err := rbs.Get(ctx, clusterInfoBinding, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		restore := func() {
			fresh := rb.DeepCopy()
			fresh.ResourceVersion, fresh.UID = "", ""
			if _, err := rbs.Create(ctx, fresh, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("restore RoleBinding %s: %v", clusterInfoBinding, err)
			}
			waitAnonymousRead(t, c, http.StatusOK)
		}
		defer restore()
		refuse := func() {
			if err := rbs.Delete(ctx, clusterInfoBinding, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitAnonymousRead(t, c, http.StatusForbidden) // the fault is in place
		}
		writeToken(t, c, "w4", lab.Token)
		argv := []string{"kjoin", "join", lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash, "--dry-run", "-v", "1"}

		// Refused for 5 s, then allowed: the join reads again and goes on.
		refuse()
		done := make(chan lab.Result, 1)
		go func() { done <- c.Exec(ctx, "w4", argv...) }()
		time.Sleep(5 * time.Second)
		restore()
		r := <-done
		t.Logf("w4$ %s  (exit %d, %s)", strings.Join(argv, " "), r.ExitCode, r.Duration.Round(time.Millisecond))
		if out := r.Stdout + r.Stderr; r.ExitCode != 0 || !strings.Contains(out, "HTTP 403") || !strings.Contains(out, "the anonymous read of cluster-info was refused") {
			t.Errorf("refused for 5s: exit %d, output %s; want exit 0 after reading again past the 403s", r.ExitCode, out)
		}

		// Refused for good: exit 5 once the 20 s grace is over.
		refuse()
		r = c.Run(t, "w4", argv...)
		if r.ExitCode != 5 || !strings.Contains(r.Stderr, "refused an anonymous read of cluster-info (HTTP 403), still after 20s") || r.Duration < 20*time.Second {
			t.Errorf("refused for good: exit %d after %s, stderr %s; want exit 5 after the 20s grace", r.ExitCode, r.Duration, r.Stderr)
		}
	})
	t.Run("hostile endpoint", func(t *testing.T) {
		ctx := context.Background()
		cm, err := c.Client.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var sawCredential atomic.Bool
		var requests atomic.Int32
		srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			if r.Header.Get("Authorization") != "" {
				sawCredential.Store(true)
			}
			_ = json.NewEncoder(w).Encode(cm)
		})
		writeToken(t, c, "w4", lab.Token)
		r := c.Run(t, "w4", "kjoin", "join", srv, "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash)
		if r.ExitCode != 4 || !strings.Contains(r.Stderr, "not signed by the pinned CA") {
			t.Errorf("exit %d, stderr %s; want exit 4 refusing the endpoint's certificate", r.ExitCode, r.Stderr)
		}
		if requests.Load() == 0 {
			t.Error("the hostile endpoint was never contacted: the test proves nothing")
		}
		if sawCredential.Load() {
			t.Error("the token reached the hostile endpoint")
		}
		if _, err := os.Stat(c.HostPath("w4", "/etc/kubernetes/kubelet.conf")); err == nil {
			t.Error("a refused join wrote kubelet.conf")
		}
	})
}

// hostileServer serves TLS with its own CA on the lab bridge and returns its host:port.
func hostileServer(t *testing.T, h http.HandlerFunc) string {
	addr, _ := hostileServerCA(t, h)
	return addr
}

// hostileServerCA is hostileServer that also returns the attacker's CA (PEM).
func hostileServerCA(t *testing.T, h http.HandlerFunc) (string, []byte) {
	t.Helper()
	key, _ := pki.NewECKey()
	now := time.Now()
	ca, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "hostile", NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, key)
	if err != nil {
		t.Fatal(err)
	}
	skey, _ := pki.NewECKey()
	cert, err := pki.NewSignedCert(pki.CertConfig{CommonName: "hostile", IPs: []net.IP{net.ParseIP(lab.BridgeAddr)}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, skey.Public(), ca, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", lab.BridgeAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: skey}}}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String(), pki.EncodeCert(ca)
}

// kubeadmFlagsWithLabel adds kjoin's node label to kubeadm's kubeadm-flags.env as kjoin does
// (kjoin.dev/joined-by=kjoin, in --node-labels, flags sorted by name).
func kubeadmFlagsWithLabel(t *testing.T, env []byte) []byte {
	t.Helper()
	v, ok := strings.CutPrefix(strings.TrimSpace(string(env)), "KUBELET_KUBEADM_ARGS=")
	if !ok {
		t.Fatalf("kubeadm's kubeadm-flags.env: %q", env)
	}
	unq, err := strconv.Unquote(v)
	if err != nil {
		t.Fatalf("kubeadm's kubeadm-flags.env: %q: %v", env, err)
	}
	flags := append(strings.Fields(unq), "--node-labels=kjoin.dev/joined-by=kjoin")
	sort.SliceStable(flags, func(i, j int) bool {
		ni, _, _ := strings.Cut(flags[i], "=")
		nj, _, _ := strings.Cut(flags[j], "=")
		return ni < nj
	})
	return fmt.Appendf(nil, "KUBELET_KUBEADM_ARGS=%q\n", strings.Join(flags, " "))
}

// clusterInfoBinding is kubeadm's RoleBinding that lets anyone read kube-public/cluster-info.
const clusterInfoBinding = "kubeadm:bootstrap-signer-clusterinfo"

// waitAnonymousRead waits up to 30 s for cp1's API server to answer an anonymous read of
// cluster-info with status.
func waitAnonymousRead(t *testing.T, c *framework.Cluster, status int) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the lab's own API server; only the status matters
	url := fmt.Sprintf("https://%s/api/v1/namespaces/kube-public/configmaps/cluster-info", net.JoinHostPort(c.Hosts["cp1"].IP, strconv.Itoa(lab.APIPort)))
	last := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if last = resp.StatusCode; last == status {
				return
			}
		}
	}
	t.Fatalf("an anonymous read of cluster-info answered HTTP %d for 30s, want %d", last, status)
}
