package endpoint

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// cluster is a CA, an API server endpoint it certifies for 127.0.0.1, and the node's Lease.
type cluster struct {
	caPEM []byte
	srv   *httptest.Server
	// user is who the endpoint says the client is; renewed is the Lease's renewal time.
	mu      sync.Mutex
	user    string
	renewed time.Time
	// clientCN is the common name of the client certificate the endpoint saw.
	clientCN string
}

func newCA(t *testing.T) (*x509.Certificate, func(cfg pki.CertConfig) tls.Certificate) {
	t.Helper()
	key, _ := pki.NewECKey()
	now := time.Now()
	ca, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "kubernetes", NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, key)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(cfg pki.CertConfig) tls.Certificate {
		k, _ := pki.NewECKey()
		cfg.NotBefore, cfg.NotAfter = now.Add(-time.Hour), now.Add(time.Hour)
		c, err := pki.NewSignedCert(cfg, k.Public(), ca, key)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: k}
	}
	return ca, issue
}

func newCluster(t *testing.T, serving func(issue func(pki.CertConfig) tls.Certificate) tls.Certificate) (*cluster, func(pki.CertConfig) tls.Certificate) {
	t.Helper()
	ca, issue := newCA(t)
	c := &cluster{caPEM: pki.EncodeCert(ca), user: "system:node:w1", renewed: time.Now().Add(-5 * time.Second)}
	cert := issue(pki.CertConfig{CommonName: "kube-apiserver", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if serving != nil {
		cert = serving(issue)
	}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			c.clientCN = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/selfsubjectreviews":
			_ = json.NewEncoder(w).Encode(&authenticationv1.SelfSubjectReview{TypeMeta: metav1.TypeMeta{Kind: "SelfSubjectReview", APIVersion: "authentication.k8s.io/v1"},
				Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: c.user}}})
		case r.Method == http.MethodGet && r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/w1":
			rt := metav1.NewMicroTime(c.renewed)
			_ = json.NewEncoder(w).Encode(&coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
				ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "kube-node-lease"}, Spec: coordinationv1.LeaseSpec{RenewTime: &rt}})
		default:
			http.NotFound(w, r)
		}
	}))
	c.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}
	c.srv.StartTLS()
	t.Cleanup(c.srv.Close)
	return c, issue
}

func (c *cluster) endpoint() string { return strings.TrimPrefix(c.srv.URL, "https://") }

// runner plays systemd: a kubelet restart renews the Lease when renew says so.
type runner struct {
	c     *cluster
	renew bool
	calls []string
}

func (r *runner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, strings.Join(append([]string{name}, args...), " "))
	if r.renew && name == "systemctl" && len(args) == 2 && args[0] == "restart" && args[1] == "kubelet" {
		r.c.mu.Lock()
		r.c.renewed = time.Now().Add(time.Second)
		r.c.mu.Unlock()
	}
	return nil, nil
}

// stepClock is the real clock whose waits end at once, each advancing it.
type stepClock struct {
	clock.RealClock
	mu  sync.Mutex
	off time.Duration
}

