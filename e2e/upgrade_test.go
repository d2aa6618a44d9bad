//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
)

// TestMatrixUpgrade is the matrix's upgrade cell (make matrix, a cell VERSION:upgrade-TARGET;
// KJOIN_MATRIX_UPGRADE_TO is the target's component build): on a cluster that kubeadm init
// made at VERSION, kjoin joins a control plane (cp2) and a worker (w1); then the upgrade goes
// as kubeadm documents it: the new kubeadm and images on every host, `kubeadm upgrade apply
// TARGET` on cp1, its kubelet replaced and restarted, then on each kjoin-joined node `kubeadm
// upgrade node` and the kubelet replaced and restarted. Afterwards every node is Ready with a
// TARGET kubelet, the API server and cp2's static pods run TARGET, etcd has two voters and
// runs the target's etcd, `kjoin verify` passes for both nodes, and `kjoin reset` still undoes
// the join on both.
func TestMatrixUpgrade(t *testing.T) {
	cell, target := framework.Env().MatrixCell, framework.Env().MatrixUpgradeTo
	if cell == "" || target == "" {
		t.Skip("not an upgrade cell (make matrix with a VERSION:upgrade-TARGET cell)")
	}
	c := framework.Get(t)
	rec := startCell(t, c, cell)
	defer rec.finish()
	step := rec.step
	ctx := context.Background()
	nodes := []string{"cp1", "cp2", "w1"}
	defer func() {
		if t.Failed() {
			c.DumpLogs(t, nodes...)
		}
	}()

	c.Host(t, "w1")
	c.Host(t, "cp2")
	if !step("worker join", func() error {
		if r := kjoinJoin(t, c, "w1"); r.Err != nil {
			return fmt.Errorf("exit %d: %s", r.ExitCode, framework.Tail(r.Stderr, 5))
		}
		c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		return nil
	}) {
		return
	}
	key, err := c.UploadCerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !step("control-plane join", func() error {
		if r := kjoinControlPlane(t, c, "cp2", key); r.Err != nil {
			return fmt.Errorf("exit %d: %s", r.ExitCode, framework.Tail(r.Stderr, 5))
		}
		assertEtcdVoters(t, c, 2)
		return nil
	}) {
		return
	}

	rel, err := c.LoadRelease(ctx, target, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if rel.K8sVersion == c.K8sVersion {
		t.Fatalf("the upgrade target %s is the cluster's own version", rel.K8sVersion)
	}
	for _, h := range nodes {
		if err := c.StageRelease(ctx, h, rel); err != nil {
			t.Fatal(err)
		}
	}
	// upgradeNode replaces a host's kubelet with the release's and restarts it, as the kubelet
	// package upgrade after `kubeadm upgrade` does.
	upgradeKubelet := func(h string) error {
		if err := c.UseProgram(h, "kubelet", filepath.Join(rel.BinDir, "kubelet")); err != nil {
			return err
		}
		if r := c.Run(t, h, "systemctl", "restart", "kubelet"); r.Err != nil {
			return r.Error()
		}
		return nil
	}
	// Lab artifacts, not kjoin's: this machine runs cgroup v1, where kubeadm's
	// SystemVerification is an error that must be skipped explicitly (the lab's kubelets set
	// failCgroupV1: false, as for kubeadm init); the lab cluster has no CoreDNS (init skipped
	// addon/coredns), whose absence kubeadm upgrade apply's CoreDNS checks report as errors.
	const cgroupV1 = "--ignore-preflight-errors=SystemVerification"
	const noCoreDNS = "--ignore-preflight-errors=CoreDNSUnsupportedPlugins,CoreDNSMigration"
	if !step("kubeadm upgrade apply on cp1", func() error {
		r := c.Run(t, "cp1", "kubeadm", "upgrade", "apply", rel.K8sVersion, "--yes", cgroupV1, noCoreDNS, "--v=1")
		if r.Err != nil {
			return fmt.Errorf("exit %d: %s", r.ExitCode, framework.Tail(r.Stdout+r.Stderr, 15))
		}
		return upgradeKubelet("cp1")
	}) {
		return
	}
	for _, h := range []string{"cp2", "w1"} {
		if !step("kubeadm upgrade node on "+h, func() error {
			r := c.Run(t, h, "kubeadm", "upgrade", "node", cgroupV1, "--v=1")
			if r.Err != nil {
				return fmt.Errorf("exit %d: %s", r.ExitCode, framework.Tail(r.Stdout+r.Stderr, 15))
			}
			return upgradeKubelet(h)
		}) {
			return
		}
	}
	rec.res.UpgradedTo = apiServerVersion(c)
	step("every node Ready at the target", func() error {
		for _, h := range nodes {
			if err := waitKubelet(c, h, rel.K8sVersion, 3*time.Minute); err != nil {
				return err
			}
		}
		if rec.res.UpgradedTo != rel.K8sVersion {
			return fmt.Errorf("the API server reports %s, want %s", rec.res.UpgradedTo, rel.K8sVersion)
		}
		return nil
	})
	rec.res.WorkerKubelet, rec.res.ControlKubelet = nodeKubelet(c, "w1"), nodeKubelet(c, "cp2")
	step("cp2's static pods run the target", func() error {
		for _, m := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"} {
			b, err := os.ReadFile(c.HostPath("cp2", "/etc/kubernetes/manifests/"+m+".yaml"))
			if err != nil {
				return err
			}
			want := imageOf(rel.Images, m)
			if want == "" || !strings.Contains(string(b), "image: "+want+"\n") {
				return fmt.Errorf("cp2's %s.yaml does not run %q (the target's image)", m, want)
			}
		}
		return waitStaticPodsRunning(c, "cp2", rel, 3*time.Minute)
	})
	step("etcd has two voters", func() error { assertEtcdVoters(t, c, 2); return nil })
	rec.res.EtcdVersion = etcdMemberVersion(c, "cp2")
	rec.res.EtcdImage = imageOf(rel.Images, "etcd")
	step("kjoin verify", func() error { assertVerified(t, c, 2, "cp2", "w1"); return nil })
	step("kjoin reset undoes both joins", func() error { return resetLeavesNothing(t, c, "w1", "cp2") })
}

// waitKubelet waits for a Node that is Ready and reports kubelet version want.
func waitKubelet(c *framework.Cluster, name, want string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = n.Status.NodeInfo.KubeletVersion + " " + readyStatus(n)
		return n.Status.NodeInfo.KubeletVersion == want && readyStatus(n) == "Ready=True", nil
	})
	if err != nil {
		return fmt.Errorf("node %s: not Ready with kubelet %s within %s (last: %s)", name, want, timeout, last)
	}
	return nil
}

func readyStatus(n *corev1.Node) string {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return "Ready=" + string(cond.Status)
		}
	}
	return "Ready=Unknown"
}

func nodeKubelet(c *framework.Cluster, name string) string {
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return n.Status.NodeInfo.KubeletVersion
}

// waitStaticPodsRunning waits until host's control-plane mirror pods run the release's images
// and are Ready.
func waitStaticPodsRunning(c *framework.Cluster, host string, rel *lab.Release, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		for _, m := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"} {
			p, err := c.Client.CoreV1().Pods("kube-system").Get(ctx, m+"-"+host, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			ready := false
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			img := p.Spec.Containers[0].Image
			if !ready || !slices.Contains(rel.Images, img) {
				last = fmt.Sprintf("%s: image %s, ready %v", p.Name, img, ready)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s's control-plane pods: %w (last: %s)", host, err, last)
	}
	return nil
}
