//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/matrix"
)

// TestMatrixCell is the compact suite of one compatibility cell (make matrix, KJOIN_MATRIX_CELL
// set; a fresh lab at the cell's Kubernetes version, KJOIN_MATRIX_KUBELET for the worker's
// kubelet): kjoin worker join → Ready → verify; kjoin control-plane join → two etcd voters →
// verify, its manifests byte-equal to that minor's kubeadm on the same node and its etcd image
// the cluster's; diagnose healthy on both; reset of both leaves none of the join's files.
func TestMatrixCell(t *testing.T) {
	cell := os.Getenv("KJOIN_MATRIX_CELL")
	if cell == "" {
		t.Skip("KJOIN_MATRIX_CELL not set (make matrix)")
	}
	c := framework.Get(t)
	res := matrix.Result{Cell: cell, Date: time.Now().UTC(), KubeadmVersion: c.K8sVersion, PauseImage: c.PauseImage, Failures: []string{}}
	for _, ref := range c.Images {
		if strings.Contains(ref, "/etcd:") {
			res.EtcdImage = ref
		}
	}
	if v, err := c.Client.Discovery().ServerVersion(); err == nil {
		res.APIServer = v.GitVersion
	}
	res.Runtime = strings.TrimSpace(c.MustRun(t, "cp1", "containerd", "--version").Stdout)
	if cli, err := c.Etcd(); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if st, err := cli.Status(ctx, "https://"+c.Hosts["cp1"].IP+":2379"); err == nil {
			res.EtcdVersion = st.Version // what the running member says it is
		}
		cancel()
		cli.Close()
	}
	step := func(name string, f func() error) bool {
		failedBefore := t.Failed()
		err := f()
		if err == nil && !failedBefore && t.Failed() {
			err = fmt.Errorf("an assertion failed (see the test log)")
		}
		if err != nil {
			res.Failures = append(res.Failures, name+": "+err.Error())
			t.Errorf("%s: %v", name, err)
			return false
		}
		res.Steps = append(res.Steps, name)
		return true
	}
	defer func() {
		res.Pass = len(res.Failures) == 0 && !t.Failed()
		if t.Failed() && len(res.Failures) == 0 {
			res.Failures = append(res.Failures, "the test failed (see its log)")
		}
		if p := os.Getenv("KJOIN_MATRIX_RESULTS"); p != "" {
			b, _ := json.Marshal(res)
			f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				_, _ = f.Write(append(b, '\n'))
				f.Close()
			}
		}
	}()

	c.Host(t, "w1")
	if k := os.Getenv("KJOIN_MATRIX_KUBELET"); k != "" {
		if err := c.UseKubelet("w1", k); err != nil {
			t.Fatal(err)
		}
	}
	res.WorkerKubelet = strings.TrimPrefix(strings.TrimSpace(c.MustRun(t, "w1", "kubelet", "--version").Stdout), "Kubernetes ")
	step("worker join", func() error {
		if r := kjoinJoin(t, c, "w1"); r.Err != nil {
			return fmt.Errorf("exit %d: %s", r.ExitCode, tail(r.Stderr, 5))
		}
		n := c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		if n.Status.NodeInfo.KubeletVersion != res.WorkerKubelet {
			return fmt.Errorf("Node w1 reports kubelet %s, the host runs %s", n.Status.NodeInfo.KubeletVersion, res.WorkerKubelet)
		}
		return nil
	})
	step("worker verify", func() error { assertVerified(t, c, 0, "w1"); return nil })

	c.Host(t, "cp2")
	res.ControlKubelet = strings.TrimPrefix(strings.TrimSpace(c.MustRun(t, "cp2", "kubelet", "--version").Stdout), "Kubernetes ")
	key, err := c.UploadCerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if step("control-plane join", func() error {
		if r := kjoinControlPlane(t, c, "cp2", key); r.Err != nil {
			return fmt.Errorf("exit %d: %s", r.ExitCode, tail(r.Stderr, 5))
		}
		assertEtcdVoters(t, c, 2)
		return nil
	}) {
		step("control-plane verify", func() error { assertVerified(t, c, 2, "cp2"); return nil })
		step("manifests equal kubeadm's", func() error { return manifestsMatchKubeadm(t, c, "cp2") })
		step("etcd image is the cluster's", func() error {
			cp1, err := c.Client.CoreV1().Pods("kube-system").Get(context.Background(), "etcd-cp1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			b, err := os.ReadFile(c.HostPath("cp2", "/etc/kubernetes/manifests/etcd.yaml"))
			if err != nil {
				return err
			}
			if want := cp1.Spec.Containers[0].Image; !strings.Contains(string(b), "image: "+want+"\n") {
				return fmt.Errorf("cp2's etcd manifest does not run cp1's image %s", want)
			}
			return nil
		})
	}
	step("diagnose healthy", func() error {
		waitDiagnosis(t, c, "w1", "", time.Minute)
		waitDiagnosis(t, c, "cp2", "", time.Minute)
		return nil
	})
	step("reset leaves nothing", func() error {
		for _, h := range []string{"w1", "cp2"} {
			if r := c.Run(t, h, "kjoin", "reset", "-f"); r.Err != nil {
				return fmt.Errorf("%s: exit %d: %s", h, r.ExitCode, tail(r.Stderr, 5))
			}
			for _, f := range append(append([]string{}, joinFiles...), "/etc/kubernetes/manifests/etcd.yaml", "/etc/kubernetes/manifests/kube-apiserver.yaml", "/var/lib/kjoin/journal.json") {
				if _, err := os.Lstat(c.HostPath(h, f)); err == nil {
					return fmt.Errorf("%s: reset left %s", h, f)
				}
			}
		}
		assertEtcdVoters(t, c, 1)
		return nil
	})
}

// manifestsMatchKubeadm compares the control-plane manifests kjoin wrote on host with what
// that cluster's real kubeadm renders for the same node (join phase control-plane-prepare
// --dry-run, reading the cluster's ClusterConfiguration with the node's admin.conf).
func manifestsMatchKubeadm(t *testing.T, c *framework.Cluster, host string) error {
	t.Helper()
	if r := c.Run(t, host, "kubeadm", "join", "phase", "control-plane-prepare", "control-plane", "--control-plane",
		"--apiserver-advertise-address", c.Hosts[host].IP, "--dry-run"); r.Err != nil {
		return fmt.Errorf("kubeadm dry-run: %v", r.Error())
	}
	dry, _ := filepath.Glob(c.HostPath(host, "/etc/kubernetes/tmp/kubeadm-join-dryrun*"))
	if len(dry) == 0 {
		return fmt.Errorf("kubeadm wrote no dry-run manifests")
	}
	defer func() {
		for _, d := range dry {
			_ = os.RemoveAll(d)
		}
	}()
	for _, m := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		want, err := os.ReadFile(filepath.Join(dry[0], m+".yaml"))
		if err != nil {
			return err
		}
		got, err := os.ReadFile(c.HostPath(host, "/etc/kubernetes/manifests/"+m+".yaml"))
		if err != nil {
			return err
		}
		if string(got) != string(want) {
			return fmt.Errorf("%s.yaml differs from kubeadm's:\n--- kjoin\n%s\n--- kubeadm\n%s", m, got, want)
		}
	}
	return nil
}
