package diagnose

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/verify"
)

// runner answers systemctl and journalctl like a host: show is systemctl show's output (""
// fails, as on a node without systemd), log the kubelet's journal ("" a default one).
type runner struct {
	kubeletUp bool
	show, log string
}

func (r *runner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	cmd := name + " " + strings.Join(args, " ")
	switch {
	case strings.HasPrefix(cmd, "systemctl is-active"):
		if !r.kubeletUp {
			return nil, errors.New("inactive")
		}
	case strings.HasPrefix(cmd, "systemctl show"):
		if r.show == "" {
			return nil, errors.New("unsupported verb show")
		}
		return []byte(r.show), nil
	case strings.HasPrefix(cmd, "journalctl"):
		if r.log != "" {
			return []byte(r.log), nil
		}
		return []byte("I1130 10:00:00 ok\nE1130 10:00:01 kubelet.go:1 something failed\n"), nil
	}
	return nil, nil
}

// crashLog is the journal of a kubelet that exits at start three times.
const crashLog = `E1201 10:00:00.1 run.go:72] "command failed" err="failed to load kubelet config file, path: /var/lib/kubelet/config.yaml, error: yaml: line 3: mapping values are not allowed in this context"
kubelet.service: Main process exited, code=exited, status=1/FAILURE
E1201 10:00:10.1 run.go:72] "command failed" err="failed to load kubelet config file, path: /var/lib/kubelet/config.yaml, error: yaml: line 3: mapping values are not allowed in this context"
E1201 10:00:20.1 run.go:72] "command failed" err="failed to load kubelet config file, path: /var/lib/kubelet/config.yaml, error: yaml: line 3: mapping values are not allowed in this context"
`

// unhealthy makes the kubelet's /healthz refuse connections (nothing listens on port 1).
func unhealthy(t *testing.T, n *node) {
	n.write(t, host.KubeletConfigPath, "kind: KubeletConfiguration\nrotateCertificates: true\nhealthzPort: 1\n")
}

type runtime struct {
	up, network bool
	info        cri.Info
}

func (r *runtime) Describe(context.Context) (cri.Info, error) { return r.info, nil }

func (r *runtime) Status(context.Context) (bool, bool, string, error) {
	return true, r.network, fmt.Sprintf("RuntimeReady=true; NetworkReady=%v", r.network), nil
}
func (r *runtime) RunningContainers(context.Context) (int, error) { return 3, nil }
func (r *runtime) Close() error                                   { return nil }

type node struct {
	deps    Deps
	rt      *runtime
	runner  *runner
	root    string
	ca      *x509.Certificate
	caKey   crypto.Signer
	apiAddr string
}

// newNode is a healthy node "w1": kubelet running and healthy, a valid client certificate,
// an API server (TLS from the cluster CA) that knows the Ready Node and a fresh Lease, a
// ready runtime, a CNI config and plenty of resources.
func newNode(t *testing.T) *node {
	t.Helper()
	return newNodeOn(t, nil)
}

