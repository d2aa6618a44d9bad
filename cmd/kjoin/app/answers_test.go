package app

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinconfig"
	"kjoin.dev/kjoin/output"
)

var update = flag.Bool("update", false, "rewrite the golden answers in testdata/answers")

// noExec refuses every command: these tests must never touch the machine's services.
type noExec struct{}

func (noExec) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	return nil, os.ErrPermission
}

// noNetwork answers no HTTP request: the answers must not depend on what this machine runs.
type noNetwork struct{}

func (noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no network in unit tests")
}

// answerCase is one command line and the kind it answers with.
type answerCase struct {
	name string
	args []string
	kind string
	// fails: the command fails (its answer carries the error, and the exit code is code).
	code int
}

// answerHost is an admin host (a fake cluster with one worker Node) whose commands never run
// a program.
func answerHost(t *testing.T) (*Deps, string) {
	deps, client, root := adminHost(t)
	newEnv := deps.NewEnv
	deps.NewEnv = func(r string, v int) *host.Env {
		e := newEnv(r, v)
		e.Exec = noExec{}
		e.HTTPClient = func(*x509.CertPool) *http.Client { return &http.Client{Transport: noNetwork{}} }
		e.Hostname = func() (string, error) { return "vm", nil }
		return e
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"node-role.kubernetes.io/worker": "", "kjoin.dev/joined-by": "kjoin"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.21"}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", ContainerRuntimeVersion: "containerd://1.6.20", OSImage: "Debian GNU/Linux 12", KernelVersion: "6.1.0"}}}
	if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/kubernetes/pki"), 0o755); err != nil {
		t.Fatal(err)
	}
	return deps, root
}

func answerCases() []answerCase {
	return []answerCase{
		{name: "version", args: []string{"version"}, kind: "Version"},
		{name: "token-generate", args: []string{"token", "generate"}, kind: "Token"},
		{name: "certificate-key", args: []string{"certs", "certificate-key"}, kind: "CertificateKey"},
		{name: "token-create", args: []string{"token", "create", "--ttl", "1h"}, kind: "Token"},
		{name: "token-create-join-command", args: []string{"token", "create", "--print-join-command"}, kind: "JoinCommand"},
		{name: "token-list", args: []string{"token", "list"}, kind: "TokenList"},
		{name: "nodes", args: []string{"nodes"}, kind: "NodeList"},
		{name: "verify", args: []string{"verify", "w1", "--timeout", "5s"}, kind: "VerifyReport", code: 8},
		{name: "diagnose", args: []string{"diagnose"}, kind: "DiagnoseReport", code: 8},
		{name: "join", args: []string{"join", "10.0.0.11:6443", "--token", "bad", "--discovery-token-ca-cert-hash", pin}, kind: "JoinResult", code: 2},
		{name: "reset", args: []string{"reset", "-f"}, kind: "ResetResult"},
		{name: "leave", args: []string{"leave", "-f"}, kind: "LeaveResult"},
		{name: "endpoint-move", args: []string{"endpoint", "move", "10.0.0.10:6443"}, kind: "EndpointMoveResult", code: 1},
	}
}

func runAnswer(t *testing.T, deps *Deps, root string, args ...string) (int, string, string) {
	t.Helper()
	out, errb := &bytes.Buffer{}, &bytes.Buffer{}
	deps.Out, deps.Err = out, errb
	code := Run(context.Background(), deps, append(append([]string{}, args...), "--root", root))
	return code, out.String(), errb.String()
}

