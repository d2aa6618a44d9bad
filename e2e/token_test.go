//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
)

type joinInfo struct {
	Token          string   `json:"token"`
	Endpoint       string   `json:"endpoint"`
	CACertHashes   []string `json:"caCertHashes"`
	CertificateKey string   `json:"certificateKey"`
	Command        string   `json:"command"`
}

// kubeadmJoinArgs is kubeadm's join command line for a token's join info.
func kubeadmJoinArgs(ji joinInfo) []string {
	args := []string{"kubeadm", "join", ji.Endpoint, "--token", ji.Token}
	for _, h := range ji.CACertHashes {
		args = append(args, "--discovery-token-ca-cert-hash", h)
	}
	return args
}

func tokenCreate(t *testing.T, c *framework.Cluster, args ...string) joinInfo {
	t.Helper()
	r := c.MustRun(t, "cp1", append([]string{"kjoin", "token", "create", "--print-join-command", "-o", "json"}, args...)...)
	var ji joinInfo
	if err := json.Unmarshal([]byte(r.Stdout), &ji); err != nil {
		t.Fatalf("token create output is not JSON: %v\n%s", err, r.Stdout)
	}
	if ji.Endpoint != lab.Endpoint() || len(ji.CACertHashes) != 1 || ji.CACertHashes[0] != c.CAHash {
		t.Fatalf("join info %+v: want endpoint %s and CA pin %s", ji, lab.Endpoint(), c.CAHash)
	}
	return ji
}

