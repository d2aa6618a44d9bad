package joinconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/phases"
	"kjoin.dev/kjoin/workflow"
)

const (
	goodPin   = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	goodToken = "abcdef.0123456789abcdef"
	goodKey   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// base is a valid worker join; each case changes one thing.
func base() Flags {
	return Flags{Endpoint: "10.0.0.1:6443", Token: goodToken, CACertHashes: []string{goodPin}, BindPort: 6443,
		Output: "text", Wait: "true", WaitReadyTimeout: 4 * time.Minute}
}

func resolve(t *testing.T, f Flags, env map[string]string) (*Result, error) {
	t.Helper()
	return Resolve(f, Sources{Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }}, workflow.Names(phases.Join))
}

func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidJoinResolves(t *testing.T) {
	res, err := resolve(t, base(), nil)
	if err != nil {
		t.Fatal(err)
	}
	o := res.Options
	if o.Endpoint != "10.0.0.1:6443" || o.DiscoveryToken == nil || o.TLSBootstrapToken == nil || !o.Pins[goodPin] {
		t.Errorf("options %+v", o)
	}
}

func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	notDir := writeFile(t, dir, "file", "x", 0o600)
	badPatches := filepath.Join(dir, "patches")
	if err := os.Mkdir(badPatches, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, badPatches, "kube-proxy.yaml", "a: 1\n", 0o644)
	cfgDir := t.TempDir()
	config := func(body string) string {
		return writeFile(t, cfgDir, strings.ReplaceAll(t.Name(), "/", "_")+".yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n"+body, 0o600)
	}
	cp := func(f Flags) Flags { f.ControlPlane = true; return f }

	cases := []struct {
		name  string
		edit  func(*Flags)
		env   map[string]string
		names []string // what the message must name
	}{
		{"port out of range", func(f *Flags) { f.Endpoint = "10.0.0.1:99999" }, nil, []string{"api-server-endpoint", "10.0.0.1:99999"}},
		{"port zero", func(f *Flags) { f.Endpoint = "10.0.0.1:0" }, nil, []string{"10.0.0.1:0"}},
		{"port not a number", func(f *Flags) { f.Endpoint = "10.0.0.1:https" }, nil, []string{"10.0.0.1:https"}},
		{"negative port", func(f *Flags) { f.Endpoint = "10.0.0.1:-1" }, nil, []string{"10.0.0.1:-1"}},
		{"empty host", func(f *Flags) { f.Endpoint = ":6443" }, nil, []string{`":6443"`}},
		{"no port", func(f *Flags) { f.Endpoint = "10.0.0.1" }, nil, []string{`"10.0.0.1"`, "host:port"}},
		{"IPv6 without brackets", func(f *Flags) { f.Endpoint = "fd00::1:6443" }, nil, []string{"fd00::1:6443"}},
		{"URL instead of endpoint", func(f *Flags) { f.Endpoint = "https://10.0.0.1:6443" }, nil, []string{"https://10.0.0.1:6443"}},
		{"space in host", func(f *Flags) { f.Endpoint = "a b:6443" }, nil, []string{"a b:6443"}},
		{"no endpoint", func(f *Flags) { f.Endpoint = "" }, nil, []string{"api-server-endpoint argument: missing"}},
		{"malformed token", func(f *Flags) { f.Token = "nope" }, nil, []string{"--token", "bootstrap token"}},
		{"upper-case token", func(f *Flags) { f.Token = "ABCDEF.0123456789ABCDEF" }, nil, []string{"--token", "ABCDEF.<hidden>"}},
		{"short secret", func(f *Flags) { f.Token = "abcdef.0123" }, nil, []string{"abcdef.<hidden>"}},
		{"no token", func(f *Flags) { f.Token = "" }, nil, []string{"--token: missing"}},
		{"bad env token", func(f *Flags) { f.Token = "" }, map[string]string{TokenEnv: "x.y"}, []string{TokenEnv}},
		{"bad discovery token", func(f *Flags) { f.Token = ""; f.DiscoveryToken = "bad" }, nil, []string{"--discovery-token"}},
		{"bad tls bootstrap token", func(f *Flags) { f.TLSBootstrapToken = "bad.token" }, nil, []string{"--tls-bootstrap-token"}},
		{"token and token file", func(f *Flags) { f.TokenFile = notDir }, nil, []string{"--token", "--token-file"}},
		{"missing token file", func(f *Flags) { f.Token = ""; f.TokenFile = filepath.Join(dir, "nope") }, nil, []string{"--token-file", "nope"}},
		{"no pin", func(f *Flags) { f.CACertHashes = nil }, nil, []string{"--discovery-token-ca-cert-hash: missing"}},
		{"short pin", func(f *Flags) { f.CACertHashes = []string{"sha256:abc"} }, nil, []string{"--discovery-token-ca-cert-hash", "sha256:abc"}},
		{"md5 pin", func(f *Flags) { f.CACertHashes = []string{"md5:" + strings.Repeat("a", 64)} }, nil, []string{"md5:"}},
		{"pin without format", func(f *Flags) { f.CACertHashes = []string{strings.Repeat("a", 64)} }, nil, []string{"--discovery-token-ca-cert-hash", "<hidden: 64 hex digits>"}},
		{"certificate key as a pin", func(f *Flags) { f.CACertHashes = []string{goodKey} }, nil, []string{"--discovery-token-ca-cert-hash", "<hidden: 64 hex digits>"}},
		{"token as the endpoint", func(f *Flags) { f.Endpoint = goodToken }, nil, []string{"api-server-endpoint", "abcdef.<hidden>"}},
		{"token as a pin", func(f *Flags) { f.CACertHashes = []string{goodToken} }, nil, []string{"--discovery-token-ca-cert-hash", "abcdef.<hidden>"}},
		{"taint value smuggles a flag", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("nodeRegistration:\n  taints: [{key: a, value: \"a=b --authorization-mode=AlwaysAllow\", effect: NoSchedule}]\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + goodToken + "\n    caCertHashes: [" + goodPin + "]\n")}
		}, nil, []string{"nodeRegistration.taints", "taint value"}},
		{"kubelet extra arg value smuggles a flag", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("nodeRegistration:\n  kubeletExtraArgs: [{name: node-labels, value: \"a=b --authorization-mode=AlwaysAllow\"}]\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + goodToken + "\n    caCertHashes: [" + goodPin + "]\n")}
		}, nil, []string{"kubeletExtraArgs value of node-labels", "without whitespace"}},
		{"kubelet extra arg value with a newline", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("nodeRegistration:\n  kubeletExtraArgs: [{name: v, value: \"2\\nKUBELET_X=1\"}]\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + goodToken + "\n    caCertHashes: [" + goodPin + "]\n")}
		}, nil, []string{"kubeletExtraArgs value of v", `\n`}},
		{"kubelet extra arg name smuggles a flag", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("nodeRegistration:\n  kubeletExtraArgs: [{name: \"v=2 --authorization-mode\", value: AlwaysAllow}]\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + goodToken + "\n    caCertHashes: [" + goodPin + "]\n")}
		}, nil, []string{"kubeletExtraArgs name", "kubelet flag name"}},
		{"pin not hex", func(f *Flags) { f.CACertHashes = []string{"sha256:" + strings.Repeat("z", 64)} }, nil, []string{"zzzz"}},
		{"second pin bad", func(f *Flags) { f.CACertHashes = []string{goodPin, "sha256:00"} }, nil, []string{"sha256:00"}},
		{"node name upper case", func(f *Flags) { f.NodeName = "Worker_1" }, nil, []string{"--node-name", "Worker_1"}},
		{"node name too long", func(f *Flags) { f.NodeName = strings.Repeat("a", 254) }, nil, []string{"--node-name"}},
		{"cri socket relative", func(f *Flags) { f.CRISocket = "containerd.sock" }, nil, []string{"--cri-socket", "containerd.sock"}},
		{"cri socket tcp", func(f *Flags) { f.CRISocket = "tcp://10.0.0.1:1234" }, nil, []string{"--cri-socket", "tcp://"}},
		{"bad output", func(f *Flags) { f.Output, f.OutputError = "xml", "json, yaml, jsonpath or go-template" }, nil, []string{"--output", "xml", "jsonpath"}},
		{"negative verbosity", func(f *Flags) { f.Verbosity = -1 }, nil, []string{"--v"}},
		{"zero wait timeout", func(f *Flags) { f.WaitReadyTimeout = 0 }, nil, []string{"--wait-ready-timeout"}},
		{"unknown skip phase", func(f *Flags) { f.SkipPhases = []string{"kubelet-strat"} }, nil, []string{"--skip-phases", "kubelet-strat"}},
		{"ignore all and more", func(f *Flags) { f.IgnorePreflightErrors = []string{"all", "Swap"} }, nil, []string{"--ignore-preflight-errors"}},
		{"patches missing", func(f *Flags) { f.Patches = filepath.Join(dir, "none") }, nil, []string{"--patches", "none"}},
		{"patches is a file", func(f *Flags) { f.Patches = notDir }, nil, []string{"--patches"}},
		{"patches unknown target", func(f *Flags) { f.Patches = badPatches }, nil, []string{"--patches", "kube-proxy.yaml"}},
		{"discovery file over http", func(f *Flags) { f.Endpoint = ""; f.DiscoveryFile = "http://10.0.0.1/x" }, nil, []string{"--discovery-file", "http://"}},
		{"discovery file missing", func(f *Flags) { f.Endpoint = ""; f.DiscoveryFile = filepath.Join(dir, "kc") }, nil, []string{"--discovery-file"}},
		{"discovery file and endpoint", func(f *Flags) { f.DiscoveryFile = notDir }, nil, []string{"--discovery-file", "not both"}},
		{"certificate key short", func(f *Flags) { *f = cp(*f); f.CertificateKey = "abc" }, nil, []string{"--certificate-key", "64 hex"}},
		{"certificate key not hex", func(f *Flags) { *f = cp(*f); f.CertificateKey = strings.Repeat("g", 64) }, nil, []string{"--certificate-key"}},
		{"certificate key from env", func(f *Flags) { *f = cp(*f) }, map[string]string{CertificateKeyEnv: "nothex"}, []string{CertificateKeyEnv}},
		{"bind port zero", func(f *Flags) { *f = cp(*f); f.BindPort = 0 }, nil, []string{"--apiserver-bind-port", `"0"`}},
		{"bind port 70000", func(f *Flags) { *f = cp(*f); f.BindPort = 70000 }, nil, []string{"--apiserver-bind-port", "70000"}},
		{"advertise not an IP", func(f *Flags) { *f = cp(*f); f.AdvertiseAddress = "cp2.example" }, nil, []string{"--apiserver-advertise-address", "cp2.example"}},
		{"advertise unspecified", func(f *Flags) { *f = cp(*f); f.AdvertiseAddress = "0.0.0.0" }, nil, []string{"0.0.0.0"}},
		{"config missing", func(f *Flags) { *f = Flags{ConfigPath: filepath.Join(dir, "none.yaml"), Output: "text"} }, nil, []string{"--config", "none.yaml"}},
		{"config unknown field", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("discovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + goodToken + "\n    caCertHashs: [" + goodPin + "]\n")}
		}, nil, []string{"caCertHashs"}},
		{"config misspelled top-level", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("nodeRegistraton:\n  name: x\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + goodToken + "\n    unsafeSkipCAVerification: true\n")}
		}, nil, []string{"nodeRegistraton"}},
		{"config old version", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: writeFile(t, cfgDir, "old.yaml", "apiVersion: kubeadm.k8s.io/v1beta2\nkind: JoinConfiguration\n", 0o600)}
		}, nil, []string{"v1beta2"}},
		{"config no discovery", func(f *Flags) { *f = Flags{Output: "text", ConfigPath: config("nodeRegistration:\n  name: x\n")} }, nil, []string{"JoinConfiguration discovery"}},
		{"config bad endpoint", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("discovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:70000\n    token: " + goodToken + "\n    caCertHashes: [" + goodPin + "]\n")}
		}, nil, []string{"discovery.bootstrapToken.apiServerEndpoint", "10.0.0.1:70000"}},
		{"config bad taint", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("nodeRegistration:\n  taints: [{key: a, effect: Sometimes}]\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + goodToken + "\n    caCertHashes: [" + goodPin + "]\n")}
		}, nil, []string{"nodeRegistration.taints", "Sometimes"}},
		{"config zero timeout", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("timeouts:\n  discovery: 0s\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + goodToken + "\n    caCertHashes: [" + goodPin + "]\n")}
		}, nil, []string{"timeouts.discovery"}},
		{"config bad bind port", func(f *Flags) {
			*f = Flags{Output: "text", ConfigPath: config("controlPlane:\n  localAPIEndpoint: {bindPort: 99999}\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + goodToken + "\n    caCertHashes: [" + goodPin + "]\n")}
		}, nil, []string{"controlPlane.localAPIEndpoint.bindPort", "99999"}},
		{"wait unknown", func(f *Flags) { f.Wait = "sometimes" }, nil, []string{"--wait", "sometimes", "kubelet"}},
		{"wait kubelet with wait-ready", func(f *Flags) { f.Wait, f.WaitReady = "kubelet", true }, nil, []string{"--wait-ready", "--wait=kubelet"}},
		{"config mixed with --token", func(f *Flags) {
			*f = Flags{Output: "text", Token: goodToken, Changed: func(n string) bool { return n == "token" },
				ConfigPath: config("discovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    caCertHashes: [" + goodPin + "]\n")}
		}, nil, []string{"can not mix '--config'", "--token"}},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d bad inputs", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := base()
			tc.edit(&f)
			_, err := resolve(t, f, tc.env)
			if err == nil {
				t.Fatal("accepted")
			}
			if code := operr.CodeOf(err); code != operr.Usage {
				t.Errorf("exit code %d, want 2", code)
			}
			for _, n := range tc.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("error does not name %q:\n%v", n, err)
				}
			}
			for _, secret := range []string{"0123456789abcdef0123", "0123456789abcdef", "0123456789ABCDEF"} {
				if strings.Contains(err.Error(), secret) && !strings.Contains(goodKey, secret) {
					t.Errorf("error leaks a secret: %v", err)
				}
			}
		})
	}
}