// Every command answers -o json, yaml, jsonpath and go-template with one versioned object
// (apiVersion output.kjoin.dev/v1alpha1 and its kind), with the exit code of its outcome, and
// no list is null. Each JSON answer matches its golden file (volatile values masked).
func TestEveryCommandAnswersEveryFormat(t *testing.T) {
	for _, c := range answerCases() {
		t.Run(c.name, func(t *testing.T) {
			deps, root := answerHost(t)
			code, out, errs := runAnswer(t, deps, root, append(c.args, "-o", "json")...)
			if code != c.code {
				t.Fatalf("-o json: exit %d, want %d\n%s%s", code, c.code, out, errs)
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(out), &obj); err != nil {
				t.Fatalf("-o json is not one JSON object: %v\n%s", err, out)
			}
			if obj["apiVersion"] != "output.kjoin.dev/v1alpha1" || obj["kind"] != c.kind {
				t.Fatalf("-o json: apiVersion %v kind %v, want output.kjoin.dev/v1alpha1 %s", obj["apiVersion"], obj["kind"], c.kind)
			}
			if strings.Contains(out, "null") {
				t.Errorf("-o json has a null:\n%s", out)
			}
			if (c.code != 0) != (obj["error"] != nil) {
				t.Errorf("exit %d but error %v", code, obj["error"])
			}
			golden(t, c.name, out)

			code, out, errs = runAnswer(t, deps, root, append(c.args, "-o", "yaml")...)
			var y map[string]any
			if err := yaml.Unmarshal([]byte(out), &y); code != c.code || err != nil || y["kind"] != c.kind {
				t.Errorf("-o yaml: exit %d kind %v err %v\n%s%s", code, y["kind"], err, out, errs)
			}
			for _, tmpl := range []string{"jsonpath={.apiVersion}/{.kind}", "go-template={{.apiVersion}}/{{.kind}}"} {
				code, out, errs = runAnswer(t, deps, root, append(c.args, "-o", tmpl)...)
				if code != c.code || out != "output.kjoin.dev/v1alpha1/"+c.kind {
					t.Errorf("-o %s: exit %d, %q %s", tmpl, code, out, errs)
				}
			}
		})
	}
}

// On failure every command prints the same error object in JSON mode, flag errors included
// (wherever -o json stands on the line), with the documented exit code.
func TestEveryCommandFailsWithAnErrorObject(t *testing.T) {
	lines := [][]string{{"version", "--no-such-flag"}, {"token", "create", "--ttl", "soon"}, {"token", "list", "--kubeconfig", "/nonexistent"},
		{"token", "delete", "zzzzzz"}, {"upload-certs", "--certificate-key", "short"}, {"nodes", "-l", "zone in (a"}, {"verify", "--timeout", "0s"},
		{"diagnose", "extra-arg"}, {"reset", "--skip-phases", "nope"}, {"certs", "certificate-key", "x"}, {"token", "generate", "--bogus"},
		{"config", "print", "join-defaults", "extra"}, {"tokn"}, {"token", "lst"}, {"join", "phase", "discovery", "--no-such-flag"}}
	for _, line := range lines {
		for _, at := range []string{"end", "front"} {
			deps, root := answerHost(t)
			args := append(append([]string{}, line...), "-o", "json")
			if at == "front" {
				args = append([]string{"-o", "json"}, line...)
			}
			code, out, errs := runAnswer(t, deps, root, args...)
			var obj struct {
				APIVersion, Kind string
				Error            *output.Error
			}
			if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.Error == nil {
				t.Errorf("%v: no error object (exit %d): %v\n%s%s", args, code, err, out, errs)
				continue
			}
			if code != obj.Error.Code || code == 0 || obj.APIVersion != "output.kjoin.dev/v1alpha1" || obj.Kind == "" || obj.Error.Message == "" {
				t.Errorf("%v: exit %d, object %+v", args, code, obj)
			}
		}
	}
}