// newNodeOn is newNode with the API server on listener l (nil: IPv4 loopback).
func newNodeOn(t *testing.T, l net.Listener) *node {
	t.Helper()
	root := t.TempDir()
	caKey, _ := pki.NewECKey()
	now := time.Now()
	ca, _ := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "kubernetes", NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}, caKey)
	srvKey, _ := pki.NewECKey()
	srvCert, _ := pki.NewSignedCert(pki.CertConfig{CommonName: "kube-apiserver", IPs: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, srvKey.Public(), ca, caKey)
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	api.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}}, ClientAuth: tls.RequestClientCert}
	if l != nil {
		api.Listener.Close()
		api.Listener = l
	}
	api.StartTLS()
	t.Cleanup(api.Close)
	healthz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(healthz.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(healthz.URL, "http://"))

	n := &node{root: root, ca: ca, caKey: caKey, rt: &runtime{up: true, network: true}, runner: &runner{kubeletUp: true}, apiAddr: strings.TrimPrefix(api.URL, "https://")}
	n.issueCert(t, now.Add(-time.Hour), now.Add(365*24*time.Hour))
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: api.URL, CertificateAuthorityData: pki.EncodeCert(ca)}
	kc.AuthInfos["a"] = &clientcmdapi.AuthInfo{ClientCertificate: host.KubeletClientCurrent, ClientKey: host.KubeletClientCurrent}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "a"}
	kc.CurrentContext = "c"
	b, _ := clientcmd.Write(*kc)
	n.write(t, host.KubeletKubeconfig, string(b))
	n.write(t, host.KubeletConfigPath, "kind: KubeletConfiguration\nrotateCertificates: true\nhealthzPort: "+port+"\ncontainerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n")
	n.write(t, "/etc/cni/net.d/10-bridge.conflist", "{}")
	n.write(t, "/proc/meminfo", "MemTotal: 8000000 kB\nMemAvailable: 4000000 kB\n")
	n.write(t, "/proc/sys/kernel/pid_max", "4194304\n")

	renew := metav1.NewMicroTime(now.Add(-3 * time.Second))
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "kube-node-lease"}, Spec: coordinationv1.LeaseSpec{RenewTime: &renew}})
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	n.rt.info = cri.Info{Name: "containerd", Version: "v2.4.2", RuntimeConfig: true, CgroupDriver: "cgroupfs",
		SandboxImage: "registry.k8s.io/pause:3.10.2", SandboxImageFrom: "the runtime's pinned images"}
	env := &host.Env{Paths: host.Paths{Root: root}, Clock: clock.RealClock{}, Exec: n.runner,
		NewClient: func(*rest.Config) (kubernetes.Interface, error) { return client, nil },
		Hostname:  func() (string, error) { return "w1", nil }}
	var d net.Dialer
	n.deps = Deps{Host: env,
		Runtime: func(context.Context, string) (Runtime, error) {
			if !n.rt.up {
				return nil, errors.New("dial unix /run/containerd/containerd.sock: connect: no such file or directory")
			}
			return n.rt, nil
		},
		Statfs:     func(string) (uint64, uint64, error) { return 50 << 30, 100 << 30, nil },
		LookupHost: func(context.Context, string) ([]string, error) { return []string{"127.0.0.1"}, nil },
		Dial:       d.DialContext,
	}
	return n
}

