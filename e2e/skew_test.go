//go:build e2e

package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/output"
)

// TestSkewedKubelet: a worker whose kubelet is older than the cluster (make matrix's kubelet
// cells, KJOIN_MATRIX_KUBELET; v1.34.4 is three minors behind v1.37.2, the skew kubeadm
// allows) joins with kjoin and goes Ready with that very kubelet: what kjoin writes for the kubelet (config.yaml from the cluster's kubelet-config,
// instance-config.yaml, flags) is something a v1.34 kubelet accepts. verify passes, diagnose
// is healthy, and reset leaves none of the join's files.
func TestSkewedKubelet(t *testing.T) {
	want := framework.Env().MatrixKubelet
	if want == "" {
		// Building an old kubelet costs a cold CI 14 minutes: the cell is make matrix's.
		t.Skip("KJOIN_MATRIX_KUBELET not set: a make matrix kubelet cell (v1.37.2:kubelet-v1.34.4)")
	}
	c := framework.Get(t)
	c.Host(t, "w6")
	if err := c.UseKubelet("w6", want); err != nil {
		t.Fatal(err)
	}
	if v := c.MustRun(t, "w6", "kubelet", "--version").Stdout; strings.TrimSpace(v) != "Kubernetes "+want {
		t.Fatalf("w6's kubelet is %q, want %s", v, want)
	}
	start := time.Now()
	r := kjoinJoin(t, c, "w6", "-o", "json")
	out := framework.Answer[output.JoinResult](t, r)
	if r.ExitCode != 0 {
		t.Fatalf("join with a %s kubelet: exit %d %s\n%s", want, r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
	}
	if out.KubeletVersion != want || out.ClusterVersion != c.K8sVersion {
		t.Errorf("the join read kubelet %q and cluster %q, want %s and %s", out.KubeletVersion, out.ClusterVersion, want, c.K8sVersion)
	}
	n := c.WaitNodeCondition(t, "w6", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	if n.Status.NodeInfo.KubeletVersion != want {
		t.Errorf("Node w6 reports kubelet %s, want %s", n.Status.NodeInfo.KubeletVersion, want)
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
