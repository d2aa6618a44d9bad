package joinconfig

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"kjoin.dev/kjoin/phases"
	"kjoin.dev/kjoin/workflow"
)

// --apiserver-bind-port takes 1 and 65535 and refuses 0 and 65536.
func TestBindPortBounds(t *testing.T) {
	for port, ok := range map[int]bool{1: true, 65535: true, 0: false, 65536: false} {
		f := base()
		f.ControlPlane, f.CertificateKey, f.BindPort = true, goodKey, port
		if _, err := resolve(t, f, nil); (err == nil) != ok {
			t.Errorf("--apiserver-bind-port %d: %v", port, err)
		}
	}
}

// --ignore-preflight-errors=all alone is fine; "all" beside another name is refused.
func TestIgnoreAllAlone(t *testing.T) {
	f := base()
	f.IgnorePreflightErrors = []string{"all"}
	if _, err := resolve(t, f, nil); err != nil {
		t.Errorf("all alone: %v", err)
	}
	f.IgnorePreflightErrors = []string{"all", "Swap"}
	if _, err := resolve(t, f, nil); err == nil {
		t.Error("all beside Swap was accepted")
	}
}

// Without --wait-ready, a join waits 15 s for Ready before it warns (what --help says).
func TestReadyGraceIsFifteenSeconds(t *testing.T) {
	res, err := resolve(t, base(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Options.ReadyGrace != 15*time.Second {
		t.Errorf("ReadyGrace %s", res.Options.ReadyGrace)
	}
}

// resolveStdin resolves f with stdin as standard input (nil: the process has none).
func resolveStdin(t *testing.T, f Flags, stdin io.Reader) (*Result, error) {
	t.Helper()
	return Resolve(f, Sources{Stdin: stdin, Getenv: func(string) string { return "" }}, workflow.Names(phases.Join))
}

// Secrets on standard input: blank lines and spaces around them are dropped, the token comes
// first and the certificate key second when both are read from '-'; the key alone is stdin's
// first line; a missing second line is no key.
func TestSecretsFromStandardInput(t *testing.T) {
	cp := func() Flags {
		f := base()
		f.Token, f.TokenFile, f.CertificateKeyFile, f.ControlPlane = "", "-", "-", true
		return f
	}
	res, err := resolveStdin(t, cp(), strings.NewReader("\n  "+goodToken+"  \n\n\t"+goodKey+"\n"))
	if err != nil {
		t.Fatalf("token and key on stdin: %v", err)
	}
	if res.Options.DiscoveryToken == nil || res.Options.DiscoveryToken.ID != "abcdef" || res.Options.CertificateKey != goodKey {
		t.Errorf("token %+v key %q", res.Options.DiscoveryToken, res.Options.CertificateKey)
	}

	f := base()
	f.CertificateKeyFile, f.ControlPlane = "-", true // the token from --token
	res, err = resolveStdin(t, f, strings.NewReader(goodKey+"\n"))
	if err != nil || res.Options.CertificateKey != goodKey {
		t.Fatalf("key alone on stdin: %v key %q", err, res.Options.CertificateKey)
	}

	// (a control plane may join without a key: its certificates are then placed by hand)
	if res, err := resolveStdin(t, cp(), strings.NewReader(goodToken+"\n")); err != nil || res.Options.CertificateKey != "" {
		t.Errorf("stdin without a key line: %v", err)
	}
}

// No standard input, or one that fails to read, is a bad --token-file - or
// --certificate-key-file -, named with the reason.
func TestStandardInputMissingOrFailing(t *testing.T) {
	tok := base()
	tok.Token, tok.TokenFile = "", "-"
	key := base()
	key.CertificateKeyFile, key.ControlPlane = "-", true
	for name, in := range map[string]io.Reader{"none": nil, "failing": iotest.ErrReader(errors.New("read /dev/stdin: input/output error"))} {
		for flag, f := range map[string]Flags{"--token-file": tok, "--certificate-key-file": key} {
			_, err := resolveStdin(t, f, in)
			if err == nil || !strings.Contains(err.Error(), flag+` "-"`) {
				t.Errorf("%s stdin, %s -: %v", name, flag, err)
				continue
			}
			want := map[string]string{"none": "no standard input", "failing": "input/output error"}[name]
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s stdin, %s -: %v does not say %q", name, flag, err, want)
			}
		}
	}
}

// --certificate-key beside --certificate-key-file is refused: the key is given one way.
func TestCertificateKeyGivenTwoWays(t *testing.T) {
	f := base()
	f.ControlPlane, f.CertificateKey = true, goodKey
	f.CertificateKeyFile = writeFile(t, t.TempDir(), "key", goodKey, 0o600)
	if _, err := resolve(t, f, nil); err == nil || !strings.Contains(err.Error(), "not together with --certificate-key-file") {
		t.Errorf("both ways: %v", err)
	}
	f.CertificateKey = ""
	if res, err := resolve(t, f, nil); err != nil || res.Options.CertificateKey != goodKey {
		t.Errorf("the file alone: %v", err)
	}
}

// Control-plane flags on a worker join draw kubeadm's warning; on a control-plane join they
// do not.
func TestControlPlaneFlagsOnAWorkerWarn(t *testing.T) {
	const want = "--control-plane is also required"
	f := base()
	f.AdvertiseAddress = "10.0.0.5"
	res, err := resolve(t, f, nil)
	if err != nil || !strings.Contains(strings.Join(res.Warnings, "\n"), want) {
		t.Errorf("worker: %v %q", err, res.Warnings)
	}
	f.ControlPlane, f.CertificateKey = true, goodKey
	res, err = resolve(t, f, nil)
	if err != nil || strings.Contains(strings.Join(res.Warnings, "\n"), want) {
		t.Errorf("control plane: %v %q", err, res.Warnings)
	}
}

// A world-readable --config warns for each secret it may hold (the TLS bootstrap token, the
// certificate key) and not when it holds none.
func TestWorldReadableConfigEachSecret(t *testing.T) {
	dir := t.TempDir()
	kc := writeFile(t, dir, "discovery.conf", "apiVersion: v1\nkind: Config\n", 0o600)
	head := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  file:\n    kubeConfigPath: " + kc + "\n"
	for name, c := range map[string]struct {
		body string
		warn bool
	}{
		"tls bootstrap token":   {"  tlsBootstrapToken: " + goodToken + "\n", true},
		"certificate key":       {"controlPlane:\n  certificateKey: " + goodKey + "\n", true},
		"control plane, no key": {"controlPlane:\n  localAPIEndpoint:\n    advertiseAddress: 10.0.0.5\n", false},
		"nothing":               {"", false},
	} {
		p := writeFile(t, dir, strings.ReplaceAll(name, " ", "-")+".yaml", head+c.body, 0o644)
		res, _ := resolve(t, Flags{ConfigPath: p, Output: "text", Wait: "true", WaitReadyTimeout: time.Minute}, nil)
		if res == nil {
			t.Fatalf("%s: no result", name)
		}
		got := strings.Contains(strings.Join(res.Warnings, "\n"), "holds a token or certificate key")
		if got != c.warn {
			t.Errorf("%s: warned %v, want %v: %q", name, got, c.warn, res.Warnings)
		}
	}
}

// A certificate key in --config and --certificate-key-file together is refused; a file
// discovery without its path is named.
func TestConfigCertificateKeyTwiceAndEmptyDiscoveryFile(t *testing.T) {
	dir := t.TempDir()
	keyFile := writeFile(t, dir, "key", goodKey, 0o600)
	p := writeFile(t, dir, "cp.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: "+goodToken+"\n    caCertHashes: ["+goodPin+"]\ncontrolPlane:\n  certificateKey: "+goodKey+"\n", 0o600)
	f := Flags{ConfigPath: p, CertificateKeyFile: keyFile, Output: "text", Wait: "true", WaitReadyTimeout: time.Minute}
	if _, err := resolve(t, f, nil); err == nil || !strings.Contains(err.Error(), "not together with controlPlane.certificateKey") {
		t.Errorf("key twice: %v", err)
	}
	p = writeFile(t, dir, "file.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  file:\n    kubeConfigPath: \"\"\n  tlsBootstrapToken: "+goodToken+"\n", 0o600)
	if _, err := resolve(t, Flags{ConfigPath: p, Output: "text", Wait: "true", WaitReadyTimeout: time.Minute}, nil); err == nil || !strings.Contains(err.Error(), "discovery.file.kubeConfigPath: missing") {
		t.Errorf("empty kubeConfigPath: %v", err)
	}
}

// The config's skipPhases apply unless --skip-phases is given, which replaces them.
func TestConfigSkipPhasesAndTheFlag(t *testing.T) {
	p := writeFile(t, t.TempDir(), "c.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: "+goodToken+"\n    caCertHashes: ["+goodPin+"]\nskipPhases: [preflight]\n", 0o600)
	f := Flags{ConfigPath: p, Output: "text", Wait: "true", WaitReadyTimeout: time.Minute}
	res, err := resolve(t, f, nil)
	if err != nil || !slices.Equal(res.SkipPhases, []string{"preflight"}) {
		t.Errorf("config only: %v %q", err, res.SkipPhases)
	}
	f.SkipPhases = []string{"wait-ready"}
	res, err = resolve(t, f, nil)
	if err != nil || !slices.Equal(res.SkipPhases, []string{"wait-ready"}) {
		t.Errorf("flag given: %v %q", err, res.SkipPhases)
	}
}

// A kubeadm phase name that maps to kjoin phases says so, with its note.
func TestKubeadmPhaseNameWarningCarriesItsNote(t *testing.T) {
	f := base()
	f.SkipPhases = []string{"control-plane-prepare/control-plane"}
	f.ControlPlane, f.CertificateKey = true, goodKey
	res, err := resolve(t, f, nil)
	w := strings.Join(res.Warnings, "\n")
	if err != nil || !strings.Contains(w, "skipping kjoin's control-plane-start (kjoin writes the API server") {
		t.Errorf("%v %q", err, res.Warnings)
	}
}

// A bad token is echoed by its id when the id is at most 8 characters, else by its length.
func TestRedactToken(t *testing.T) {
	for in, want := range map[string]string{
		"abcdefgh.secret": "abcdefgh.<hidden>", "abcdefghi.secret": "<hidden, 16 characters>", "nodot": "<hidden, 5 characters>",
	} {
		if got := redactToken(in); got != want {
			t.Errorf("redactToken(%q) = %q, want %q", in, got, want)
		}
	}
}
