//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
)

// certificateKey runs kjoin certs certificate-key on cp1 and checks its shape.
func certificateKey(t *testing.T, c *framework.Cluster) string {
	t.Helper()
	key := strings.TrimSpace(c.MustRun(t, "cp1", "kjoin", "certs", "certificate-key").Stdout)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(key) {
		t.Fatalf("kjoin certs certificate-key printed %q, want 64 hex digits", key)
	}
	return key
}

// TestResetControlPlanes: kjoin upload-certs feeds two control-plane joins (a wrong key is
// refused first); kjoin reset refuses to cost etcd its quorum, --allow-etcd-quorum-loss overrides, and
// --delete-node deletes the very Node the join made; static pods and the kubelet are gone.
func TestResetControlPlanes(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "cp2")
	c.Host(t, "cp3")
	key := certificateKey(t, c)
	c.MustRun(t, "cp1", "kjoin", "upload-certs", "--certificate-key", key)

	wrong := certificateKey(t, c)
	r := kjoinControlPlane(t, c, "cp2", wrong, "-o", "json")
	out := framework.Answer[output.JoinResult](t, r)
	if r.ExitCode != 5 || out.Error == nil || !strings.Contains(out.Error.Message, "certificate key") {
		t.Fatalf("a wrong certificate key: exit %d %s; want exit 5 naming the certificate key", r.ExitCode, r.Stdout)
	}
	if _, err := os.Stat(c.HostPath("cp2", "/etc/kubernetes/manifests/etcd.yaml")); err == nil {
		t.Error("the refused join wrote an etcd manifest")
	}
	for _, h := range []string{"cp2", "cp3"} {
		if r := kjoinControlPlane(t, c, h, key); r.Err != nil {
			t.Fatal(r.Error())
		}
	}
	assertEtcdVoters(t, c, 3)

	// cp3's etcd stops: removing cp2 would leave cp1 and a stopped cp3, no quorum.
	resume := stopProcess(t, c, "cp3", "etcd")
	refused := c.Run(t, "cp2", "kjoin", "reset", "-o", "json")
	if refused.ExitCode != 3 || !strings.Contains(refused.Stdout, "lose quorum") {
		t.Fatalf("reset with a peer down: exit %d %s; want exit 3 naming quorum", refused.ExitCode, refused.Stdout)
	}
	if _, ok := memberOn(t, c, "cp2"); !ok {
		t.Fatal("the refused reset removed cp2's etcd member")
	}
	if _, err := os.Stat(c.HostPath("cp2", "/etc/kubernetes/manifests/kube-apiserver.yaml")); err != nil {
		t.Error("the refused reset removed cp2's static pods")
	}
	forced := c.Run(t, "cp2", "kjoin", "reset", "--allow-etcd-quorum-loss", "-o", "json")
	resume()
	if forced.ExitCode != 0 {
		t.Fatalf("reset --allow-etcd-quorum-loss: %v", forced.Error())
	}
	if _, ok := memberOn(t, c, "cp2"); ok {
		t.Error("reset --allow-etcd-quorum-loss left cp2's etcd member")
	}
	assertEtcdVoters(t, c, 2)
	assertHostStopped(t, c, "cp2")

	// --delete-node deletes the Node this join created (same UID), and the member.
	node, err := c.Client.CoreV1().Nodes().Get(context.Background(), "cp3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.MustRun(t, "cp3", "kjoin", "reset", "--delete-node")
	err = wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "cp3", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err == nil && n.UID != node.UID {
			return false, fmt.Errorf("Node cp3 was recreated (uid %s, was %s)", n.UID, node.UID)
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("Node cp3 (uid %s) not deleted: %v", node.UID, err)
	}
	if _, ok := memberOn(t, c, "cp3"); ok {
		t.Error("reset --delete-node left cp3's etcd member")
	}
	assertEtcdVoters(t, c, 1)
	assertHostStopped(t, c, "cp3")
}

