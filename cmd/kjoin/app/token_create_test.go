package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinstring"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/token"
)

// adminHost is a host root with an admin.conf, whose client is a fake clientset.
func adminHost(t *testing.T) (*Deps, *fake.Clientset, string) {
	t.Helper()
	root := t.TempDir()
	key, _ := pki.NewECKey()
	ca, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "kubernetes", NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}, key)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["k"] = &clientcmdapi.Cluster{Server: "https://10.0.0.11:6443", CertificateAuthorityData: pki.EncodeCert(ca)}
	kc.AuthInfos["a"] = &clientcmdapi.AuthInfo{Token: "admin"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "a"}
	kc.CurrentContext = "c"
	b, _ := clientcmd.Write(*kc)
	p := filepath.Join(root, host.AdminKubeconfig)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../../phases/testdata/cluster-configuration.yaml")
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system"},
		Data: map[string]string{"ClusterConfiguration": string(cfg)}})
	deps, _, _ := testDeps("", nil)
	newEnv := deps.NewEnv
	deps.NewEnv = func(r string, v int) *host.Env {
		e := newEnv(r, v)
		e.NewClient = func(*rest.Config) (kubernetes.Interface, error) { return client, nil }
		return e
	}
	return deps, client, root
}

func bootstrapTokens(t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	l, err := c.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range l.Items {
		names = append(names, s.Name)
	}
	return names
}

// token create --control-plane on a host without the certificate files creates no token.
func TestTokenCreateControlPlaneWithoutCertificatesLeavesNoToken(t *testing.T) {
	deps, client, root := adminHost(t)
	code := Run(context.Background(), deps, []string{"token", "create", "--print-join-command", "--control-plane", "--root", root})
	if code == 0 {
		t.Fatal("token create --control-plane without certificates succeeded")
	}
	if tokens := bootstrapTokens(t, client); len(tokens) != 0 {
		t.Errorf("the failed command left secrets behind: %v", tokens)
	}
	if !strings.Contains(deps.Err.(interface{ String() string }).String(), "no token was created") {
		t.Errorf("the error does not say that no token was created:\n%s", deps.Err)
	}
}

// The printed kjoin command feeds its secrets on standard input from the shell's printf
// builtin: run by a real shell with kjoin replaced by a recorder, the token and the key reach
// kjoin's stdin and never its arguments. --format kubeadm prints kubeadm's form.
func TestPrintedJoinCommandKeepsSecretsOffArgv(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	ji := &output.JoinCommand{Token: "abcdef.0123456789abcdef", Endpoint: "[fd77::11]:6443", CACertHashes: []string{pin}, CertificateKey: strings.Repeat("ab", 32)}
	for _, cp := range []bool{false, true} {
		j := *ji
		if !cp {
			j.CertificateKey = ""
		}
		line := joinCommand("kjoin", &j)
		if strings.Contains(line, "--token "+j.Token) || strings.Contains(line, "--certificate-key "+ji.CertificateKey) {
			t.Errorf("the command passes a secret as a flag: %s", line)
		}
		dir := t.TempDir()
		stub := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + dir + "/args\ncat > " + dir + "/stdin\n"
		if err := os.WriteFile(filepath.Join(dir, "kjoin"), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sh, "-c", line+" --node-name n1")
		cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		args, _ := os.ReadFile(filepath.Join(dir, "args"))
		stdin, _ := os.ReadFile(filepath.Join(dir, "stdin"))
		if strings.Contains(string(args), "0123456789abcdef") || (cp && strings.Contains(string(args), ji.CertificateKey)) {
			t.Errorf("a secret reached kjoin's argv:\n%s", args)
		}
		want := j.Token + "\n"
		if cp {
			want += ji.CertificateKey + "\n"
		}
		if string(stdin) != want {
			t.Errorf("kjoin's stdin %q, want %q", stdin, want)
		}
		for _, a := range []string{"join", "[fd77::11]:6443", "--token-file", "-", "--node-name"} {
			if !strings.Contains(string(args), a+"\n") {
				t.Errorf("args lack %q:\n%s", a, args)
			}
		}
	}
	if k := joinCommand("kubeadm", ji); !strings.HasPrefix(k, "kubeadm join [fd77::11]:6443 --token abcdef.0123456789abcdef ") || !strings.HasSuffix(k, "--control-plane --certificate-key "+ji.CertificateKey) {
		t.Errorf("kubeadm form: %s", k)
	}
}

