//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"kjoin.dev/kjoin/e2e/framework"
)

// TestWriteGoldenManifests writes real kubeadm's manifests for the lab's fixed
// ClusterConfiguration into $KJOIN_GOLDEN_DIR (manifests/testdata/kubeadm): the control-plane
// components from `kubeadm join phase control-plane-prepare control-plane --dry-run` on cp2
// (10.77.0.12), and etcd.yaml from kubeadm init on cp1. The unit tests of package manifests
// compare kjoin's render with them. It runs only when KJOIN_GOLDEN_DIR is set.
func TestWriteGoldenManifests(t *testing.T) {
	dir := framework.Env().GoldenDir
	if dir == "" {
		t.Skip("KJOIN_GOLDEN_DIR not set")
	}
	c := framework.Get(t)
	h := c.Host(t, "cp2")
	// With admin.conf present and --control-plane, kubeadm skips discovery (its re-run rule)
	// and renders the manifests from the cluster's ClusterConfiguration.
	admin, err := c.ReadFile("cp1", "/etc/kubernetes/admin.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.HostPath("cp2", "/etc/kubernetes/admin.conf"), admin, 0o600); err != nil {
		t.Fatal(err)
	}
	c.MustRun(t, "cp2", "kubeadm", "join", "phase", "control-plane-prepare", "control-plane", "--control-plane", "--apiserver-advertise-address", h.IP, "--dry-run")
	dry, _ := filepath.Glob(c.HostPath("cp2", "/etc/kubernetes/tmp/kubeadm-join-dryrun*"))
	if len(dry) == 0 {
		t.Fatal("kubeadm wrote no dry-run manifests")
	}
	copyFile := func(src, name string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s from %s", name, src)
	}
	for _, m := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		copyFile(filepath.Join(dry[0], m+".yaml"), m+".yaml")
	}
	copyFile(c.HostPath("cp1", "/etc/kubernetes/manifests/etcd.yaml"), "etcd-init-cp1.yaml")
	b, err := c.ReadFile("cp1", "/run/lab/kubeadm-init.yaml")
	if err == nil {
		_ = os.WriteFile(filepath.Join(dir, "kubeadm-init-config.yaml"), b, 0o644)
	}
}