func (c *stepClock) Now() time.Time                  { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *stepClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// node is a joined worker (or, with admin, a control plane) whose kubeconfigs name old.
type node struct {
	env    *host.Env
	run    *runner
	root   string
	admin  *fake.Clientset
	before map[string][]byte
}

const old = "https://control-plane.example:6443"

func kubeconfig(t *testing.T, server string, caPEM []byte, auth *clientcmdapi.AuthInfo) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos["u"] = auth
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newNode(t *testing.T, c *cluster, issue func(pki.CertConfig) tls.Certificate, files map[string]string) *node {
	t.Helper()
	root := t.TempDir()
	cert := issue(pki.CertConfig{CommonName: "system:node:w1", Organization: []string{"system:nodes"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	n := &node{root: root, run: &runner{c: c, renew: true}, before: map[string][]byte{}, admin: fake.NewClientset()}
	write := func(p string, b []byte, mode os.FileMode) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, mode); err != nil {
			t.Fatal(err)
		}
		n.before[p] = b
	}
	keyPEM, err := pki.EncodeKey(cert.PrivateKey.(crypto.Signer))
	if err != nil {
		t.Fatal(err)
	}
	write(host.KubeletClientCurrent, append(pki.EncodeCert(leaf), keyPEM...), 0o600)
	for p, server := range files {
		auth := &clientcmdapi.AuthInfo{ClientCertificate: host.KubeletClientCurrent, ClientKey: host.KubeletClientCurrent}
		if p != host.KubeletKubeconfig {
			auth = &clientcmdapi.AuthInfo{Token: "admin"} // the fake cluster's admin
		}
		write(p, kubeconfig(t, server, c.caPEM, auth), 0o600)
	}
	n.env = &host.Env{Paths: host.Paths{Root: root}, Clock: &stepClock{}, Exec: n.run,
		NewClient: func(cfg *rest.Config) (kubernetes.Interface, error) {
			if cfg.BearerToken == "admin" {
				return n.admin, nil
			}
			return kubernetes.NewForConfig(cfg)
		},
	}
	return n
}

func (n *node) read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.root, p))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (n *node) assertUnchanged(t *testing.T) {
	t.Helper()
	for p, b := range n.before {
		if !bytes.Equal(n.read(t, p), b) {
			t.Errorf("%s changed", p)
		}
	}
	for _, call := range n.run.calls {
		if strings.Contains(call, "restart") {
			t.Errorf("ran %q", call)
		}
	}
}

func serverIn(t *testing.T, b []byte) string {
	t.Helper()
	kc, err := clientcmd.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return serverOf(kc)
}

func TestMoveAWorker(t *testing.T) {
	c, issue := newCluster(t, nil)
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: old})
	r, err := Move(context.Background(), n.env, Options{To: c.endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	if got := serverIn(t, n.read(t, host.KubeletKubeconfig)); got != "https://"+c.endpoint() {
		t.Errorf("kubelet.conf names %q", got)
	}
	st, _ := os.Stat(filepath.Join(n.root, host.KubeletKubeconfig))
	if st.Mode().Perm() != 0o600 {
		t.Errorf("kubelet.conf mode %v, want 0600 kept", st.Mode().Perm())
	}
	if r.Identity != "system:node:w1" || c.clientCN != "system:node:w1" {
		t.Errorf("identity %q, client certificate seen %q: want the node's own", r.Identity, c.clientCN)
	}
	if strings.Join(r.Files, ",") != host.KubeletKubeconfig || strings.Join(r.Restarted, ",") != "kubelet" || r.LeaseRenewed.IsZero() || !r.Changed || r.From != "control-plane.example:6443" {
		t.Errorf("report %+v", r)
	}
	if strings.Join(n.run.calls, "\n") != "systemctl restart kubelet" {
		t.Errorf("commands %q", n.run.calls)
	}
	// Again: nothing to do.
	n.run.calls = nil
	r, err = Move(context.Background(), n.env, Options{To: c.endpoint()})
	if err != nil || r.Changed || len(r.Files) != 0 || len(n.run.calls) != 0 {
		t.Errorf("second move: err %v report %+v commands %q", err, r, n.run.calls)
	}
}

// An endpoint whose certificate another CA signed is not this cluster: refused, nothing changed.
func TestMoveRefusesAnotherClusterCA(t *testing.T) {
	other, otherIssue := newCluster(t, nil)
	_ = other
	c, issue := newCluster(t, func(func(pki.CertConfig) tls.Certificate) tls.Certificate {
		return otherIssue(pki.CertConfig{CommonName: "kube-apiserver", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	})
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: old})
	_, err := Move(context.Background(), n.env, Options{To: c.endpoint()})
	if operr.CodeOf(err) != operr.Trust || !strings.Contains(err.Error(), "not signed by this node's cluster CA") {
		t.Fatalf("got %v", err)
	}
	n.assertUnchanged(t)
}

// The certificate must name the new endpoint's host.
func TestMoveRefusesACertificateForAnotherName(t *testing.T) {
	c, issue := newCluster(t, func(issue func(pki.CertConfig) tls.Certificate) tls.Certificate {
		return issue(pki.CertConfig{CommonName: "kube-apiserver", DNSNames: []string{"api.example.com"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	})
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: old})
	_, err := Move(context.Background(), n.env, Options{To: c.endpoint()})
	if operr.CodeOf(err) != operr.Trust || !strings.Contains(err.Error(), `does not name "127.0.0.1"`) {
		t.Fatalf("got %v", err)
	}
	n.assertUnchanged(t)
}

// An API server of this CA that does not know this node as itself is refused.
func TestMoveRefusesAnotherIdentity(t *testing.T) {
	c, issue := newCluster(t, nil)
	c.user = "system:anonymous"
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: old})
	_, err := Move(context.Background(), n.env, Options{To: c.endpoint()})
	if operr.CodeOf(err) != operr.Trust || !strings.Contains(err.Error(), `"system:anonymous", not "system:node:w1"`) {
		t.Fatalf("got %v", err)
	}
	n.assertUnchanged(t)
}

