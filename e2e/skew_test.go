//go:build e2e

package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kjoin.dev/kjoin/e2e/framework"
)

// TestKubeletThreeMinorsBehind: a worker whose kubelet is v1.34.4, three minors behind the
// v1.37.2 cluster (the skew kubeadm allows), joins with kjoin and goes Ready with that very
// kubelet: what kjoin writes for the kubelet (config.yaml from the cluster's kubelet-config,
// instance-config.yaml, flags) is something a v1.34 kubelet accepts. verify passes, diagnose
// is healthy, and reset leaves none of the join's files.
func TestKubeletThreeMinorsBehind(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "w6")
	if err := c.UseKubelet("w6", "v1.34.4"); err != nil {
		t.Fatal(err)
	}
	if v := c.MustRun(t, "w6", "kubelet", "--version").Stdout; strings.TrimSpace(v) != "Kubernetes v1.34.4" {
		t.Fatalf("w6's kubelet is %q, want v1.34.4", v)
	}
	start := time.Now()
	r := kjoinJoin(t, c, "w6", "-o", "json")
	out := parseJoinJSON(t, r)
	if r.ExitCode != 0 {
		t.Fatalf("join with a v1.34.4 kubelet: exit %d %s\n%s", r.ExitCode, r.Stdout, tail(r.Stderr, 20))
	}
	if out.KubeletVersion != "v1.34.4" || out.ClusterVersion != "v1.37.2" {
		t.Errorf("the join read kubelet %q and cluster %q, want v1.34.4 and v1.37.2", out.KubeletVersion, out.ClusterVersion)
	}
	n := c.WaitNodeCondition(t, "w6", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	if n.Status.NodeInfo.KubeletVersion != "v1.34.4" {
		t.Errorf("Node w6 reports kubelet %s, want v1.34.4", n.Status.NodeInfo.KubeletVersion)
	}
	assertKubeletCSRIssued(t, c, "w6", start, out.CSR)
	assertVerified(t, c, 0, "w6")
	waitDiagnosis(t, c, "w6", "", time.Minute)
	c.MustRun(t, "w6", "kjoin", "reset", "-f")
	for _, f := range joinFiles {
		if _, err := os.Lstat(c.HostPath("w6", f)); err == nil {
			t.Errorf("reset left %s", f)
		}
	}
}
