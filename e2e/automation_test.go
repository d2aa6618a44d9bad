//go:build e2e

package e2e

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
)

var workerPhases = []string{"preflight", "discovery", "version-check", "tls-bootstrap", "kubelet-config", "kubelet-start"}
var controlPlanePhases = []string{"preflight", "discovery", "control-plane-prepare", "tls-bootstrap", "kubelet-config", "kubelet-start", "etcd-join", "control-plane-start", "mark-control-plane", "wait-control-plane"}

// joinFilesMtimes records the mtimes of every file a join writes on host.
func joinFilesMtimes(t *testing.T, c *framework.Cluster, host string, cp bool) map[string]time.Time {
	t.Helper()
	files := append([]string{}, joinFiles...)
	if cp {
		files = append(files, "/etc/kubernetes/admin.conf", "/etc/kubernetes/manifests/etcd.yaml", "/etc/kubernetes/manifests/kube-apiserver.yaml",
			"/etc/kubernetes/pki/apiserver.crt", "/etc/kubernetes/pki/etcd/peer.crt", "/etc/kubernetes/pki/ca.key")
	}
	out := map[string]time.Time{}
	for _, f := range files {
		st, err := os.Lstat(c.HostPath(host, f))
		if err != nil {
			t.Fatalf("%s:%s: %v", host, f, err)
		}
		out[f] = st.ModTime()
	}
	return out
}

func assertUnchangedRerun(t *testing.T, c *framework.Cluster, host string, r lab.Result, before map[string]time.Time) {
	t.Helper()
	if r.ExitCode != 0 {
		t.Fatalf("re-run exit %d: %s", r.ExitCode, r.Stderr)
	}
	out := framework.Answer[output.JoinResult](t, r)
	if out.Changed {
		t.Errorf("re-run on a joined node reports changed: %s", r.Stdout)
	}
	for _, p := range out.Phases {
		if p.Status == "ran" && p.Name != "preflight" && p.Name != "discovery" && p.Name != "version-check" && !strings.HasPrefix(p.Name, "wait-") {
			t.Errorf("phase %s ran on a joined node", p.Name)
		}
	}
	for f, m := range before {
		if st, err := os.Lstat(c.HostPath(host, f)); err != nil || !st.ModTime().Equal(m) {
			t.Errorf("%s was rewritten by the re-run", f)
		}
	}
}

