package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/phases"
)

const pin = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func testDeps(stdin string, env map[string]string) (*Deps, *bytes.Buffer, *bytes.Buffer) {
	out, errb := &bytes.Buffer{}, &bytes.Buffer{}
	d := &Deps{
		Streams: Streams{In: strings.NewReader(stdin), Out: out, Err: errb},
		Getenv:  func(k string) string { return env[k] },
		NewEnv: func(root string, v int) *host.Env {
			e := HostEnv(root, v, errb)
			e.PeerCertificates = nil // hermetic: no kubelet is dialled
			e.Geteuid = func() int { return 0 }
			e.Hostname = func() (string, error) { return "w1", nil }
			return e
		},
	}
	return d, out, errb
}

// parse runs the join command with a capturing runF and resolves its options.
func parse(t *testing.T, deps *Deps, line string) (*JoinOptions, joinrequest.Options, error) {
	t.Helper()
	argv := strings.Fields(line)
	var got *JoinOptions
	g := newGlobals()
	cmd := NewCmdJoin(deps, g, func(o *JoinOptions) error { got = o; return nil })
	g.AddFlags(cmd.PersistentFlags())
	cmd.SetArgs(argv)
	cmd.SetOut(deps.Out)
	cmd.SetErr(deps.Err)
	if err := cmd.Execute(); err != nil {
		return nil, joinrequest.Options{}, err
	}
	res, err := got.resolve(deps)
	return got, res.Options, err
}

func TestJoinFlags(t *testing.T) {
	deps, _, _ := testDeps("", nil)
	o, po, err := parse(t, deps, "10.0.0.1:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash "+pin+" --discovery-token-ca-cert-hash "+strings.ToUpper(pin[:6])+pin[6:]+" --node-name n1 --ignore-preflight-errors Swap,Port-10250 --skip-phases wait-ready")
	if err != nil {
		t.Fatal(err)
	}
	if po.Endpoint != "10.0.0.1:6443" || po.DiscoveryToken.ID != "abcdef" || po.TLSBootstrapToken.ID != "abcdef" || len(po.Pins) != 1 || po.NodeName != "n1" {
		t.Errorf("options %+v", po)
	}
	if !po.IgnorePreflight["swap"] || !po.IgnorePreflight["port-10250"] || len(o.SkipPhases) != 1 {
		t.Errorf("ignore %v skip %v", po.IgnorePreflight, o.SkipPhases)
	}
}

func TestTokenSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	if err := os.WriteFile(file, []byte("bbbbbb.0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, line, stdin string
		env               map[string]string
		wantID            string
		wantErr           string
	}{
		{name: "file", line: "e:6443 --token-file " + file, wantID: "bbbbbb"},
		{name: "stdin", line: "e:6443 --token-file -", stdin: "cccccc.0123456789abcdef\n", wantID: "cccccc"},
		{name: "env", line: "e:6443", env: map[string]string{"KJOIN_TOKEN": "dddddd.0123456789abcdef"}, wantID: "dddddd"},
		{name: "flag beats env", line: "e:6443 --token eeeeee.0123456789abcdef", env: map[string]string{"KJOIN_TOKEN": "dddddd.0123456789abcdef"}, wantID: "eeeeee"},
		{name: "both flag and file", line: "e:6443 --token eeeeee.0123456789abcdef --token-file " + file, wantErr: "not together with --token-file"},
		{name: "none", line: "e:6443", wantErr: "--token: missing"},
		{name: "malformed", line: "e:6443 --token nope", wantErr: "want a bootstrap token"},
		{name: "no pin", line: "e:6443 --token eeeeee.0123456789abcdef --discovery-token-ca-cert-hash=", wantErr: "would trust any server"},
		{name: "bad pin", line: "e:6443 --token eeeeee.0123456789abcdef --discovery-token-ca-cert-hash sha256:abc", wantErr: "64 characters"},
		{name: "endpoint without port", line: "10.0.0.1 --token eeeeee.0123456789abcdef", wantErr: "host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deps, _, _ := testDeps(tc.stdin, tc.env)
			line := tc.line
			if !strings.Contains(line, "ca-cert-hash") {
				line += " --discovery-token-ca-cert-hash " + pin
			}
			_, po, err := parse(t, deps, line)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "0123456789abcdef") {
					t.Errorf("error leaks the token secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if po.DiscoveryToken.ID != tc.wantID {
				t.Errorf("token id %s, want %s", po.DiscoveryToken.ID, tc.wantID)
			}
		})
	}
}

func TestConfigFileAndMixingRules(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "join.yaml")
	content := `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: cp.example:6443
    caCertHashes: [` + pin + `]
nodeRegistration:
  name: from-config
  criSocket: unix:///run/containerd/containerd.sock
  taints: []
  kubeletExtraArgs:
  - name: node-ip
    value: 10.0.0.5
timeouts:
  discovery: 30s
`
	if err := os.WriteFile(cfg, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	deps, _, _ := testDeps("", map[string]string{"KJOIN_TOKEN": "ffffff.0123456789abcdef"})
	_, po, err := parse(t, deps, "--config "+cfg)
	if err != nil {
		t.Fatal(err)
	}
	if po.Endpoint != "cp.example:6443" || po.NodeName != "from-config" || po.DiscoveryToken.ID != "ffffff" || po.Timeouts.Discovery.String() != "30s" ||
		len(po.KubeletExtraArgs) != 1 || !po.TaintsSet || po.CRISocket != "unix:///run/containerd/containerd.sock" {
		t.Errorf("options from config: %+v", po)
	}
	_, po, err = parse(t, deps, "--config "+cfg+" --node-name flag-wins")
	if err != nil || po.NodeName != "flag-wins" {
		t.Errorf("--node-name with --config: %v %q", err, po.NodeName)
	}
	if _, _, err := parse(t, deps, "--config "+cfg+" --token ffffff.0123456789abcdef"); err == nil || !strings.Contains(err.Error(), "can not mix '--config'") {
		t.Errorf("mixing --config and --token: %v", err)
	}
}