// assertHostStopped: no static pod manifests, no kubelet, no control-plane process left.
func assertHostStopped(t *testing.T, c *framework.Cluster, host string) {
	t.Helper()
	if entries, _ := os.ReadDir(c.HostPath(host, "/etc/kubernetes/manifests")); len(entries) > 0 {
		t.Errorf("%s still has static pod manifests: %v", host, entries)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, p := range []string{"kubelet", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			if len(c.Pids(host, p)) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var left []string
		for _, p := range []string{"kubelet", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			if len(c.Pids(host, p)) > 0 {
				left = append(left, p)
			}
		}
		t.Errorf("%s still runs %v after reset", host, left)
	}
}

// TestCommandsEndToEnd runs, once each in the lab, what no other test runs end to end:
// --dry-run, --config, join phase by phase, token create --format kubeadm.
func TestCommandsEndToEnd(t *testing.T) {
	c := framework.Get(t)

	t.Run("dry-run changes nothing", func(t *testing.T) {
		c.Host(t, "w2")
		before := hostFiles(t, c, "w2")
		csrsBefore, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r := kjoinJoin(t, c, "w2", "--dry-run", "-o", "json")
		if r.Err != nil {
			t.Fatal(r.Error())
		}
		var out struct {
			DryRun  bool  `json:"dryRun"`
			Changed bool  `json:"changed"`
			Writes  []any `json:"plannedWrites"`
			Actions []any `json:"plannedActions"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
			t.Fatal(err)
		}
		if !out.DryRun || out.Changed || len(out.Writes) == 0 || len(out.Actions) == 0 {
			t.Errorf("dry-run report: %s", r.Stdout)
		}
		if after := hostFiles(t, c, "w2"); !slices.Equal(before, after) {
			t.Errorf("--dry-run changed the host's files:\nbefore %v\nafter  %v", before, after)
		}
		if len(c.Pids("w2", "kubelet")) > 0 {
			t.Error("--dry-run started the kubelet")
		}
		csrsAfter, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(csrsAfter.Items) != len(csrsBefore.Items) || len(csrsSince(t, c, "w2", start)) != 0 {
			t.Errorf("--dry-run created a CSR (%d → %d)", len(csrsBefore.Items), len(csrsAfter.Items))
		}
		if _, err := c.Client.CoreV1().Nodes().Get(context.Background(), "w2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("--dry-run: Node w2 exists or the lookup failed: %v", err)
		}
	})

	t.Run("--config with a JoinConfiguration", func(t *testing.T) {
		c.Host(t, "w3")
		cfg := writeJoinConfig(t, c, "w3", "nodeRegistration:\n  name: w3\n  kubeletExtraArgs:\n  - name: node-labels\n    value: kjoin.dev/from-config=yes\n")
		c.MustRun(t, "w3", "kjoin", "join", "--config", cfg)
		n := c.WaitNodeCondition(t, "w3", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
		if n.Labels["kjoin.dev/from-config"] != "yes" || n.Labels["kjoin.dev/joined-by"] != "kjoin" {
			t.Errorf("the config's node-labels and kjoin's own did not both reach the kubelet: labels %v", n.Labels)
		}
	})

	t.Run("join phase by phase", func(t *testing.T) {
		c.Host(t, "w4")
		writeToken(t, c, "w4", lab.Token)
		base := []string{lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash}
		for _, p := range []string{"preflight", "discovery", "version-check", "tls-bootstrap", "kubelet-config", "kubelet-start", "wait-ready"} {
			r := c.MustRun(t, "w4", append([]string{"kjoin", "join", "phase", p}, append(base, "-o", "json")...)...)
			var out output.JoinResult
			if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
				t.Fatal(err)
			}
			ran := false
			for _, ph := range out.Phases {
				ran = ran || ph.Name == p && ph.Status != "skipped"
			}
			if !ran {
				t.Errorf("join phase %s did not run it: %s", p, r.Stdout)
			}
		}
		c.WaitNodeCondition(t, "w4", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
		assertNoPendingCSR(t, c, "w4")
	})

	t.Run("token create --format kubeadm", func(t *testing.T) {
		c.Host(t, "w5")
		r := c.MustRun(t, "cp1", "kjoin", "token", "create", "--print-join-command", "--format", "kubeadm")
		cmd := strings.TrimSpace(r.Stdout)
		if !strings.HasPrefix(cmd, "kubeadm join ") {
			t.Fatalf("--format kubeadm printed %q", cmd)
		}
		c.MustRun(t, "w5", append(strings.Fields(cmd), "--ignore-preflight-errors=all")...)
		c.WaitNodeCondition(t, "w5", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	})
}
