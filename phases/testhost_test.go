package phases

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/discovery/discoverytest"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/token"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

const testToken = "abcdef.0123456789abcdef"

const clusterKubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
cgroupDriver: cgroupfs
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
rotateCertificates: true
staticPodPath: /etc/kubernetes/manifests
`

// fakeRunner records commands; "systemctl restart kubelet" plays the kubelet: it registers
// the Node (Ready) and its Lease in the fake cluster.
type fakeRunner struct {
	mu     sync.Mutex
	calls  []string
	client *fake.Clientset
	node   string
	active bool // the kubelet runs
	// enabled: the kubelet unit is enabled (systemctl is-enabled).
	enabled bool
	// kubeletVersion is what kubelet --version answers (default v1.37.2).
	kubeletVersion string
	// approver: kjoin-approver.service is installed (nil: not installed), and its state.
	approver *unitState
}

// unitState is a systemd unit as the fake runner answers for it.
type unitState struct{ enabled, active bool }

func (f *fakeRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cmd := strings.Join(append([]string{name}, args...), " ")
	f.calls = append(f.calls, cmd)
	if cmd == "systemctl is-active --quiet kubelet" && f.active {
		return nil, nil
	}
	if u, ok := strings.CutPrefix(cmd, "systemctl "); ok && strings.Contains(u, ApproverUnit) {
		return nil, f.approverCommand(strings.Fields(u)[0])
	}
	if strings.HasPrefix(cmd, "systemctl is-active") {
		return nil, os.ErrNotExist
	}
	switch cmd {
	case "systemctl is-enabled --quiet kubelet":
		if !f.enabled {
			return nil, os.ErrNotExist
		}
	case "systemctl enable kubelet":
		f.enabled = true
	case "systemctl disable kubelet":
		f.enabled = false
	}
	if cmd == "kubelet --version" {
		v := f.kubeletVersion
		if v == "" {
			v = "v1.37.2"
		}
		return []byte("Kubernetes " + v + "\n"), nil
	}
	if cmd == "systemctl stop kubelet" {
		f.active = false
	}
	if cmd == "systemctl restart kubelet" {
		f.active = true
		now := metav1.NewMicroTime(time.Now())
		_, _ = f.client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: f.node},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		}, metav1.CreateOptions{})
		_, _ = f.client.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: f.node, Namespace: "kube-node-lease"},
			Spec:       coordinationv1.LeaseSpec{RenewTime: &now},
		}, metav1.CreateOptions{})
	}
	return nil, nil
}

// approverCommand plays systemd for kjoin-approver.service.
func (f *fakeRunner) approverCommand(verb string) error {
	u := f.approver
	if u == nil {
		return os.ErrNotExist // no such unit
	}
	switch verb {
	case "is-enabled":
		if !u.enabled {
			return os.ErrNotExist
		}
	case "is-active":
		if !u.active {
			return os.ErrNotExist
		}
	case "enable":
		u.enabled = true
	case "disable":
		u.enabled = false
	case "start":
		u.active = true
	case "stop":
		u.active = false
	}
	return nil
}

type testHost struct {
	env    *host.Env
	client *fake.Clientset
	runner *fakeRunner
	server *discoverytest.Server
	out    *bytes.Buffer
	root   string
	// sign plays the controller-manager for each created CSR (default: approve and sign).
	sign func(*certificatesv1.CertificateSigningRequest) error
}

func newTestHost(t *testing.T, objs ...runtime.Object) *testHost {
	t.Helper()
	root := t.TempDir()
	for p, content := range map[string]string{host.ProcIPForward: "1\n", "/var/run/containerd/containerd.sock": ""} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-config", Namespace: "kube-system"}, Data: map[string]string{"kubelet": clusterKubeletConfig}})
	client := fake.NewClientset(objs...)
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2", Major: "1", Minor: "37"}
	h := &testHost{client: client, runner: &fakeRunner{client: client, node: "w1"}, out: &bytes.Buffer{}, root: root}
	h.server = discoverytest.New(t, "https://cp.example:6443", testToken)
	csrCount := 0
	client.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		csrCount++
		if csr.Name == "" {
			csr.Name = csr.GenerateName + "x" + strconv.Itoa(csrCount)
		}
		if err := h.sign(csr); err != nil {
			return true, nil, err
		}
		return false, csr, nil
	})
	h.sign = func(csr *certificatesv1.CertificateSigningRequest) error {
		cert, err := h.server.SignCSR(csr.Spec.Request)
		if err != nil {
			return err
		}
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
		csr.Status.Certificate = cert
		return nil
	}
	h.env = &host.Env{
		Paths: host.Paths{Root: root}, Out: h.out, Clock: newAutoClock(), Exec: h.runner,
		NewClient:       func(*rest.Config) (kubernetes.Interface, error) { return client, nil },
		Hostname:        func() (string, error) { return "w1", nil },
		Geteuid:         func() int { return 0 },
		PortInUse:       func(int) bool { return false },
		SocketReachable: func(string) bool { return true },
	}
	return h
}

func (h *testHost) options(t *testing.T) joinrequest.Options {
	t.Helper()
	tok, _ := token.Parse(testToken)
	pins, err := discovery.ParsePins([]string{h.server.Pin})
	if err != nil {
		t.Fatal(err)
	}
	o := joinrequest.Options{
		Endpoint: h.server.Endpoint(), DiscoveryToken: &tok, TLSBootstrapToken: &tok, Pins: pins,
		Timeouts: joinrequest.DefaultTimeouts(), Wait: true, ReadyGrace: time.Second, IgnorePreflight: map[string]bool{},
	}
	if err := Defaults(h.env, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestJoinWorkerWritesKubeadmLayout(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t)}
	results, err := Run(context.Background(), h.env, s, Join, RunOptions{})
	if err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	if len(results) != len(Join) {
		t.Errorf("ran %d phases, want %d", len(results), len(Join))
	}
	modes := map[string]os.FileMode{
		host.CACertPath: 0o644, host.KubeletKubeconfig: 0o600, host.KubeletConfigPath: 0o644, host.KubeletInstancePath: 0o644, host.KubeletFlagsPath: 0o644,
	}
	for p, mode := range modes {
		st, err := os.Stat(h.env.Paths.Of(p))
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: %v, mode %v, want %v", p, err, st.Mode().Perm(), mode)
		}
	}
	target, err := os.Readlink(h.env.Paths.Of(host.KubeletClientCurrent))
	if err != nil || !strings.HasPrefix(target, "/var/lib/kubelet/pki/kubelet-client-") || target != s.ClientCertPath {
		t.Errorf("current.pem -> %q (%v), client cert %q", target, err, s.ClientCertPath)
	}
	if st, err := os.Stat(h.env.Paths.Of(target)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("client pem: %v %v", st, err)
	}
	pemData, _ := os.ReadFile(h.env.Paths.Of(target))
	if !strings.Contains(string(pemData), "CERTIFICATE") || !strings.Contains(string(pemData), "EC PRIVATE KEY") {
		t.Errorf("client pem lacks cert or key:\n%s", pemData)
	}
	for _, f := range []struct{ golden, path string }{
		{"config.yaml.golden", host.KubeletConfigPath}, {"instance-config.yaml.golden", host.KubeletInstancePath},
		{"kubeadm-flags.env.golden", host.KubeletFlagsPath}, {"kubelet.conf.golden", host.KubeletKubeconfig},
	} {
		b, _ := os.ReadFile(h.env.Paths.Of(f.path))
		if f.path == host.KubeletKubeconfig {
			b = bytes.ReplaceAll(b, []byte(strings.TrimSpace(b64(h.server.CAPEM))), []byte("CA-DATA"))
		}
		golden(t, f.golden, b)
	}
	want := []string{"kubelet --version", "systemctl is-active --quiet systemd-resolved", "systemctl daemon-reload", "systemctl is-enabled --quiet kubelet", "systemctl enable kubelet", "systemctl restart kubelet"}
	if strings.Join(h.runner.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(h.runner.calls, "\n"), strings.Join(want, "\n"))
	}
	if !s.Ready || !strings.HasPrefix(s.CSRName, "kjoin-w1-") || !s.Changed() {
		t.Errorf("state: ready=%v csr=%q changed=%v", s.Ready, s.CSRName, s.Changed())
	}
	if h.server.CredentialSeen.Load() {
		t.Error("discovery sent a credential")
	}
	if strings.Contains(h.out.String(), "0123456789abcdef") {
		t.Errorf("progress output leaks the token secret:\n%s", h.out)
	}
}

func assertNothingWritten(t *testing.T, h *testHost) {
	t.Helper()
	for _, dir := range []string{host.KubernetesDir, host.KubeletDir, "/var/lib/kjoin"} {
		if entries, err := os.ReadDir(h.env.Paths.Of(dir)); err == nil && len(entries) > 0 {
			t.Errorf("%s was written: %v", dir, entries)
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// runPhase runs one join phase as the runner does: with the run's effects (planned in a dry
// run, applied with the journal first otherwise).
func runPhase(p Phase, e *host.Env, s *State) error {
	return p.Run(context.Background(), s.effects(e, s.Opts.DryRun, s.journalFirst), s)
}

// runResetPhase runs one reset phase as the reset's runner does.
func runResetPhase(p ResetPhase, e *host.Env, s *ResetState) error {
	return p.Run(context.Background(), s.effects(e, s.Opts.DryRun, nil), s)
}