func (n *node) write(t *testing.T, p, content string) {
	t.Helper()
	full := filepath.Join(n.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (n *node) issueCert(t *testing.T, notBefore, notAfter time.Time) {
	t.Helper()
	k, _ := pki.NewECKey()
	c, err := pki.NewSignedCert(pki.CertConfig{CommonName: "system:node:w1", Organization: []string{"system:nodes"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore: notBefore, NotAfter: notAfter}, k.Public(), n.ca, n.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := pki.EncodeKey(k)
	n.write(t, host.KubeletClientCurrent, string(pki.EncodeCert(c))+string(keyPEM))
}

func verdictOf(t *testing.T, n *node) *Report {
	t.Helper()
	r := Run(context.Background(), n.deps)
	t.Logf("verdict %+v", r.Verdict)
	return r
}

func check(r *Report, id string) verify.Check {
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	return verify.Check{Status: "missing"}
}

func TestHealthyNode(t *testing.T) {
	n := newNode(t)
	r := verdictOf(t, n)
	if !r.Verdict.Healthy {
		for _, c := range r.Checks {
			t.Logf("%s %s %s (%s)", c.Status, c.ID, c.Summary, c.Evidence)
		}
		t.Fatalf("healthy node diagnosed as %+v", r.Verdict)
	}
	for _, id := range []string{"kubelet.service", "kubelet.healthz", "cert.validity", "cert.node", "cert.rotation", "api.tcp", "api.tls", "api.auth",
		"node.conditions", "node.lease", "cri.reachable", "cri.runtime", "cri.network", "cri.version", "cri.runtimeconfig", "cri.sandbox",
		"cni.config", "res.nodefs", "res.memory", "res.pids"} {
		if c := check(r, id); c.Status != verify.Pass {
			t.Errorf("%s: %+v", id, c)
		}
	}
	if c := check(r, "kubelet.log"); c.Status != verify.Warn || !strings.Contains(c.Evidence, "something failed") {
		t.Errorf("kubelet.log: %+v", c)
	}
	if c := check(r, "cri.containers"); !strings.Contains(c.Summary, "3 container") {
		t.Errorf("cri.containers: %+v", c)
	}
}

// The runtime's own answers: its name and version, a missing RuntimeConfig call and a
// sandbox image other than the cluster's kubeadm's are warnings naming what was seen (the node
// stays healthy: they do not keep it NotReady); a mirror's pause of the same tag passes.
func TestRuntimeDescribed(t *testing.T) {
	n := newNode(t)
	n.rt.info = cri.Info{Name: "containerd", Version: "1.6.20~ds1", SandboxImage: "registry.k8s.io/pause:3.8", SandboxImageFrom: "the runtime's status (config.sandboxImage)"}
	r := verdictOf(t, n)
	if c := check(r, "cri.version"); c.Status != verify.Pass || c.Summary != "containerd 1.6.20~ds1" {
		t.Errorf("cri.version: %+v", c)
	}
	if c := check(r, "cri.runtimeconfig"); c.Status != verify.Warn || !strings.Contains(c.Summary, "v1.38") || !strings.Contains(c.Evidence, "containerd 1.6.20~ds1") {
		t.Errorf("cri.runtimeconfig: %+v", c)
	}
	if c := check(r, "cri.sandbox"); c.Status != verify.Warn || !strings.Contains(c.Summary, "registry.k8s.io/pause:3.8") || !strings.Contains(c.Summary, "registry.k8s.io/pause:3.10.2") {
		t.Errorf("cri.sandbox: %+v", c)
	}
	if !r.Verdict.Healthy {
		t.Errorf("runtime warnings made the node unhealthy: %+v", r.Verdict)
	}
	n.rt.info.SandboxImage = "mirror.example.com/k8s/pause:3.10.2"
	if c := check(verdictOf(t, n), "cri.sandbox"); c.Status != verify.Pass {
		t.Errorf("a mirror's pause:3.10.2: %+v", c)
	}
	n.rt.info.SandboxImage = ""
	if c := check(verdictOf(t, n), "cri.sandbox"); c.Status != verify.Warn || !strings.Contains(c.Evidence, "registry.k8s.io/pause:3.10.2") {
		t.Errorf("no sandbox image reported: %+v", c)
	}
}

// A node whose kubelet.conf names a bracketed IPv6 server (https://[::1]:port): the address
// is dialled as it is (no DNS lookup), and TCP, TLS and the kubelet's credentials pass.
func TestIPv6APIServer(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	n := newNodeOn(t, l)
	if !strings.HasPrefix(n.apiAddr, "[::1]:") {
		t.Fatalf("API server at %s", n.apiAddr)
	}
	n.deps.LookupHost = func(context.Context, string) ([]string, error) {
		return nil, errors.New("no DNS lookup expected for an IP")
	}
	r := verdictOf(t, n)
	for _, id := range []string{"api.tcp", "api.tls", "api.auth"} {
		if c := check(r, id); c.Status != verify.Pass {
			t.Errorf("%s: %+v", id, c)
		}
	}
	if !r.Verdict.Healthy {
		t.Errorf("verdict %+v", r.Verdict)
	}
}

// Each fault is named by the verdict.
func TestFaultsNamedByTheVerdict(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, n *node)
		want  string
	}{
		{"kubelet stopped", func(t *testing.T, n *node) { n.runner.kubeletUp = false }, "kubelet.service"},
		{"runtime down", func(t *testing.T, n *node) { n.rt.up = false }, "cri.reachable"},
		{"cni config removed", func(t *testing.T, n *node) {
			_ = os.Remove(filepath.Join(n.root, "/etc/cni/net.d/10-bridge.conflist"))
			n.rt.network = false
		}, "cni.config"},
		{"network not ready", func(t *testing.T, n *node) { n.rt.network = false }, "cri.network"},
		{"API server unreachable", func(t *testing.T, n *node) {
			n.deps.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("i/o timeout") }
		}, "api.tcp"},
		{"client certificate expired", func(t *testing.T, n *node) {
			n.issueCert(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
		}, "cert.validity"},
		{"certificate of another node", func(t *testing.T, n *node) { n.deps.NodeName = "w2" }, "cert.node"},
		{"crash loop counted by systemd", func(t *testing.T, n *node) {
			unhealthy(t, n)
			n.runner.kubeletUp = false
			n.runner.show = "NRestarts=7\nActiveState=activating\nSubState=auto-restart\nExecMainStatus=1\n"
		}, "kubelet.crashloop"},
		{"crash loop only in the kubelet's log", func(t *testing.T, n *node) {
			unhealthy(t, n)
			n.runner.log = crashLog
		}, "kubelet.crashloop"},
		{"crash loop of an expired certificate", func(t *testing.T, n *node) { // the cause, not the symptom
			unhealthy(t, n)
			n.runner.log = crashLog
			n.issueCert(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
		}, "cert.validity"},
		{"expired certificate, the kubelet between two restarts", func(t *testing.T, n *node) { // as systemd shows it most of the time
			unhealthy(t, n)
			n.runner.kubeletUp = false
			n.runner.show = "NRestarts=2\nActiveState=activating\nSubState=auto-restart\nResult=exit-code\nExecMainStatus=1\n"
			n.issueCert(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
		}, "cert.validity"},
		{"expired certificate, the kubelet stopped by hand", func(t *testing.T, n *node) { // start it first
			n.runner.kubeletUp = false
			n.runner.show = "NRestarts=0\nActiveState=inactive\nSubState=dead\nResult=success\n"
			n.issueCert(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
		}, "kubelet.service"},
		{"disk pressure", func(t *testing.T, n *node) {
			n.deps.Statfs = func(string) (uint64, uint64, error) { return 1 << 30, 100 << 30, nil }
		}, "res.nodefs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			tc.fault(t, n)
			r := verdictOf(t, n)
			if r.Verdict.Healthy || r.Verdict.CheckID != tc.want || r.Verdict.Next == "" {
				t.Errorf("verdict %+v, want %s", r.Verdict, tc.want)
			}
		})
	}
}

// With the API server unreachable the local checks still run.
func TestLocalChecksRunWithoutTheAPIServer(t *testing.T) {
	n := newNode(t)
	n.deps.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("connection refused") }
	r := verdictOf(t, n)
	for _, id := range []string{"kubelet.service", "cert.validity", "cri.runtime", "cni.config", "res.memory"} {
		if c := check(r, id); c.Status != verify.Pass {
			t.Errorf("%s did not run: %+v", id, c)
		}
	}
	if c := check(r, "node.conditions"); c.Status != verify.Warn {
		t.Errorf("node.conditions: %+v", c)
	}
}

// A machine that never joined is told so, not that its kubelet is down.
func TestNeverJoined(t *testing.T) {
	n := newNode(t)
	n.runner.kubeletUp = false
	if err := os.Remove(filepath.Join(n.root, host.KubeletKubeconfig)); err != nil {
		t.Fatal(err)
	}
	r := verdictOf(t, n)
	if r.Verdict.Healthy || r.Verdict.CheckID != "node.joined" || !strings.Contains(r.Verdict.Cause, "has not joined") {
		t.Errorf("verdict %+v", r.Verdict)
	}
	if c := check(newVerdict(t), "node.joined"); c.Status != verify.Pass {
		t.Errorf("a joined node: %+v", c)
	}
}

func newVerdict(t *testing.T) *Report { return verdictOf(t, newNode(t)) }

// A crash loop names the error the kubelet exits with and where the restarts were counted;
// a healthy kubelet whose log holds past failed starts is not looping.
func TestCrashLoopEvidence(t *testing.T) {
	n := newNode(t)
	unhealthy(t, n)
	n.runner.log = crashLog
	r := verdictOf(t, n)
	c := checkOf(t, r, "kubelet.crashloop")
	if c.Status != verify.Fail || !strings.Contains(c.Evidence, "its log: 3 failed start(s)") || !strings.Contains(c.Evidence, "it exits with: failed to load kubelet config file") {
		t.Errorf("crash loop check %+v", c)
	}
	// An expired certificate makes the kubelet exit too: the loop is listed, the cause named.
	n = newNode(t)
	unhealthy(t, n)
	n.runner.log = crashLog
	n.issueCert(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	if r := verdictOf(t, n); checkOf(t, r, "kubelet.crashloop").Status != verify.Fail || r.Verdict.CheckID != "cert.validity" {
		t.Errorf("crash loop of an expired certificate: verdict %s, loop %+v", r.Verdict.CheckID, checkOf(t, r, "kubelet.crashloop"))
	}
	n = newNode(t)
	n.runner.log = crashLog
	if c := checkOf(t, verdictOf(t, n), "kubelet.crashloop"); c.Status != verify.Pass {
		t.Errorf("a healthy kubelet with old failures in its log is called a crash loop: %+v", c)
	}
}

// Checks whose precondition failed are listed as skipped, naming it, not dropped.
func TestSkippedChecksAreListed(t *testing.T) {
	n := newNode(t)
	n.deps.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("i/o timeout") }
	r := verdictOf(t, n)
	for id, reason := range map[string]string{"api.tls": "needs api.tcp, which failed", "api.auth": "needs api.tls, which was not checked", "node.lease": "needs node.registered, which was not checked"} {
		if c := checkOf(t, r, id); c.Status != verify.Skip || c.Evidence != reason {
			t.Errorf("%s: %+v, want skipped: %s", id, c, reason)
		}
	}
}

func checkOf(t *testing.T, r *Report, id string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no check %s in %+v", id, r.Checks)
	return Check{}
}

func TestExpiredOrExpiringCertificateNamesTheRenewal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		from, to  time.Time
		status    verify.Status
		summaryOf string
	}{
		{"expired", time.Now().Add(-48 * time.Hour), time.Now().Add(-time.Hour), verify.Fail, "cannot rotate"},
		{"expiring unrotated", time.Now().Add(-47 * time.Hour), time.Now().Add(time.Hour), verify.Warn, "expires in 1h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			n.issueCert(t, tc.from, tc.to)
			c := checkOf(t, verdictOf(t, n), "cert.validity")
			if c.Status != tc.status || !strings.Contains(c.Summary, tc.summaryOf) || !strings.Contains(c.Evidence, "kjoin token create") || !strings.Contains(c.Evidence, "kjoin join") {
				t.Errorf("cert.validity = %+v", c)
			}
		})
	}
}