// An unknown -o is refused before anything runs, naming the formats; -o wide only where a
// command has a wide table.
func TestOutputFormatChecked(t *testing.T) {
	deps, root := answerHost(t)
	if code, _, errs := runAnswer(t, deps, root, "nodes", "-o", "xml"); code != 2 || !strings.Contains(errs, "jsonpath") {
		t.Errorf("-o xml: exit %d %s", code, errs)
	}
	if code, _, errs := runAnswer(t, deps, root, "version", "-o", "wide"); code != 2 || !strings.Contains(errs, "no wide table") {
		t.Errorf("version -o wide: exit %d %s", code, errs)
	}
	code, out, errs := runAnswer(t, deps, root, "nodes", "-o", "wide")
	if code != 0 || !strings.Contains(out, "OS-IMAGE") || !strings.Contains(out, "Debian GNU/Linux 12") {
		t.Errorf("nodes -o wide: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ := runAnswer(t, deps, root, "nodes"); code != 0 || strings.Contains(out, "OS-IMAGE") {
		t.Errorf("nodes (narrow) shows the wide columns:\n%s", out)
	}
	if code, out, errs := runAnswer(t, deps, root, "join", "10.0.0.11:6443", "--token", "bad", "-o", "xml"); code != 2 || !strings.Contains(errs, "--output") || !strings.Contains(errs, "--token") || out != "" {
		t.Errorf("join -o xml with a bad token: both not reported at once: exit %d %q %s", code, out, errs)
	}
}

// kjoin config print join-defaults prints kubeadm's join defaults with this host's name,
// except that a pin placeholder stands where kubeadm's turn CA verification off.
func TestConfigPrintJoinDefaults(t *testing.T) {
	deps, root := answerHost(t)
	code, out, errs := runAnswer(t, deps, root, "config", "print", "join-defaults")
	kubeadm, err := os.ReadFile("../../../joinconfig/testdata/join-defaults.kubeadm-v1.37.2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(kubeadm), "    token: abcdef.0123456789abcdef\n    unsafeSkipCAVerification: true\n",
		"    caCertHashes:\n    - "+joinconfig.PinPlaceholder+"\n    token: abcdef.0123456789abcdef\n", 1)
	if code != 0 || out != want || strings.Contains(out, "unsafeSkipCAVerification") {
		t.Errorf("exit %d %s\n%s", code, errs, out)
	}
}

// The kubeconfig is chosen as kubectl chooses it: --kubeconfig, then KUBECONFIG, then
// ~/.kube/config, then admin.conf; --context picks a context; errors name the file and why.
func TestKubeconfigAsKubectlLoadsIt(t *testing.T) {
	deps, root := answerHost(t)
	admin := filepath.Join(root, host.AdminKubeconfig)
	b, err := os.ReadFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	deps.Getenv = func(k string) string { return env[k] }
	home := filepath.Join(root, "home/op/.kube")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(admin); err != nil {
		t.Fatal(err)
	}
	env["HOME"] = "/home/op"
	if code, _, errs := runAnswer(t, deps, root, "token", "list"); code != 0 {
		t.Errorf("~/.kube/config not used: exit %d %s", code, errs)
	}
	env["KUBECONFIG"] = "/etc/missing.conf"
	if code, _, errs := runAnswer(t, deps, root, "token", "list"); code != 2 || !strings.Contains(errs, "/etc/missing.conf (KUBECONFIG)") {
		t.Errorf("KUBECONFIG not used before ~/.kube/config: exit %d %s", code, errs)
	}
	if code, _, errs := runAnswer(t, deps, root, "token", "list", "--kubeconfig", "/home/op/.kube/config"); code != 0 {
		t.Errorf("--kubeconfig not used before KUBECONFIG: exit %d %s", code, errs)
	}
	if code, _, errs := runAnswer(t, deps, root, "token", "list", "--kubeconfig", "/home/op/.kube/config", "--context", "other"); code != 2 || !strings.Contains(errs, `context "other"`) {
		t.Errorf("--context not applied: exit %d %s", code, errs)
	}
	delete(env, "KUBECONFIG")
	delete(env, "HOME")
	if code, _, errs := runAnswer(t, deps, root, "token", "list"); code != 2 || !strings.Contains(errs, host.AdminKubeconfig+" (default)") {
		t.Errorf("the default is not admin.conf, or the error does not name it: exit %d %s", code, errs)
	}
}

var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`), `TOKEN`},
	{regexp.MustCompile(`"id": "[a-z0-9]{6}"`), `"id": "ID"`},
	{regexp.MustCompile(`"[0-9a-f]{64}"`), `"KEY"`},
	{regexp.MustCompile(`sha256:[0-9a-f]{64}`), `sha256:PIN`},
	{regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`), `"TIME"`},
	{regexp.MustCompile(`"seconds": [0-9.e-]+`), `"seconds": 0`},
	{regexp.MustCompile(`"string": "[0-9.]+[a-zµ]*s"`), `"string": "0s"`},
	{regexp.MustCompile(`"goVersion": "[^"]*"`), `"goVersion": "GO"`},
	{regexp.MustCompile(`"platform": "[^"]*"`), `"platform": "OS/ARCH"`},
	{regexp.MustCompile(`/tmp/[^"\s]*?/(\d+/)?`), `ROOT/`},
	{regexp.MustCompile(`renews every [^")]*`), `renews every …`},
}

// golden compares a JSON answer with testdata/answers/NAME.json, volatile values masked
// (go test -run TestEveryCommandAnswersEveryFormat -update rewrites them).
func golden(t *testing.T, name, got string) {
	t.Helper()
	for _, v := range volatile {
		got = v.re.ReplaceAllString(got, v.with)
	}
	path := filepath.Join("testdata", "answers", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no golden answer (go test -run TestEveryCommandAnswersEveryFormat -update): %v", err)
	}
	if got != string(want) {
		t.Errorf("answer differs from %s:\n%s", path, got)
	}
}