// Every bad value is reported in one go, each naming its flag.
func TestAllProblemsReportedAtOnce(t *testing.T) {
	f := base()
	f.Endpoint = "10.0.0.1:99999"
	f.CACertHashes = []string{"sha256:abc"}
	f.NodeName = "BAD"
	f.ControlPlane = true
	f.CertificateKey = "short"
	f.BindPort = 0
	f.Patches = "/nonexistent/patches"
	f.Output, f.OutputError = "xml", "json, yaml, jsonpath or go-template"
	_, err := resolve(t, f, nil)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, flag := range []string{"api-server-endpoint", "--discovery-token-ca-cert-hash", "--node-name", "--certificate-key", "--apiserver-bind-port", "--patches", "--output"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("error does not name %s:\n%v", flag, err)
		}
	}
	if !strings.Contains(err.Error(), "7 invalid inputs") {
		t.Errorf("want 7 problems counted:\n%v", err)
	}
	if strings.Contains(err.Error(), "short") {
		t.Errorf("the certificate key value was printed: %v", err)
	}
}

func TestWorldReadableTokenFileWarns(t *testing.T) {
	p := writeFile(t, t.TempDir(), "tok", goodToken+"\n", 0o644)
	f := base()
	f.Token, f.TokenFile = "", p
	res, err := resolve(t, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "chmod 600") {
		t.Errorf("warnings %q", res.Warnings)
	}
}