// TestTokensInteroperate proves both directions: kjoin tokens and commands work with kubeadm
// and kjoin; kubeadm's tokens work with kjoin; a deleted token fails fast.
func TestTokensInteroperate(t *testing.T) {
	c := framework.Get(t)
	ji := tokenCreate(t, c)

	t.Run("kjoin token, kubeadm join", func(t *testing.T) {
		c.Host(t, "w1")
		c.MustRun(t, "w1", append(kubeadmJoinArgs(ji), "--ignore-preflight-errors=all")...)
		c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	})
	t.Run("kjoin token, kjoin join", func(t *testing.T) {
		c.Host(t, "w2")
		// The printed command itself, as an operator pastes it into a shell.
		if strings.Contains(ji.Command, "--token "+ji.Token) {
			t.Fatalf("the printed kjoin command passes the token as a flag: %s", ji.Command)
		}
		c.MustRun(t, "w2", "sh", "-c", ji.Command)
		c.WaitNodeCondition(t, "w2", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	})
	t.Run("kjoin join string, kjoin join", func(t *testing.T) {
		c.Host(t, "w9")
		r := c.MustRun(t, "cp1", "kjoin", "token", "create", "--print-join-string", "-o", "json")
		js := framework.Answer[output.JoinCommand](t, r)
		if !strings.HasPrefix(js.JoinString, "kjoin1.") {
			t.Fatalf("no join string in %s", r.Stdout)
		}
		// One character changed: refused (exit 2) naming its part, before anything is written.
		i := strings.Index(js.JoinString, ".") + 3
		other := "A"
		if js.JoinString[i] == 'A' {
			other = "B"
		}
		damaged := js.JoinString[:i] + other + js.JoinString[i+1:]
		if err := os.WriteFile(c.HostPath("w9", "/run/lab/join"), []byte(damaged+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		bad := c.Run(t, "w9", "kjoin", "join", "--join-string-file", "/run/lab/join")
		if bad.ExitCode != 2 || !strings.Contains(bad.Stderr, "the endpoints part (part 1) is damaged") || strings.Contains(bad.Stderr, js.Token) {
			t.Errorf("a damaged join string: exit %d\n%s", bad.ExitCode, bad.Stderr)
		}
		if _, err := os.Stat(c.HostPath("w9", "/etc/kubernetes/pki/ca.crt")); err == nil {
			t.Error("the refused join wrote ca.crt")
		}
		// The string itself, on standard input.
		ok := c.ExecEnv(context.Background(), "w9", nil, strings.NewReader(js.JoinString+"\n"), "kjoin", "join", "--join-string-file", "-")
		if ok.Err != nil {
			t.Fatalf("join with the string: %v", ok.Error())
		}
		c.WaitNodeCondition(t, "w9", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	})
	t.Run("kubeadm token, kjoin join", func(t *testing.T) {
		c.Host(t, "w3")
		r := c.MustRun(t, "cp1", "kubeadm", "token", "create", "--print-join-command")
		m := regexp.MustCompile(`--token (\S+) --discovery-token-ca-cert-hash (\S+)`).FindStringSubmatch(r.Stdout)
		if m == nil {
			t.Fatalf("no token in kubeadm's output: %s", r.Stdout)
		}
		writeToken(t, c, "w3", m[1])
		c.MustRun(t, "w3", "kjoin", "join", lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", m[2])
		c.WaitNodeCondition(t, "w3", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	})
	t.Run("deleted token fails fast", func(t *testing.T) {
		c.Host(t, "w4")
		id := strings.Split(ji.Token, ".")[0]
		c.MustRun(t, "cp1", "kjoin", "token", "delete", id)
		list := c.MustRun(t, "cp1", "kjoin", "token", "list", "-o", "json")
		if strings.Contains(list.Stdout, `"`+id+`"`) {
			t.Errorf("token %s still listed:\n%s", id, list.Stdout)
		}
		writeToken(t, c, "w4", ji.Token)
		r := c.Run(t, "w4", "kjoin", "join", ji.Endpoint, "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", ji.CACertHashes[0])
		if r.ExitCode != 5 || !strings.Contains(r.Stderr, "unknown to this cluster or has expired") {
			t.Errorf("exit %d, stderr %s; want exit 5 and the unknown-token error", r.ExitCode, r.Stderr)
		}
		if r.Duration > 20*time.Second {
			t.Errorf("the join took %s to fail", r.Duration)
		}
	})
}

// TestOneStepControlPlaneJoinCommand: the command printed by `kjoin token create
// --print-join-command --control-plane` joins cp2 with kjoin and cp3 with real kubeadm.
func TestOneStepControlPlaneJoinCommand(t *testing.T) {
	c := framework.Get(t)
	ji := tokenCreate(t, c, "--control-plane")
	if len(ji.CertificateKey) != 64 || !strings.Contains(ji.Command, "--control-plane --certificate-key-file -") || strings.Contains(ji.Command, "--certificate-key "+ji.CertificateKey) {
		t.Fatalf("no control-plane command reading its key from stdin: %+v", ji)
	}
	c.Host(t, "cp2")
	// kubeadm-style patches for two static pods, to prove --patches reaches them.
	patchDir := c.HostPath("cp2", "/run/lab/patches")
	if err := os.MkdirAll(patchDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"etcd+merge.yaml":     "metadata:\n  labels:\n    kjoin.dev/patched: etcd\n",
		"kube-apiserver.yaml": "metadata:\n  labels:\n    kjoin.dev/patched: kube-apiserver\n",
	} {
		if err := os.WriteFile(filepath.Join(patchDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The printed command itself, run by a shell, with the node's own flags appended.
	c.MustRun(t, "cp2", "sh", "-c", ji.Command+" --apiserver-advertise-address "+c.Hosts["cp2"].IP+" --patches /run/lab/patches")
	assertEtcdVoters(t, c, 2)
	for _, component := range []string{"etcd", "kube-apiserver"} {
		err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods("kube-system").Get(ctx, component+"-cp2", metav1.GetOptions{})
			return err == nil && p.Labels["kjoin.dev/patched"] == component, nil
		})
		if err != nil {
			t.Errorf("the %s mirror pod of cp2 does not carry the patched label: %v", component, err)
		}
	}

	c.Host(t, "cp3")
	c.MustRun(t, "cp3", append(kubeadmJoinArgs(ji), "--control-plane", "--certificate-key", ji.CertificateKey, "--apiserver-advertise-address", c.Hosts["cp3"].IP, "--ignore-preflight-errors=all")...)
	assertEtcdVoters(t, c, 3)
	c.WaitNodeCondition(t, "cp3", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	c.WaitNodeCondition(t, "cp2", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	assertVerified(t, c, 3, "cp2")

	// Stop cp2's etcd (the kubelet removes its static pod): with three members etcd keeps its
	// quorum, and kjoin verify names the stopped member. Then bring it back.
	manifest, moved := c.HostPath("cp2", "/etc/kubernetes/manifests/etcd.yaml"), c.HostPath("cp2", "/etc/kubernetes/etcd.yaml.stopped")
	if err := os.Rename(manifest, moved); err != nil {
		t.Fatal(err)
	}
	evidence := assertVerifyFails(t, c, "cp2", "etcd.health", 2*time.Minute)
	if !strings.Contains(evidence, "cp2") {
		t.Errorf("etcd.health does not name cp2's member: %s", evidence)
	}
	if err := os.Rename(moved, manifest); err != nil {
		t.Fatal(err)
	}
	assertEtcdVoters(t, c, 3)
	if err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		out, code := runVerify(t, c, "cp2")
		return code == 0 && out.Failed == 0, nil
	}); err != nil {
		t.Errorf("kjoin verify cp2 does not pass again after its etcd came back: %v", err)
	}
}

// TestTokenBadInput checks the operator-facing errors of the token commands (bad input in
// kjoin's one shape: "invalid input: ...").
func TestTokenBadInput(t *testing.T) {
	c := framework.Get(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"token", "create", "nope"}, 2, "invalid input: --token (hidden, 4 characters): want a token like abcdef."},
		{[]string{"token", "create", "--ttl", "-1h"}, 2, "must not be negative"},
		{[]string{"token", "create", "--ttl", "soon"}, 2, `invalid input: --ttl "soon": want a duration`},
		{[]string{"token", "delete", "zzzzzz"}, 5, "no such bootstrap token"},
		{[]string{"token", "list", "--kubeconfig", "/nonexistent"}, 2, "cannot use the admin kubeconfig: kubeconfig /nonexistent (--kubeconfig)"},
	} {
		r := c.Run(t, "cp1", append([]string{"kjoin"}, tc.args...)...)
		if r.ExitCode != tc.code || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("kjoin %v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, r.ExitCode, r.Stderr, tc.code, tc.want)
		}
	}
	r := c.Run(t, "cp1", "kjoin", "token", "create", "--ttl", "0")
	if r.Err != nil || !strings.Contains(r.Stderr, "never expires") {
		t.Errorf("--ttl 0 should warn: exit %d, stderr %q", r.ExitCode, r.Stderr)
	}
}
