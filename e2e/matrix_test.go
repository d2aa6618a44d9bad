//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/matrix"
	"kjoin.dev/kjoin/output"
)

// TestMatrixCell is the compact suite of one compatibility cell (make matrix, KJOIN_MATRIX_CELL
// set; a fresh lab at the cell's Kubernetes version, KJOIN_MATRIX_KUBELET for the worker's
// kubelet, KJOIN_MATRIX_RUNTIME for the joined nodes' container runtime): kjoin worker join → Ready → verify; kjoin control-plane join → two etcd voters →
// verify, its manifests byte-equal to that minor's kubeadm on the same node and its etcd image
// the cluster's; diagnose healthy on both; reset of both leaves none of the join's files.
func TestMatrixCell(t *testing.T) {
	cell := framework.Env().MatrixCell
	if cell == "" || framework.Env().MatrixUpgradeTo != "" {
		t.Skip("KJOIN_MATRIX_CELL not set, or an upgrade cell (make matrix)")
	}
	c := framework.Get(t)
	rec := startCell(t, c, cell)
	defer rec.finish()
	step := rec.step
	res := &rec.res

	if rt := framework.Env().MatrixRuntime; rt != "" {
		for _, h := range []string{"w1", "cp2"} {
			if err := c.UseRuntime(h, rt); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.Host(t, "w1")
	if framework.Env().MatrixRuntime != "" {
		res.Runtime = strings.TrimSpace(c.MustRun(t, "w1", "containerd", "--version").Stdout)
	}
	if k := framework.Env().MatrixKubelet; k != "" {
		if err := c.UseKubelet("w1", k); err != nil {
			t.Fatal(err)
		}
	}
	res.WorkerKubelet = strings.TrimPrefix(strings.TrimSpace(c.MustRun(t, "w1", "kubelet", "--version").Stdout), "Kubernetes ")
	var joined output.JoinResult
	step("worker join", func() error {
		r := kjoinJoin(t, c, "w1", "-o", "json")
		if r.Err != nil {
			return fmt.Errorf("exit %d: %s", r.ExitCode, framework.Tail(r.Stderr, 5))
		}
		joined = framework.Answer[output.JoinResult](t, r)
		n := c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		if n.Status.NodeInfo.KubeletVersion != res.WorkerKubelet {
			return fmt.Errorf("Node w1 reports kubelet %s, the host runs %s", n.Status.NodeInfo.KubeletVersion, res.WorkerKubelet)
		}
		return nil
	})
	step("the join knows the runtime", func() error { return checkRuntimeReport(c, "w1", joined, res.Runtime) })
	if c.Family != "" && c.Family != "ipv4" {
		step("node and pod addresses of the lab's family", func() error { return checkFamily(t, c, "w1") })
	}
	step("worker verify", func() error { assertVerified(t, c, 0, "w1"); return nil })

	c.Host(t, "cp2")
	res.ControlKubelet = strings.TrimPrefix(strings.TrimSpace(c.MustRun(t, "cp2", "kubelet", "--version").Stdout), "Kubernetes ")
	key, err := c.UploadCerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if step("control-plane join", func() error {
		if r := kjoinControlPlane(t, c, "cp2", key); r.Err != nil {
			return fmt.Errorf("exit %d: %s", r.ExitCode, framework.Tail(r.Stderr, 5))
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
		d := waitDiagnosis(t, c, "w1", "", time.Minute)
		waitDiagnosis(t, c, "cp2", "", time.Minute)
		// diagnose's runtime checks read the same runtime the join did.
		for _, ch := range d.Checks {
			if ch.ID == "cri.version" && (ch.Status != "pass" || joined.Runtime == nil || ch.Summary != joined.Runtime.Name+" "+joined.Runtime.Version) {
				return fmt.Errorf("diagnose cri.version: %s %q", ch.Status, ch.Summary)
			}
			if ch.ID == "cri.sandbox" && ch.Status != "pass" {
				return fmt.Errorf("diagnose cri.sandbox: %s %q (%s)", ch.Status, ch.Summary, ch.Evidence)
			}
		}
		return nil
	})
	step("reset leaves nothing", func() error { return resetLeavesNothing(t, c, "w1", "cp2") })
}

// resetLeavesNothing runs kjoin reset on each joined host and checks that none of the join's
// files remain and that etcd is back to cp1 alone.
func resetLeavesNothing(t *testing.T, c *framework.Cluster, hosts ...string) error {
	for _, h := range hosts {
		if r := c.Run(t, h, "kjoin", "reset", "-f"); r.Err != nil {
			return fmt.Errorf("%s: exit %d: %s", h, r.ExitCode, framework.Tail(r.Stderr, 5))
		}
		for _, f := range append(append([]string{}, joinFiles...), "/etc/kubernetes/manifests/etcd.yaml", "/etc/kubernetes/manifests/kube-apiserver.yaml", "/var/lib/kjoin/journal.json") {
			if _, err := os.Lstat(c.HostPath(h, f)); err == nil {
				return fmt.Errorf("%s: reset left %s", h, f)
			}
		}
	}
	assertEtcdVoters(t, c, 1)
	return nil
}

// checkRuntimeReport compares what the join says of host's runtime (JSON runtime, warnings)
// with the runtime itself (its own --version line): the version, RuntimeConfig answered by
// containerd 2 and not by 1.x (a warning naming it then), and the sandbox image the lab
// configured, which is the cluster's pause image (no sandbox warning).
func checkRuntimeReport(c *framework.Cluster, host string, j output.JoinResult, versionLine string) error {
	rt := j.Runtime
	if rt == nil {
		return fmt.Errorf("the join's JSON has no runtime")
	}
	if !strings.Contains(versionLine, " "+rt.Version) && !strings.Contains(versionLine, " "+strings.TrimPrefix(rt.Version, "v")) {
		return fmt.Errorf("the join read %s %s, %s's containerd says %q", rt.Name, rt.Version, host, versionLine)
	}
	warned := strings.Contains(strings.Join(j.Warnings, "\n"), "RuntimeConfig")
	v2 := strings.HasPrefix(strings.TrimPrefix(rt.Version, "v"), "2.")
	if rt.RuntimeConfig != v2 || warned == v2 {
		return fmt.Errorf("runtime %s: RuntimeConfig %v, warned %v (warnings %q)", rt.Version, rt.RuntimeConfig, warned, j.Warnings)
	}
	if rt.SandboxImage != "" && rt.SandboxImage != c.PauseImage {
		return fmt.Errorf("the join read sandbox image %s (from %s), the lab configured %s", rt.SandboxImage, rt.SandboxImageFrom, c.PauseImage)
	}
	if strings.Contains(strings.Join(j.Warnings, "\n"), "sandbox image") {
		return fmt.Errorf("a sandbox image warning for the cluster's own pause image: %q", j.Warnings)
	}
	return nil
}

// checkFamily checks a joined node's addresses on an IPv6 or dual-stack lab: the Node's
// InternalIPs are the host's node IPs (dual: both families), and a pod on it gets an address
// of each family the cluster has.
func checkFamily(t *testing.T, c *framework.Cluster, host string) error {
	ctx := context.Background()
	h := c.Hosts[host]
	want := []string{h.IP6}
	if c.Family == "dual" {
		want = []string{h.IP4, h.IP6}
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, host, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var internal []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if strings.Join(internal, ",") != strings.Join(want, ",") {
		return fmt.Errorf("Node %s InternalIPs %v, want %v", host, internal, want)
	}
	pod := pausePod(c, host)
	pod.Name = "family-" + host
	made, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	defer func() {
		_ = c.Client.CoreV1().Pods("default").Delete(ctx, made.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}()
	var ips []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, made.Name, metav1.GetOptions{})
		if err != nil || p.UID != made.UID {
			return false, nil
		}
		ips = nil
		for _, ip := range p.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return p.Status.Phase == corev1.PodRunning && len(ips) == len(want), nil
	})
	if err != nil {
		return fmt.Errorf("pod %s (UID %s) on %s: addresses %v, want one per family %v: %w", made.Name, made.UID, host, ips, want, err)
	}
	for i, ip := range ips {
		if v4 := net.ParseIP(ip).To4() != nil; v4 != (net.ParseIP(want[i]).To4() != nil) {
			return fmt.Errorf("pod %s's address %d is %s, not of %s's family", made.Name, i, ip, want[i])
		}
	}
	t.Logf("pod %s on %s: %v", made.Name, host, ips)
	return nil
}

// cellRun records one cell's result: the versions read from the running lab, the steps that
// passed and what failed; finish appends it to KJOIN_MATRIX_RESULTS.
type cellRun struct {
	t   *testing.T
	res matrix.Result
}

func startCell(t *testing.T, c *framework.Cluster, cell string) *cellRun {
	r := &cellRun{t: t, res: matrix.Result{Cell: cell, Date: time.Now().UTC(), KubeadmVersion: c.K8sVersion, PauseImage: c.PauseImage, Failures: []string{}}}
	r.res.EtcdImage = imageOf(c.Images, "etcd")
	r.res.APIServer = apiServerVersion(c)
	r.res.Runtime = strings.TrimSpace(c.MustRun(t, "cp1", "containerd", "--version").Stdout)
	r.res.EtcdVersion = etcdMemberVersion(c, "cp1")
	return r
}

// step runs one named step; a returned error or a failed assertion is the cell's failure.
func (r *cellRun) step(name string, f func() error) bool {
	failedBefore := r.t.Failed()
	err := f()
	if err == nil && !failedBefore && r.t.Failed() {
		err = fmt.Errorf("an assertion failed (see the test log)")
	}
	if err != nil {
		r.res.Failures = append(r.res.Failures, name+": "+err.Error())
		r.t.Errorf("%s: %v", name, err)
		return false
	}
	r.res.Steps = append(r.res.Steps, name)
	return true
}

func (r *cellRun) finish() {
	r.res.Pass = len(r.res.Failures) == 0 && !r.t.Failed()
	if r.t.Failed() && len(r.res.Failures) == 0 {
		r.res.Failures = append(r.res.Failures, "the test failed (see its log)")
	}
	if p := framework.Env().MatrixResults; p != "" {
		b, _ := json.Marshal(r.res)
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.Write(append(b, '\n'))
			f.Close()
		}
	}
}

// imageOf is the reference of a component's image among kubeadm's image list ("" if none).
func imageOf(images []string, component string) string {
	for _, ref := range images {
		if strings.HasPrefix(ref, "registry.k8s.io/"+component+":") {
			return ref
		}
	}
	return ""
}

func apiServerVersion(c *framework.Cluster) string {
	if v, err := c.Client.Discovery().ServerVersion(); err == nil {
		return v.GitVersion
	}
	return ""
}

// etcdMemberVersion is what the etcd member on host says it runs.
func etcdMemberVersion(c *framework.Cluster, host string) string {
	cli, err := c.Etcd()
	if err != nil {
		return ""
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st, err := cli.Status(ctx, "https://"+net.JoinHostPort(c.Hosts[host].IP, "2379")); err == nil {
		return st.Version
	}
	return ""
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