// A kubelet that does not renew through the new endpoint: every file restored, the kubelet
// restarted on them.
func TestMoveRollsBackWithoutARenewal(t *testing.T) {
	c, issue := newCluster(t, nil)
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: old})
	n.run.renew = false
	r, err := Move(context.Background(), n.env, Options{To: c.endpoint(), RenewTimeout: 5 * time.Second})
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "did not renew its Lease") {
		t.Fatalf("got %v", err)
	}
	if !bytes.Equal(n.read(t, host.KubeletKubeconfig), n.before[host.KubeletKubeconfig]) || !r.RolledBack {
		t.Errorf("kubelet.conf not restored (rolled back: %v)", r.RolledBack)
	}
	if strings.Join(n.run.calls, "\n") != "systemctl restart kubelet\nsystemctl restart kubelet" {
		t.Errorf("commands %q: want the restart, then the one after the rollback", n.run.calls)
	}
}

func TestMoveDryRunChangesNothing(t *testing.T) {
	c, issue := newCluster(t, nil)
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: old})
	r, err := Move(context.Background(), n.env, Options{To: c.endpoint(), DryRun: true, UpdateCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	n.assertUnchanged(t)
	plan := strings.Join(r.Planned, "\n")
	for _, want := range []string{"rewrite " + host.KubeletKubeconfig, "restart kubelet", "controlPlaneEndpoint"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan does not say %q:\n%s", want, plan)
		}
	}
	if r.Changed || r.Identity != "system:node:w1" {
		t.Errorf("report %+v", r)
	}
}

// A control plane's kubelet talks to its own API server: only the files that name the old
// endpoint move, and the cluster's records with --update-cluster.
func TestMoveAControlPlaneAndTheCluster(t *testing.T) {
	c, issue := newCluster(t, nil)
	local := "https://10.0.0.12:6443"
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: local, host.AdminKubeconfig: old, "/etc/kubernetes/scheduler.conf": local})
	ci := kubeconfig(t, old, c.caPEM, &clientcmdapi.AuthInfo{})
	n.admin = fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system"},
			Data: map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: control-plane.example:6443\nkubernetesVersion: v1.37.2\n"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"}, Data: map[string]string{"kubeconfig": string(ci)}})
	r, err := Move(context.Background(), n.env, Options{To: c.endpoint(), UpdateCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.Files, ",") != host.AdminKubeconfig || len(r.Restarted) != 0 || len(n.run.calls) != 0 {
		t.Errorf("files %v restarted %v commands %q: want admin.conf only, nothing restarted", r.Files, r.Restarted, n.run.calls)
	}
	if !bytes.Equal(n.read(t, host.KubeletKubeconfig), n.before[host.KubeletKubeconfig]) || !bytes.Equal(n.read(t, "/etc/kubernetes/scheduler.conf"), n.before["/etc/kubernetes/scheduler.conf"]) {
		t.Error("a kubeconfig naming the local API server was changed")
	}
	cm, _ := n.admin.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if cfg := cm.Data["ClusterConfiguration"]; !strings.Contains(cfg, "controlPlaneEndpoint: "+c.endpoint()) || !strings.Contains(cfg, "kubernetesVersion: v1.37.2") {
		t.Errorf("kubeadm-config:\n%s", cfg)
	}
	info, _ := n.admin.CoreV1().ConfigMaps("kube-public").Get(context.Background(), "cluster-info", metav1.GetOptions{})
	if got := serverIn(t, []byte(info.Data["kubeconfig"])); got != "https://"+c.endpoint() {
		t.Errorf("cluster-info names %q", got)
	}
	if strings.Join(r.ClusterObjects, ",") != "kube-system/kubeadm-config,kube-public/cluster-info" {
		t.Errorf("cluster objects %v", r.ClusterObjects)
	}
}