// Every local check passes but the Node cannot be read: that is no verdict of health.
func TestUnreadableNodeIsNotHealthy(t *testing.T) {
	n := newNode(t)
	n.deps.Host.NewClient = func(*rest.Config) (kubernetes.Interface, error) { return nil, errors.New("no client") }
	r := verdictOf(t, n)
	if r.Verdict.Healthy || r.Verdict.CheckID != "node.conditions" {
		t.Errorf("verdict %+v: the Node was never read", r.Verdict)
	}
}

// What systemd says of the kubelet unit, and the running kubelet's own command line: a
// kubelet started without the join's flags (its drop-in gone) is the verdict even though it
// runs and answers /healthz; a disabled unit is a warning; a failed unit says how it failed;
// a stopped (wedged) kubelet process is named as such.
func TestKubeletUnitAsSystemdSeesIt(t *testing.T) {
	const pid = "4242"
	running := "ActiveState=active\nSubState=running\nResult=success\nMainPID=" + pid + "\nNRestarts=0\n"
	withFlags := "/usr/bin/kubelet\x00--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf\x00--kubeconfig=/etc/kubernetes/kubelet.conf\x00--config=/var/lib/kubelet/config.yaml\x00"

	t.Run("drop-in removed", func(t *testing.T) {
		n := newNode(t)
		n.runner.show = running + "UnitFileState=enabled\nDropInPaths=\n"
		n.write(t, "/proc/"+pid+"/cmdline", "/usr/bin/kubelet\x00")
		r := verdictOf(t, n)
		if r.Verdict.CheckID != "kubelet.flags" || !strings.Contains(r.Verdict.Next, "drop-in") {
			t.Errorf("verdict %+v, want kubelet.flags naming the drop-in", r.Verdict)
		}
		if c := checkOf(t, r, "kubelet.flags"); !strings.Contains(c.Evidence, "drop-ins: none") || !strings.Contains(c.Evidence, "pid "+pid+": /usr/bin/kubelet") {
			t.Errorf("kubelet.flags evidence %q", c.Evidence)
		}
	})
	t.Run("with its drop-in, enabled", func(t *testing.T) {
		n := newNode(t)
		n.runner.show = running + "UnitFileState=enabled\nDropInPaths=/usr/lib/systemd/system/kubelet.service.d/10-kjoin.conf\n"
		n.write(t, "/proc/"+pid+"/cmdline", withFlags)
		r := verdictOf(t, n)
		if !r.Verdict.Healthy || check(r, "kubelet.flags").Status != verify.Pass || check(r, "kubelet.enabled").Status != verify.Pass {
			t.Errorf("verdict %+v, kubelet.flags %+v, kubelet.enabled %+v", r.Verdict, check(r, "kubelet.flags"), check(r, "kubelet.enabled"))
		}
	})
	t.Run("flags as separate words", func(t *testing.T) {
		n := newNode(t)
		n.runner.show = running + "UnitFileState=enabled\n"
		n.write(t, "/proc/"+pid+"/cmdline", "/usr/bin/kubelet\x00--kubeconfig\x00/etc/kubernetes/kubelet.conf\x00--config\x00/var/lib/kubelet/config.yaml\x00")
		if c := check(verdictOf(t, n), "kubelet.flags"); c.Status != verify.Pass {
			t.Errorf("kubelet.flags %+v", c)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		n := newNode(t)
		n.runner.show = running + "UnitFileState=disabled\n"
		n.write(t, "/proc/"+pid+"/cmdline", withFlags)
		r := verdictOf(t, n)
		if c := check(r, "kubelet.enabled"); c.Status != verify.Warn || !strings.Contains(c.Summary, "disabled") || !strings.Contains(c.Summary, "systemctl enable kubelet") {
			t.Errorf("kubelet.enabled %+v", c)
		}
		if !r.Verdict.Healthy {
			t.Errorf("a running kubelet whose unit is disabled is healthy now: %+v", r.Verdict)
		}
	})
	t.Run("failed unit", func(t *testing.T) {
		n := newNode(t)
		n.runner.kubeletUp = false
		n.runner.show = "ActiveState=failed\nSubState=failed\nResult=signal\nMainPID=0\nNRestarts=0\nUnitFileState=enabled\n"
		r := verdictOf(t, n)
		if r.Verdict.CheckID != "kubelet.service" || !strings.Contains(r.Verdict.Next, "systemctl enable --now kubelet") {
			t.Errorf("verdict %+v", r.Verdict)
		}
		if c := checkOf(t, r, "kubelet.service"); !strings.Contains(c.Evidence, "systemd: failed/failed, result signal") {
			t.Errorf("kubelet.service evidence %q", c.Evidence)
		}
		if c := check(r, "kubelet.flags"); c.Status != "missing" {
			t.Errorf("a stopped kubelet has no command line to judge: %+v", c)
		}
	})
	// A kubelet that exits at start (standalone, without its flags) is judged by its unit: the
	// missing drop-in is the verdict, not the crash loop it causes.
	t.Run("drop-in removed, crash looping", func(t *testing.T) {
		n := newNode(t)
		unhealthy(t, n)
		n.runner.kubeletUp = false
		n.runner.log = crashLog
		n.runner.show = "NRestarts=5\nActiveState=activating\nSubState=auto-restart\nExecMainStatus=1\nMainPID=0\nUnitFileState=enabled\nDropInPaths=\n" +
			"ExecStart={ path=/usr/bin/kubelet ; argv[]=/usr/bin/kubelet ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\nEnvironment=\n"
		r := verdictOf(t, n)
		if r.Verdict.CheckID != "kubelet.flags" {
			t.Errorf("verdict %+v, want kubelet.flags", r.Verdict)
		}
		if c := checkOf(t, r, "kubelet.flags"); !strings.Contains(c.Evidence, "unit: ExecStart /usr/bin/kubelet;") {
			t.Errorf("kubelet.flags evidence %q", c.Evidence)
		}
	})
	t.Run("stopped, the drop-in in place", func(t *testing.T) {
		n := newNode(t)
		n.runner.kubeletUp = false
		n.runner.show = "ActiveState=inactive\nSubState=dead\nResult=success\nMainPID=0\nUnitFileState=enabled\n" +
			"ExecStart={ path=/usr/bin/kubelet ; argv[]=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS ; ignore_errors=no }\n" +
			`Environment=KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf\x20--kubeconfig=/etc/kubernetes/kubelet.conf KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml` + "\n"
		r := verdictOf(t, n)
		if r.Verdict.CheckID != "kubelet.service" || check(r, "kubelet.flags").Status != verify.Pass {
			t.Errorf("verdict %+v, kubelet.flags %+v", r.Verdict, check(r, "kubelet.flags"))
		}
	})
	// Old crash lines in the journal (a loop fixed earlier) do not make a loop of a unit that
	// systemd says failed for good, or of a running kubelet that is wedged.
	t.Run("failed for good after an old crash loop", func(t *testing.T) {
		n := newNode(t)
		unhealthy(t, n)
		n.runner.kubeletUp = false
		n.runner.log = crashLog
		n.runner.show = "ActiveState=failed\nSubState=failed\nResult=signal\nNRestarts=2\nExecMainStatus=9\nMainPID=0\n"
		if r := verdictOf(t, n); r.Verdict.CheckID != "kubelet.service" || check(r, "kubelet.crashloop").Status != verify.Pass {
			t.Errorf("verdict %+v, crash loop %+v", r.Verdict, check(r, "kubelet.crashloop"))
		}
	})
	t.Run("given up by systemd", func(t *testing.T) {
		n := newNode(t)
		unhealthy(t, n)
		n.runner.kubeletUp = false
		n.runner.log = crashLog
		n.runner.show = "ActiveState=failed\nSubState=failed\nResult=start-limit-hit\nNRestarts=5\nExecMainStatus=1\nMainPID=0\n"
		if r := verdictOf(t, n); r.Verdict.CheckID != "kubelet.crashloop" {
			t.Errorf("verdict %+v, want the crash loop systemd gave up on", r.Verdict)
		}
	})
	t.Run("wedged after an old crash loop", func(t *testing.T) {
		n := newNode(t)
		unhealthy(t, n)
		n.runner.log = crashLog
		n.runner.show = running + "NRestarts=2\nUnitFileState=enabled\n"
		n.write(t, "/proc/"+pid+"/cmdline", withFlags)
		if r := verdictOf(t, n); r.Verdict.CheckID != "kubelet.healthz" || check(r, "kubelet.crashloop").Status != verify.Pass {
			t.Errorf("verdict %+v, crash loop %+v", r.Verdict, check(r, "kubelet.crashloop"))
		}
	})
	t.Run("wedged", func(t *testing.T) {
		n := newNode(t)
		unhealthy(t, n)
		n.runner.show = running + "UnitFileState=enabled\n"
		n.write(t, "/proc/"+pid+"/cmdline", withFlags)
		n.write(t, "/proc/"+pid+"/stat", pid+" (kubelet) T 1 4242 4242 0 -1")
		r := verdictOf(t, n)
		if c := checkOf(t, r, "kubelet.healthz"); c.Status != verify.Fail || !strings.Contains(c.Evidence, "is stopped (state T)") {
			t.Errorf("kubelet.healthz %+v", c)
		}
	})
}