// TestRerunResetRejoin: re-running a join on a joined worker and control plane changes
// nothing; reset then join again works for both roles, and reset works on a kubeadm-joined worker.
func TestRerunResetRejoin(t *testing.T) {
	c := framework.Get(t)
	t.Run("worker", func(t *testing.T) {
		c.Host(t, "w5")
		if r := kjoinJoin(t, c, "w5"); r.Err != nil {
			t.Fatalf("%v", r.Error())
		}
		before := joinFilesMtimes(t, c, "w5", false)
		r := kjoinJoin(t, c, "w5", "-o", "json")
		assertUnchangedRerun(t, c, "w5", r, before)
		text := kjoinJoin(t, c, "w5")
		if !strings.Contains(text.Stdout, "already joined") {
			t.Errorf("text re-run does not say already joined: %s", text.Stdout)
		}

		pod := runPausePod(t, c, "w5")
		if n := podContainers(t, c, "w5", pod); n == 0 {
			t.Fatalf("pod %s (UID %s) runs, but the runtime on w5 holds none of its containers", pod.Name, pod.UID)
		}
		// A dry run lists the pod and everything else, and changes nothing.
		dry := framework.Answer[output.ResetResult](t, c.MustRun(t, "w5", "kjoin", "reset", "--dry-run", "-o", "json"))
		plan := strings.Join(dry.PlannedActions, "\n")
		for _, want := range []string{"systemctl stop kubelet", "remove pod default/" + pod.Name + " ", "remove /etc/kubernetes/kubelet.conf", "remove the join journal"} {
			if !strings.Contains(plan, want) {
				t.Errorf("reset --dry-run's plan lacks %q:\n%s", want, plan)
			}
		}
		if !dry.DryRun || dry.Changed || len(dry.RemovedFiles) > 0 || len(dry.RemovedPods) > 0 || dry.KubeletStopped {
			t.Errorf("reset --dry-run reports a change: %+v", dry)
		}
		for _, f := range joinFiles {
			if _, err := os.Lstat(c.HostPath("w5", f)); err != nil {
				t.Errorf("reset --dry-run removed %s", f)
			}
		}
		if c.Run(t, "w5", "systemctl", "is-active", "--quiet", "kubelet").ExitCode != 0 || podContainers(t, c, "w5", pod) == 0 {
			t.Error("reset --dry-run stopped the kubelet or the pod")
		}

		done := framework.Answer[output.ResetResult](t, c.MustRun(t, "w5", "kjoin", "reset", "-o", "json"))
		if !slices.Contains(done.RemovedPods, "default/"+pod.Name) {
			t.Errorf("reset removed pods %v, not default/%s", done.RemovedPods, pod.Name)
		}
		if n := podContainers(t, c, "w5", pod); n != 0 {
			t.Errorf("after reset the runtime on w5 still holds %d containers of pod %s (UID %s)", n, pod.Name, pod.UID)
		}
		for _, f := range joinFiles {
			if _, err := os.Lstat(c.HostPath("w5", f)); err == nil {
				t.Errorf("%s survived reset", f)
			}
		}
		again := c.MustRun(t, "w5", "kjoin", "reset", "-o", "json")
		if !strings.Contains(again.Stdout, `"changed": false`) {
			t.Errorf("second reset: %s", again.Stdout)
		}
		if r := kjoinJoin(t, c, "w5"); r.Err != nil {
			t.Fatalf("rejoin after reset: %v", r.Error())
		}
		c.WaitNodeCondition(t, "w5", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	})
	t.Run("kubeadm-joined worker", func(t *testing.T) {
		c.Host(t, "w6")
		c.MustRun(t, "w6", "kubeadm", "join", lab.Endpoint(), "--token", lab.Token, "--discovery-token-ca-cert-hash", c.CAHash, "--ignore-preflight-errors=all")
		c.WaitNodeCondition(t, "w6", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
		// kjoin recognises the node as already joined to this cluster.
		r := kjoinJoin(t, c, "w6", "-o", "json")
		if r.ExitCode != 0 || framework.Answer[output.JoinResult](t, r).Changed {
			t.Errorf("kjoin on a kubeadm-joined worker: exit %d %s %s", r.ExitCode, r.Stdout, r.Stderr)
		}
		c.MustRun(t, "w6", "kjoin", "reset")
		for _, f := range joinFiles {
			if _, err := os.Lstat(c.HostPath("w6", f)); err == nil {
				t.Errorf("%s survived reset of a kubeadm-joined node", f)
			}
		}
		if r := kjoinJoin(t, c, "w6"); r.Err != nil {
			t.Fatalf("kjoin join after resetting a kubeadm node: %v", r.Error())
		}
	})
	t.Run("control plane", func(t *testing.T) {
		c.Host(t, "cp2")
		key, err := c.UploadCerts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if r := kjoinControlPlane(t, c, "cp2", key); r.Err != nil {
			t.Fatalf("%v", r.Error())
		}
		before := joinFilesMtimes(t, c, "cp2", true)
		r := kjoinControlPlane(t, c, "cp2", key, "-o", "json")
		assertUnchangedRerun(t, c, "cp2", r, before)
		assertEtcdVoters(t, c, 2)

		c.MustRun(t, "cp2", "kjoin", "reset")
		assertEtcdVoters(t, c, 1)
		if r := kjoinControlPlane(t, c, "cp2", key); r.Err != nil {
			t.Fatalf("rejoin after reset: %v", r.Error())
		}
		assertEtcdVoters(t, c, 2)
	})
}

// runPausePod runs a pause pod on host and waits until it runs; it is deleted at the end.
func runPausePod(t *testing.T, c *framework.Cluster, host string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := pausePod(c, host)
	pod.GenerateName = "pause-" + host + "-"
	made, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Pods("default").Delete(context.Background(), made.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	err = wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, made.Name, metav1.GetOptions{})
		return err == nil && p.UID == made.UID && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		c.DumpLogs(t, host)
		t.Fatalf("pod %s (UID %s) on %s is not running: %v", made.Name, made.UID, host, err)
	}
	return made
}

// pausePod is a pause pod bound to host (the lab's own pause image, never pulled, every taint
// tolerated), to be named by the caller.
func pausePod(c *framework.Cluster, host string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: host, Containers: []corev1.Container{{Name: "pause", Image: c.PauseImage, ImagePullPolicy: corev1.PullNever}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}
}

// podContainers counts the containers (the sandbox among them) host's runtime holds for pod,
// as containerd's own client lists them.
func podContainers(t *testing.T, c *framework.Cluster, host string, pod *corev1.Pod) int {
	t.Helper()
	out := c.MustRun(t, host, "ctr", "-n", "k8s.io", "containers", "ls", "-q", `labels."io.kubernetes.pod.uid"==`+string(pod.UID)).Stdout
	return len(strings.Fields(out))
}

// TestResumeAfterKill kills kjoin with SIGKILL after each phase and runs it again: the join
// converges with no duplicate etcd member, no stray learner and no CSR of ours left pending.
func TestResumeAfterKill(t *testing.T) {
	c := framework.Get(t)
	run := func(t *testing.T, host string, phase string) {
		t.Helper()
		env := []string{"KJOIN_FAULT_KILL_AFTER=" + phase}
		writeToken(t, c, host, lab.Token)
		args := []string{"kjoin", "join", lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash}
		start := time.Now()
		killed := c.ExecEnv(context.Background(), host, env, nil, args...)
		if killed.Signal != syscall.SIGKILL {
			t.Fatalf("kjoin was not killed by SIGKILL after %s: exit %d signal %v\n%s", phase, killed.ExitCode, killed.Signal, framework.Tail(killed.Stderr, 20))
		}
		before := csrsSince(t, c, host, start)
		r := c.Run(t, host, append(args, "-o", "json")...)
		if r.Err != nil {
			c.DumpLogs(t, host, "cp1")
			t.Fatalf("resume after kill at %s: %v", phase, r.Error())
		}
		out := framework.Answer[output.JoinResult](t, r)
		after := csrsSince(t, c, host, start)
		if len(before) > 0 {
			// The killed run had made its CSR: the re-run made none.
			if len(after) != len(before) || after[0].UID != before[0].UID {
				t.Errorf("the re-run after a kill at %s made another CSR: before %d, after %d", phase, len(before), len(after))
			}
		} else if len(after) != 1 || out.CSR != after[0].Name || after[0].CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			t.Errorf("want the one CSR the re-run created (%q), have %d", out.CSR, len(after))
		}
		c.WaitNodeCondition(t, host, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		assertNoPendingCSR(t, c, host)
	}
	for _, phase := range workerPhases {
		t.Run("worker/"+phase, func(t *testing.T) {
			c.Host(t, "w7")
			run(t, "w7", phase)
		})
	}
	if testing.Short() { // go test -short: the worker cases only
		return
	}
	key, err := c.UploadCerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The control plane is killed after each phase in turn on one host: each re-run resumes
	// from the journal the killed run left, runs the next phase and is killed after it; the
	// last re-run completes. Every transition a per-phase kill would exercise is exercised,
	// for the price of one join (a fresh host per phase cost make test four minutes).
	t.Run("control-plane", func(t *testing.T) {
		c.Host(t, "cp3")
		writeToken(t, c, "cp3", lab.Token)
		args := []string{"kjoin", "join", lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash,
			"--control-plane", "--certificate-key", key, "--apiserver-advertise-address", c.Hosts["cp3"].IP}
		start := time.Now()
		var killedAfter []string
		for _, phase := range controlPlanePhases {
			killed := c.ExecEnv(context.Background(), "cp3", []string{"KJOIN_FAULT_KILL_AFTER=" + phase}, nil, args...)
			if killed.Signal != syscall.SIGKILL {
				c.DumpLogs(t, "cp3", "cp1")
				t.Fatalf("kjoin, resumed after kills after %v, was not killed by SIGKILL after %s: exit %d signal %v\n%s", killedAfter, phase, killed.ExitCode, killed.Signal, framework.Tail(killed.Stderr, 20))
			}
			killedAfter = append(killedAfter, phase)
			if csrs := csrsSince(t, c, "cp3", start); len(csrs) > 1 {
				t.Fatalf("after kills after %v the node has %d CSRs: a re-run made another", killedAfter, len(csrs))
			}
			if voters, learners := etcdCounts(t, c); voters+learners > 2 || learners > 1 {
				t.Fatalf("after kills after %v etcd has %d voters and %d learners: a re-run added another member", killedAfter, voters, learners)
			}
		}
		r := c.Run(t, "cp3", append(args, "-o", "json")...)
		if r.Err != nil {
			c.DumpLogs(t, "cp3", "cp1")
			t.Fatalf("resume after kills after each of %v: %v", killedAfter, r.Error())
		}
		framework.Answer[output.JoinResult](t, r)
		// One CSR in all (made by the run killed after tls-bootstrap), and it was issued.
		if csrs := csrsSince(t, c, "cp3", start); len(csrs) != 1 || len(csrs[0].Status.Certificate) == 0 {
			t.Errorf("want the one issued CSR the interrupted runs made; have %d", len(csrs))
		}
		c.WaitNodeCondition(t, "cp3", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		assertNoPendingCSR(t, c, "cp3")
		assertEtcdVoters(t, c, 2)
	})
}

// etcdCounts counts the cluster's etcd voters and learners.
func etcdCounts(t *testing.T, c *framework.Cluster) (voters, learners int) {
	t.Helper()
	ms, err := c.EtcdMembers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Learner {
			learners++
		} else {
			voters++
		}
	}
	return voters, learners
}

// csrsSince is the node's kjoin CSRs created since start (host names are reused by tests).
func csrsSince(t *testing.T, c *framework.Cluster, node string, start time.Time) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	var out []certificatesv1.CertificateSigningRequest
	for _, csr := range nodeCSRs(t, c, node) {
		if !csr.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			out = append(out, csr)
		}
	}
	return out
}

func assertNoPendingCSR(t *testing.T, c *framework.Cluster, node string) {
	t.Helper()
	csrs, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, csr := range csrs.Items {
		if !strings.HasPrefix(csr.Name, "kjoin-"+node+"-") {
			continue
		}
		issued := len(csr.Status.Certificate) > 0
		for _, cond := range csr.Status.Conditions {
			if cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed {
				issued = true
			}
		}
		if !issued {
			t.Errorf("CSR %s of ours is left pending", csr.Name)
		}
	}
}