func TestRunExitCodesAndJSON(t *testing.T) {
	deps, out, errb := testDeps("", nil)
	code := Run(context.Background(), deps, []string{"join", "e:6443", "--token", "bad", "--discovery-token-ca-cert-hash", pin})
	if code != 2 || !strings.Contains(errb.String(), "error: invalid input: --token") || !strings.Contains(errb.String(), "hint:") {
		t.Errorf("exit %d, stderr %q", code, errb)
	}

	deps, out, _ = testDeps("", nil)
	code = Run(context.Background(), deps, []string{"join", "e:6443", "--token", "bad", "--discovery-token-ca-cert-hash", pin, "-o", "json"})
	var rep output.JoinResult
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if code != 2 || rep.Error == nil || rep.Error.Code != 2 || rep.Error.Reason != "usage" || rep.Changed {
		t.Errorf("exit %d report %+v", code, rep)
	}

	deps, _, errb = testDeps("", nil)
	if code := Run(context.Background(), deps, []string{"join", "--no-such-flag"}); code != 2 {
		t.Errorf("unknown flag: exit %d, %s", code, errb)
	}
}

func TestPhaseSubcommandsExist(t *testing.T) {
	deps, out, _ := testDeps("", nil)
	if code := Run(context.Background(), deps, []string{"join", "phase", "--help"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, p := range phases.Join {
		if !strings.Contains(out.String(), p.Name) {
			t.Errorf("join phase help lacks %s:\n%s", p.Name, out)
		}
	}
}

func TestInterruptedJoinSaysHowToResume(t *testing.T) {
	deps, _, errb := testDeps("", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code := Run(ctx, deps, []string{"join", "e:6443", "--token", "abcdef.0123456789abcdef", "--discovery-token-ca-cert-hash", pin,
		"--cri-socket", "unix:///nonexistent.sock", "--root", t.TempDir()})
	if code != 1 || !strings.Contains(errb.String(), "interrupted") || !strings.Contains(errb.String(), "run the same command again") {
		t.Errorf("exit %d, stderr %q", code, errb)
	}
}

// A token given as the endpoint, or a certificate key as a pin, is never echoed: not in the
// text error, not in JSON (endpoint and error).
func TestMisplacedSecretsAreRedacted(t *testing.T) {
	key := strings.Repeat("5e", 32)
	for _, args := range [][]string{
		{"join", "abcdef.0123456789abcdef", "--token", "abcdef.0123456789abcdef", "--discovery-token-ca-cert-hash", pin, "--root", t.TempDir()},
		{"join", "10.0.0.1:6443", "--token", "abcdef.0123456789abcdef", "--discovery-token-ca-cert-hash", key, "--root", t.TempDir()},
	} {
		for _, output := range []string{"text", "json"} {
			deps, out, errb := testDeps("", nil)
			code := Run(context.Background(), deps, append(args, "-o", output))
			all := out.String() + errb.String()
			if code != 2 || strings.Contains(all, "0123456789abcdef") || strings.Contains(all, key) {
				t.Errorf("%v -o %s: exit %d, output:\n%s", args, output, code, all)
			}
		}
	}
}

// kjoin join phase NAME takes only the flags that phase uses (every one of them a join flag);
// a flag the phase does not use is an unknown flag (exit 2).
func TestPhaseSubcommandsTakeTheirFlags(t *testing.T) {
	deps, _, _ := testDeps("", nil)
	root := NewRootCmd(deps)
	join, _, err := root.Find([]string{"join"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range phases.Join {
		for _, n := range phaseFlags(p.Name) {
			if join.Flags().Lookup(n) == nil {
				t.Errorf("phase %s lists %q, which is not a join flag", p.Name, n)
			}
		}
		sub, _, err := root.Find([]string{"join", "phase", p.Name})
		if err != nil || sub.Flags().Lookup("token-file") == nil || sub.Flags().Lookup("discovery-token-ca-cert-hash") == nil {
			t.Errorf("phase %s lacks the discovery flags: %v", p.Name, err)
		}
	}
	for phase, flag := range map[string]string{"kubelet-start": "--patches=/x", "discovery": "--wait-ready", "tls-bootstrap": "--ignore-preflight-errors=all"} {
		deps, _, errb := testDeps("", nil)
		code := Run(context.Background(), deps, []string{"join", "phase", phase, "e:6443", flag})
		if code != 2 || !strings.Contains(errb.String(), "unknown flag") {
			t.Errorf("join phase %s %s: exit %d %s", phase, flag, code, errb)
		}
	}
	sub, _, _ := root.Find([]string{"join", "phase", "wait-ready"})
	if sub.Flags().Lookup("wait-ready-timeout") == nil || sub.Flags().Lookup("patches") != nil {
		t.Error("wait-ready's flags are not its own")
	}
}