// --token-file - and --certificate-key-file - together: the token is stdin's first line, the
// key its second; a key file works too; both are refused next to --certificate-key.
func TestCertificateKeyFromFileOrStdin(t *testing.T) {
	key := strings.Repeat("cd", 32)
	deps, _, _ := testDeps("abcdef.0123456789abcdef\n"+key+"\n", nil)
	_, po, err := parse(t, deps, "10.0.0.1:6443 --token-file - --certificate-key-file - --control-plane --apiserver-advertise-address 10.0.0.12 --discovery-token-ca-cert-hash "+pin)
	if err != nil || po.CertificateKey != key || po.DiscoveryToken.ID != "abcdef" {
		t.Fatalf("stdin: %v key %q token %+v", err, po.CertificateKey, po.DiscoveryToken)
	}
	f := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(f, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deps, _, _ = testDeps("", nil)
	_, po, err = parse(t, deps, "10.0.0.1:6443 --token abcdef.0123456789abcdef --certificate-key-file "+f+" --control-plane --apiserver-advertise-address 10.0.0.12 --discovery-token-ca-cert-hash "+pin)
	if err != nil || po.CertificateKey != key {
		t.Fatalf("file: %v key %q", err, po.CertificateKey)
	}
	deps, _, _ = testDeps("", nil)
	_, _, err = parse(t, deps, "10.0.0.1:6443 --token abcdef.0123456789abcdef --certificate-key "+key+" --certificate-key-file "+f+" --control-plane --apiserver-advertise-address 10.0.0.12 --discovery-token-ca-cert-hash "+pin)
	if err == nil || !strings.Contains(err.Error(), "not together with --certificate-key-file") || strings.Contains(err.Error(), key) {
		t.Errorf("both: %v", err)
	}
}

// token create --print-join-string prints one string that carries the cluster's endpoint, the
// admin kubeconfig's CA pin and the very token created; the hint goes to stderr.
func TestTokenCreatePrintsAJoinString(t *testing.T) {
	deps, client, root := adminHost(t)
	if code := Run(context.Background(), deps, []string{"token", "create", "--print-join-string", "--root", root}); code != 0 {
		t.Fatalf("exit %d: %s", code, deps.Err)
	}
	out := strings.TrimSpace(deps.Out.(interface{ String() string }).String())
	js, err := joinstring.Parse(out)
	if err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	tokens := bootstrapTokens(t, client)
	if len(tokens) != 1 || "bootstrap-token-"+strings.SplitN(js.Token, ".", 2)[0] != tokens[0] {
		t.Errorf("the string's token %s is not the one created: %v", js.Token[:6], tokens)
	}
	kc, err := clientcmd.LoadFromFile(filepath.Join(root, host.AdminKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseCerts(kc.Clusters["k"].CertificateAuthorityData)
	if err != nil {
		t.Fatal(err)
	}
	if len(js.Endpoints) != 1 || js.Endpoints[0] != "control-plane.lab:6443" || len(js.Pins) != 1 || js.Pins[0] != discovery.Pin(ca[0]) || js.ControlPlane() {
		t.Errorf("join string carries %+v", js)
	}
	if !strings.Contains(deps.Err.(interface{ String() string }).String(), "--join-string-file") {
		t.Errorf("no hint on stderr: %s", deps.Err)
	}
}

// token create --node makes a token bound to that node: in kjoin's bound group (never
// kubeadm's), labelled with the node, with kjoin's bindings to kubeadm's roles; token list
// shows it bound and unused. --groups with --node is refused before anything is created.
func TestTokenCreateBoundToANode(t *testing.T) {
	deps, client, root := adminHost(t)
	if code := Run(context.Background(), deps, []string{"token", "create", "--node", "w7", "--groups", "system:bootstrappers:x", "--root", root}); code != 2 {
		t.Errorf("--groups with --node: exit %d, want 2", code)
	}
	if tokens := bootstrapTokens(t, client); len(tokens) != 0 {
		t.Fatalf("a refused create made %v", tokens)
	}
	if code := Run(context.Background(), deps, []string{"token", "create", "--node", "w7", "--root", root}); code != 0 {
		t.Fatalf("exit %d: %s", code, deps.Err)
	}
	l, err := client.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("%v %v", err, l)
	}
	s := l.Items[0]
	if g := string(s.Data["auth-extra-groups"]); g != token.BoundGroup || s.Labels[token.NodeLabel] != "w7" || s.Labels[token.RoleLabel] != "worker" {
		t.Errorf("bound token: groups %q, labels %v", g, s.Labels)
	}
	crbs, _ := client.RbacV1().ClusterRoleBindings().List(context.Background(), metav1.ListOptions{})
	for _, b := range crbs.Items {
		if b.RoleRef.Name == "system:certificates.k8s.io:certificatesigningrequests:nodeclient" {
			t.Errorf("binding %s grants the bound group auto-approval", b.Name)
		}
	}
	if len(crbs.Items) == 0 {
		t.Error("no binding was made for the bound group")
	}
	deps.Out.(interface{ Reset() }).Reset()
	if code := Run(context.Background(), deps, []string{"token", "list", "--root", root}); code != 0 {
		t.Fatalf("token list: exit %d", code)
	}
	if out := deps.Out.(interface{ String() string }).String(); !strings.Contains(out, "BOUND TO") || !strings.Contains(out, "w7 (worker, unused)") {
		t.Errorf("token list:\n%s", out)
	}
}

// token create --uses 1 makes a single-use token: kjoin's bound group, the node label empty
// (any name), kjoin's bindings; token list shows it as any node, once. --uses 2 is refused.
func TestTokenCreateSingleUse(t *testing.T) {
	deps, client, root := adminHost(t)
	if code := Run(context.Background(), deps, []string{"token", "create", "--uses", "2", "--root", root}); code != 2 {
		t.Errorf("--uses 2: exit %d, want 2", code)
	}
	if code := Run(context.Background(), deps, []string{"token", "create", "--uses", "1", "--root", root}); code != 0 {
		t.Fatalf("exit %d: %s", code, deps.Err)
	}
	l, err := client.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("%v %v", err, l)
	}
	s := l.Items[0]
	node, labelled := s.Labels[token.NodeLabel]
	if g := string(s.Data["auth-extra-groups"]); g != token.BoundGroup || !labelled || node != "" {
		t.Errorf("single-use token: groups %q, labels %v", g, s.Labels)
	}
	if crbs, _ := client.RbacV1().ClusterRoleBindings().List(context.Background(), metav1.ListOptions{}); len(crbs.Items) == 0 {
		t.Error("no binding was made for the bound group")
	}
	deps.Out.(interface{ Reset() }).Reset()
	if code := Run(context.Background(), deps, []string{"token", "list", "--root", root}); code != 0 {
		t.Fatalf("token list: exit %d", code)
	}
	if out := deps.Out.(interface{ String() string }).String(); !strings.Contains(out, "any node, once (worker, unused)") {
		t.Errorf("token list:\n%s", out)
	}
}