func TestMoveBadEndpoint(t *testing.T) {
	_, err := Move(context.Background(), &host.Env{}, Options{To: "api.example.com"})
	if operr.CodeOf(err) != operr.Usage {
		t.Errorf("got %v", err)
	}
}

// sandboxes is a container runtime holding the control plane's static pods.
type sandboxes struct{ removed []string }

func (s *sandboxes) PodSandboxes(context.Context) ([]cri.Sandbox, error) {
	return []cri.Sandbox{{ID: "cm", Name: "kube-system/kube-controller-manager-w1"}, {ID: "sched", Name: "kube-system/kube-scheduler-w1"}}, nil
}
func (s *sandboxes) RemovePodSandbox(_ context.Context, id string) error {
	s.removed = append(s.removed, id)
	return nil
}
func (s *sandboxes) Close() error { return nil }

// A controller-manager.conf that names the old endpoint moves, and its static pod restarts
// (its sandbox removed: the kubelet starts it again on the new file); the scheduler's,
// naming the local API server, stays.
func TestMoveRestartsTheStaticPodWhoseKubeconfigMoved(t *testing.T) {
	c, issue := newCluster(t, nil)
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: "https://10.0.0.12:6443", host.AdminKubeconfig: old,
		"/etc/kubernetes/controller-manager.conf": old, "/etc/kubernetes/scheduler.conf": "https://10.0.0.12:6443"})
	rt := &sandboxes{}
	n.env.Sandboxes = func(string) (cri.Sandboxes, error) { return rt, nil }
	r, err := Move(context.Background(), n.env, Options{To: c.endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rt.removed, ",") != "cm" || strings.Join(r.Restarted, ",") != "kube-controller-manager" {
		t.Errorf("removed sandboxes %v, restarted %v: want the controller-manager's only", rt.removed, r.Restarted)
	}
	if got := serverIn(t, n.read(t, "/etc/kubernetes/controller-manager.conf")); got != "https://"+c.endpoint() {
		t.Errorf("controller-manager.conf names %q", got)
	}
}

// A signed cluster-info is waited on until the bootstrap signer signs it again: one never
// signed again is a timeout, not a silent success.
func TestMoveClusterWaitsForTheSigner(t *testing.T) {
	c, issue := newCluster(t, nil)
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: "https://10.0.0.12:6443", host.AdminKubeconfig: old})
	ci := kubeconfig(t, old, c.caPEM, &clientcmdapi.AuthInfo{})
	n.admin = fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system"}, Data: map[string]string{"ClusterConfiguration": "controlPlaneEndpoint: x:6443\n"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"}, Data: map[string]string{"kubeconfig": string(ci), "jws-kubeconfig-abcdef": "old-signature"}})
	_, err := Move(context.Background(), n.env, Options{To: c.endpoint(), UpdateCluster: true})
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "not signed again") {
		t.Fatalf("got %v", err)
	}
}

// A stranger's certificate that also does not name the address (a kubelet's self-signed
// serving certificate): Go checks the name first, but the refusal says what matters, that
// the cluster's CA did not sign it.
func TestMoveNamesAStrangerAsSuchEvenWithTheWrongName(t *testing.T) {
	_, otherIssue := newCluster(t, nil)
	c, issue := newCluster(t, func(func(pki.CertConfig) tls.Certificate) tls.Certificate {
		return otherIssue(pki.CertConfig{CommonName: "cp1@1700000000", DNSNames: []string{"cp1"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	})
	n := newNode(t, c, issue, map[string]string{host.KubeletKubeconfig: old})
	_, err := Move(context.Background(), n.env, Options{To: c.endpoint()})
	if operr.CodeOf(err) != operr.Trust || !strings.Contains(err.Error(), "not signed by this node's cluster CA") {
		t.Fatalf("got %v", err)
	}
	n.assertUnchanged(t)
}