func TestConfigFileResolves(t *testing.T) {
	p := writeFile(t, t.TempDir(), "join.yaml", `apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
caCertPath: /etc/kubernetes/pki/ca.crt
nodeRegistration:
  name: n1
  imagePullPolicy: IfNotPresent
  imagePullSerial: true
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.0.0.1:6443
    token: `+goodToken+`
    caCertHashes: [`+goodPin+`]
controlPlane:
  localAPIEndpoint: {advertiseAddress: 10.0.0.12, bindPort: 6444}
  certificateKey: `+goodKey+`
timeouts:
  discovery: 30s
  upgradeManifests: 5m0s
`, 0o600)
	res, err := resolve(t, Flags{ConfigPath: p, Output: "text", Wait: "true", WaitReadyTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := res.Options
	if !o.ControlPlane || o.BindPort != 6444 || o.AdvertiseAddress != "10.0.0.12" || o.CertificateKey != goodKey || o.Timeouts.Discovery != 30*time.Second || o.NodeName != "n1" {
		t.Errorf("options %+v", o)
	}
	// As kubeadm defaults it: without discovery.tlsBootstrapToken the discovery token also
	// bootstraps the kubelet.
	if o.TLSBootstrapToken != o.DiscoveryToken || o.TLSBootstrapToken.ID == "" {
		t.Errorf("TLS bootstrap token %q, want the discovery token %q", o.TLSBootstrapToken.ID, o.DiscoveryToken.ID)
	}
}

// v1beta3 (still read by kubeadm v1.35 and v1.36) is read with a deprecation warning naming
// it, converted as kubeadm converts it: the kubeletExtraArgs map becomes sorted name/value
// pairs, discovery.timeout becomes timeouts.discovery; an unknown field is still an error.
func TestConfigV1beta3IsConvertedWithAWarning(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "join.yaml", `apiVersion: kubeadm.k8s.io/v1beta3
kind: JoinConfiguration
nodeRegistration:
  name: n1
  kubeletExtraArgs:
    v: "2"
    node-labels: a=b
  taints:
  - {key: dedicated, value: db, effect: NoSchedule}
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.0.0.1:6443
    token: `+goodToken+`
    caCertHashes: [`+goodPin+`]
  timeout: 45s
`, 0o600)
	res, err := resolve(t, Flags{ConfigPath: p, Output: "text", Wait: "true", WaitReadyTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := res.Options
	if o.Timeouts.Discovery != 45*time.Second || o.NodeName != "n1" || len(o.Taints) != 1 || o.Taints[0].Value != "db" {
		t.Errorf("options %+v", o)
	}
	if len(o.KubeletExtraArgs) != 2 || o.KubeletExtraArgs[0].Name != "node-labels" || o.KubeletExtraArgs[1].Name != "v" || o.KubeletExtraArgs[1].Value != "2" {
		t.Errorf("kubeletExtraArgs %+v, want sorted by name", o.KubeletExtraArgs)
	}
	if w := strings.Join(res.Warnings, "\n"); !strings.Contains(w, "deprecated JoinConfiguration kubeadm.k8s.io/v1beta3") {
		t.Errorf("no deprecation warning naming v1beta3: %q", w)
	}
	bad := writeFile(t, dir, "bad.yaml", "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ntimeouts: {discovery: 1s}\n", 0o600)
	if _, err := resolve(t, Flags{ConfigPath: bad, Output: "text"}, nil); err == nil || !strings.Contains(err.Error(), "timeouts") {
		t.Errorf("v1beta3 has no timeouts field: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken: {token: abcdef.0123456789abcdef}\n"))
	f.Add([]byte("kind: ClusterConfiguration\n---\nkind: JoinConfiguration\napiVersion: kubeadm.k8s.io/v1beta4\ntimeouts: {discovery: 1s}\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\nnodeRegistration: {taints: [{key: a, effect: NoSchedule}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Decode(data, func(string) {})
	})
}

// kubeadm's join phase names in --skip-phases are mapped to kjoin's, each with a warning (a
// name both tools have, such as kubelet-start, is kjoin's own);
// ones without a counterpart skip nothing (and say so); partial sub-phases are refused.
func TestKubeadmPhaseNamesInSkipPhases(t *testing.T) {
	names := []string{"preflight", "discovery", "version-check", "control-plane-prepare", "tls-bootstrap", "kubelet-config", "kubelet-start", "etcd-join", "control-plane-start", "mark-control-plane", "wait-control-plane", "wait-ready"}
	f := Flags{Endpoint: "10.0.0.1:6443", Token: goodToken, CACertHashes: []string{goodPin}, Wait: "true", WaitReadyTimeout: time.Minute,
		SkipPhases: []string{"kubelet-start", "control-plane-join", "control-plane-join/mark-control-plane", "check-etcd", "wait-ready"}}
	res, err := Resolve(f, Sources{}, names)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.SkipPhases, ","); got != "kubelet-start,etcd-join,control-plane-start,mark-control-plane,wait-ready" {
		t.Errorf("skip phases %s", got)
	}
	if w := strings.Join(res.Warnings, "\n"); !strings.Contains(w, "control-plane-join is kubeadm's phase name; skipping kjoin's etcd-join, control-plane-start, mark-control-plane") || strings.Contains(w, "kubelet-start is kubeadm's") ||
		!strings.Contains(w, "check-etcd is kubeadm's phase name") || !strings.Contains(w, "nothing skipped") {
		t.Errorf("warnings:\n%s", w)
	}
	f.SkipPhases = []string{"control-plane-prepare/certs", "kubelet-strat"}
	_, err = Resolve(f, Sources{}, names)
	if err == nil || !strings.Contains(err.Error(), "control-plane-prepare/certs") || !strings.Contains(err.Error(), "kubelet-strat") {
		t.Fatalf("partial sub-phase and typo not both refused: %v", err)
	}
}

// A --config holding a token or a certificate key draws the same warning as a --token-file
// others can read; one without secrets does not.
func TestWorldReadableConfigWithSecretsWarns(t *testing.T) {
	dir := t.TempDir()
	withToken := writeFile(t, dir, "a.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: "+goodToken+"\n    caCertHashes: ["+goodPin+"]\n", 0o644)
	res, err := resolve(t, Flags{ConfigPath: withToken, Output: "text", Wait: "true", WaitReadyTimeout: time.Minute}, nil)
	if err != nil || !strings.Contains(strings.Join(res.Warnings, "\n"), "holds a token or certificate key and is readable by other users (mode 0644)") {
		t.Errorf("err %v warnings %q", err, res.Warnings)
	}
	if strings.Contains(strings.Join(res.Warnings, "\n"), "0123456789abcdef") {
		t.Errorf("a warning shows the secret: %q", res.Warnings)
	}
	if err := os.Chmod(withToken, 0o600); err != nil {
		t.Fatal(err)
	}
	res, _ = resolve(t, Flags{ConfigPath: withToken, Output: "text", Wait: "true", WaitReadyTimeout: time.Minute}, nil)
	for _, w := range res.Warnings {
		if strings.Contains(w, "readable by other users") {
			t.Errorf("0600 config: %q", w)
		}
	}
}
