//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/tlsbootstrap"
)

// TestLeave: a worker kjoin joined leaves the cluster. A PodDisruptionBudget that allows no
// disruption holds the drain: killed mid-drain (SIGKILL) and stopped at its timeout, the node
// is cordoned and nothing else touched. Once the budget allows one disruption, the same
// command continues: the ReplicaSet's two pods move to cp1 one at a time (the budget refuses
// the second eviction until the first pod's replacement is ready; a watch of our own sees
// the healthy count never drop below the budget), the kubelet stops, the Node, its Lease and
// its CSRs are deleted and the join's files removed. Again, it changes nothing. Then kubeadm
// joins the same host and it leaves with the node's own credentials.
func TestLeave(t *testing.T) {
	c := framework.Get(t)
	ctx := context.Background()
	c.Host(t, "w5")
	if r := kjoinJoin(t, c, "w5"); r.Err != nil {
		t.Fatalf("%v", r.Error())
	}
	c.WaitNodeCondition(t, "w5", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	assertLeaseRenews(t, c, "w5") // the Lease leave must delete exists, and the kubelet renews it
	// Admin credentials on the node (leave's --kubeconfig): cp1's admin.conf.
	admin, err := c.ReadFile("cp1", "/etc/kubernetes/admin.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.HostPath("w5", "/root"), "admin.conf"), admin, 0o600); err != nil {
		t.Fatal(err)
	}

	// A ReplicaSet's two pods on w5, guarded by a budget that allows no disruption.
	pods := startReplicaSet(t, c, "leave-web", 2)
	budget(t, c, 2, 0)
	var csrs []string
	list, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if tlsbootstrap.IsNodeCSR(&list.Items[i], "w5") {
			csrs = append(csrs, list.Items[i].Name)
		}
	}
	if len(csrs) == 0 {
		t.Fatal("w5's join left no CSR of its own to delete")
	}
	leave := []string{"kjoin", "leave", "-f", "--kubeconfig", "/root/admin.conf", "-o", "json"}

	// The dry run lists every step and changes nothing.
	dry := framework.Answer[output.LeaveResult](t, c.MustRun(t, "w5", append(leave, "--dry-run")...))
	plan := strings.Join(dry.PlannedActions, "\n")
	for _, want := range []string{`cordon Node "w5"`, "evict pod default/" + pods[0].Name, "evict pod default/" + pods[1].Name, "systemctl stop kubelet",
		`delete Node "w5"`, "delete Lease kube-node-lease/w5", "delete CSR " + csrs[0]} {
		if !strings.Contains(plan, want) {
			t.Errorf("leave --dry-run's plan lacks %q:\n%s\nwarnings %q, left %q", want, plan, dry.Warnings, dry.Left)
		}
	}
	// Each change once, in words: the requests sent as server-side dry runs stay out of it.
	if strings.Contains(plan, "(server-side dry run)") || len(slices.Compact(slices.Sorted(slices.Values(dry.PlannedActions)))) != len(dry.PlannedActions) {
		t.Errorf("leave --dry-run's plan lists raw requests or a step twice:\n%s", plan)
	}
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, "w5", metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Errorf("leave --dry-run cordoned w5 or deleted it: %v", err)
	}

	// Killed mid-drain: the budget refuses, the drain waits; SIGKILL ends it.
	killLeaveMidDrain(t, c, leave)
	assertBlocked := func(when string) {
		t.Helper()
		if n, err := c.Client.CoreV1().Nodes().Get(ctx, "w5", metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
			t.Errorf("%s: w5 is not cordoned: %v", when, err)
		}
		for _, pod := range pods {
			if p, err := c.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || p.UID != pod.UID || p.DeletionTimestamp != nil {
				t.Errorf("%s: the budget's pod %s (UID %s) did not stay: %v", when, pod.Name, pod.UID, err)
			}
		}
		if c.Run(t, "w5", "systemctl", "is-active", "--quiet", "kubelet").ExitCode != 0 {
			t.Errorf("%s: the kubelet was stopped", when)
		}
		if _, err := os.Stat(c.HostPath("w5", "/etc/kubernetes/kubelet.conf")); err != nil {
			t.Errorf("%s: kubelet.conf was removed: %v", when, err)
		}
	}
	assertBlocked("after the kill mid-drain")

	// Run again, the budget still holds: the drain stops at its timeout (exit 6) naming it.
	blocked := c.Run(t, "w5", append(leave, "--drain-timeout", "10s")...)
	out := framework.Answer[output.LeaveResult](t, blocked)
	if blocked.ExitCode != 6 || out.Error == nil || !strings.Contains(out.Error.Message, "disruption budget") {
		t.Fatalf("want exit 6 naming the disruption budget, got exit %d: %s", blocked.ExitCode, blocked.Stdout)
	}
	assertBlocked("after the drain's timeout")

	// The replacements may run on cp1 now, and the budget allows one disruption at a time.
	rs, err := c.Client.AppsV1().ReplicaSets("default").Get(ctx, "leave-web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs.Spec.Template.Spec.NodeSelector = nil
	rs.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"w5", "cp1"}}}}}}}}
	rs.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if _, err := c.Client.AppsV1().ReplicaSets("default").Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	budget(t, c, 1, 1)
	lease := c.NodeLease(t, "w5")
	health := watchHealthy(t, c, pods)

	r := c.Run(t, "w5", leave...)
	done := framework.Answer[output.LeaveResult](t, r)
	if r.ExitCode != 0 {
		c.DumpLogs(t, "w5", "cp1")
		t.Fatalf("leave: exit %d: %s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
	}
	lowest, moved := health()
	for _, pod := range pods {
		if !slices.Contains(done.EvictedPods, "default/"+pod.Name) {
			t.Errorf("leave did not evict %s: %v", pod.Name, done.EvictedPods)
		}
		if p, err := c.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); err == nil && p.UID == pod.UID && p.DeletionTimestamp == nil {
			t.Errorf("pod %s (UID %s) was not evicted", pod.Name, pod.UID)
		}
	}
	// The budget held: the API server refused the second eviction until the first pod's
	// replacement was ready, and the ready pods never fell below the budget's one.
	if done.EvictionRefusals == 0 {
		t.Errorf("the budget allows one disruption at a time, yet no eviction of the two pods was refused: %+v", done)
	}
	if lowest < 1 {
		t.Errorf("the budget was violated: %d ready pods of leave-web at the lowest during the drain", lowest)
	}
	t.Logf("drain: %d eviction refusals; ready pods at the lowest: %d; replacements %v", done.EvictionRefusals, lowest, moved)
	waitMoved(t, c, pods, "cp1")
	if !done.NodeDeleted || !done.LeaseDeleted || !done.KubeletStopped || len(done.Left) != 0 || done.Credentials != "admin (/root/admin.conf)" {
		t.Errorf("leave report: %+v", done)
	}
	if l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "w5", metav1.GetOptions{}); err == nil && l.UID == lease.UID {
		t.Errorf("w5's Lease (UID %s) is there after leave", l.UID)
	}
	for _, name := range csrs {
		if !slices.Contains(done.DeletedCSRs, name) {
			t.Errorf("leave did not delete w5's CSR %s: %v", name, done.DeletedCSRs)
		}
		if _, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("CSR %s survived leave: %v", name, err)
		}
	}
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, "w5", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node w5 survived leave: %v", err)
	}
	// The Lease stays gone: the kubelet, which would recreate it, was stopped first.
	time.Sleep(12 * time.Second) // longer than the kubelet's lease renew interval (10 s)
	if _, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "w5", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("w5's Lease exists after leave: %v", err)
	}
	if c.Run(t, "w5", "systemctl", "is-active", "--quiet", "kubelet").ExitCode == 0 {
		t.Error("the kubelet still runs after leave")
	}
	for _, f := range joinFiles {
		if _, err := os.Lstat(c.HostPath("w5", f)); err == nil {
			t.Errorf("%s survived leave", f)
		}
	}
	again := framework.Answer[output.LeaveResult](t, c.MustRun(t, "w5", leave...))
	if again.Changed {
		t.Errorf("second leave changed something: %+v", again)
	}

	leaveKubeadmWorkerWithItsOwnCredentials(t, c)
}

// startReplicaSet starts a ReplicaSet of pause pods on w5 and returns its pods, running.
func startReplicaSet(t *testing.T, c *framework.Cluster, name string, replicas int32) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	tmpl := pausePod(c, "w5")
	tmpl.Spec.NodeName, tmpl.Spec.Tolerations = "", nil // the scheduler places them; cordoned, w5 takes no new one
	tmpl.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "w5"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.ReplicaSetSpec{Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}}}
	if _, err := c.Client.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AppsV1().ReplicaSets("default").Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = c.Client.PolicyV1().PodDisruptionBudgets("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(l.Items) != int(replicas) {
			return false, nil
		}
		for _, p := range l.Items {
			if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != "w5" {
				return false, nil
			}
		}
		pods = l.Items
		return true, nil
	})
	if err != nil {
		c.DumpLogs(t, "w5")
		t.Fatalf("ReplicaSet %s's %d pods do not run on w5: %v", name, replicas, err)
	}
	return pods
}

// budget makes (or changes) leave-web's PodDisruptionBudget to minAvailable and waits until
// its controller has counted both pods and allows the given number of disruptions.
func budget(t *testing.T, c *framework.Cluster, minAvailable, allowed int32) {
	t.Helper()
	ctx := context.Background()
	m := intstr.FromInt32(minAvailable)
	pdbs := c.Client.PolicyV1().PodDisruptionBudgets("default")
	pdb, err := pdbs.Get(ctx, "leave-web", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		pdb = &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "leave-web", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &m, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "leave-web"}}}}
		_, err = pdbs.Create(ctx, pdb, metav1.CreateOptions{})
	case err == nil:
		pdb.Spec.MinAvailable = &m
		_, err = pdbs.Update(ctx, pdb, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	// The budget's controller must have counted the pods, or an eviction is refused (or
	// allowed) for another reason.
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := pdbs.Get(ctx, "leave-web", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 2 && p.Status.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		t.Fatalf("the budget (minAvailable %d) never counted two healthy pods allowing %d disruptions: %v", minAvailable, allowed, err)
	}
}

// killLeaveMidDrain starts leave on w5 with a long drain timeout, waits until it has cordoned
// the node and the budget has refused an eviction for a while, and kills it with SIGKILL.
func killLeaveMidDrain(t *testing.T, c *framework.Cluster, leave []string) {
	t.Helper()
	done := make(chan lab.Result, 1)
	go func() { done <- c.Exec(context.Background(), "w5", append(leave, "--drain-timeout", "5m")...) }()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case r := <-done:
			return false, fmt.Errorf("leave ended before it was killed: exit %d\n%s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
		default:
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "w5", metav1.GetOptions{})
		return err == nil && n.Spec.Unschedulable, nil
	})
	if err != nil {
		t.Fatalf("leave did not cordon w5: %v", err)
	}
	time.Sleep(7 * time.Second) // the drain retries a refused eviction every 5 s: it is inside the drain
	select {
	case r := <-done:
		t.Fatalf("leave ended mid-drain on its own: exit %d\n%s", r.ExitCode, r.Stdout)
	default:
	}
	pids, err := c.Signal("w5", "kjoin", syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.Signal != syscall.SIGKILL {
			t.Fatalf("leave was not ended by SIGKILL: exit %d signal %v", r.ExitCode, r.Signal)
		}
		t.Logf("leave (pid %v) killed mid-drain", pids)
	case <-time.After(30 * time.Second):
		t.Fatal("leave did not end after SIGKILL")
	}
}

// watchHealthy watches leave-web's pods from now on and returns a function reporting the
// lowest number of ready pods not being deleted it saw, and the nodes of the pods that
// replaced the given ones.
func watchHealthy(t *testing.T, c *framework.Cluster, before []corev1.Pod) func() (lowest int, replacements map[string]string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=leave-web"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=leave-web", ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	old := map[types.UID]bool{}
	for _, p := range before {
		old[p.UID] = true
	}
	var mu sync.Mutex
	current := map[types.UID]*corev1.Pod{}
	for i := range l.Items {
		current[l.Items[i].UID] = &l.Items[i]
	}
	healthy := func() int {
		n := 0
		for _, p := range current {
			if p.DeletionTimestamp == nil && podReady(p) {
				n++
			}
		}
		return n
	}
	lowest := healthy()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				if ctx.Err() == nil { // not the end stop asked for
					t.Errorf("pod watch: %v", ev.Object)
				}
				return
			}
			mu.Lock()
			if ev.Type == watch.Deleted {
				delete(current, p.UID)
			} else {
				current[p.UID] = p
			}
			lowest = min(lowest, healthy())
			mu.Unlock()
		}
	}()
	return func() (int, map[string]string) {
		cancel()
		w.Stop()
		<-ended
		mu.Lock()
		defer mu.Unlock()
		moved := map[string]string{}
		for uid, p := range current {
			if !old[uid] {
				moved[p.Name] = p.Spec.NodeName
			}
		}
		return lowest, moved
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitMoved waits until leave-web runs two new pods (not the given ones), both on node.
func waitMoved(t *testing.T, c *framework.Cluster, before []corev1.Pod, node string) {
	t.Helper()
	var last []string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=leave-web"})
		if err != nil {
			return false, nil
		}
		last = last[:0]
		running := 0
		for _, p := range l.Items {
			last = append(last, fmt.Sprintf("%s on %q %s", p.Name, p.Spec.NodeName, p.Status.Phase))
			if slices.ContainsFunc(before, func(b corev1.Pod) bool { return b.UID == p.UID }) {
				return false, nil
			}
			if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 2, nil
	})
	if err != nil {
		t.Errorf("leave-web's pods did not move to %s: %v", node, last)
	}
}

// leaveKubeadmWorkerWithItsOwnCredentials: kubeadm joins w5 (which kjoin's leave left clean)
// and runs a ReplicaSet's pod; kjoin leave, with no admin credentials on the node, uses the
// kubelet's. What NodeRestriction lets a node do, it does: cordon, evict its own pod, delete
// its own Lease. What it does not (delete the Node, delete CSRs) is left, each with the
// command that does it, and those commands, run as admin on cp1, finish the job.
func leaveKubeadmWorkerWithItsOwnCredentials(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	if err := os.Remove(c.HostPath("w5", "/root/admin.conf")); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Truncate(time.Second) // a CSR's creation time has seconds only
	c.MustRun(t, "w5", "kubeadm", "join", lab.Endpoint(), "--token", lab.Token,
		"--discovery-token-ca-cert-hash", c.CAHash, "--ignore-preflight-errors=all")
	c.WaitNodeCondition(t, "w5", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	assertLeaseRenews(t, c, "w5")
	// The kubelet's CSR this kubeadm join made: sent with the bootstrap token, for w5, to the
	// kubelet client signer, since the join started (kjoin's first leave deleted w5's earlier ones).
	var csrs []string
	list, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, csr := range list.Items {
		if tlsbootstrap.IsBootstrapCSRFor(&list.Items[i], "w5") && !csr.CreationTimestamp.Time.Before(started) {
			csrs = append(csrs, csr.Name)
		}
	}
	if len(csrs) != 1 {
		t.Fatalf("want the one CSR of kubeadm's join of w5, have %v", csrs)
	}
	pods := startReplicaSet(t, c, "leave-own", 1)
	node, err := c.Client.CoreV1().Nodes().Get(ctx, "w5", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	lease := c.NodeLease(t, "w5")
	r := c.Run(t, "w5", "kjoin", "leave", "-f", "-o", "json")
	out := framework.Answer[output.LeaveResult](t, r)
	if r.ExitCode != 0 {
		c.DumpLogs(t, "w5")
		t.Fatalf("leave with the node's credentials: exit %d: %s\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
	}
	if out.Credentials != "node (/etc/kubernetes/kubelet.conf)" || !out.Cordoned || !out.LeaseDeleted || !out.KubeletStopped || out.NodeDeleted ||
		!slices.Equal(out.EvictedPods, []string{"default/" + pods[0].Name}) || len(out.DeletedCSRs) != 0 {
		t.Errorf("leave with the node's credentials: %+v", out)
	}
	if p, err := c.Client.CoreV1().Pods("default").Get(ctx, pods[0].Name, metav1.GetOptions{}); err == nil && p.UID == pods[0].UID && p.DeletionTimestamp == nil {
		t.Errorf("pod %s (UID %s) was not evicted", pods[0].Name, pods[0].UID)
	}
	if l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "w5", metav1.GetOptions{}); err == nil && l.UID == lease.UID {
		t.Errorf("w5's Lease (UID %s) survived a leave that reports it deleted", l.UID)
	}
	for _, f := range joinFiles {
		if _, err := os.Lstat(c.HostPath("w5", f)); err == nil {
			t.Errorf("%s survived leave", f)
		}
	}
	// Left: the Node (the same one) and the CSR, each with its command.
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, "w5", metav1.GetOptions{}); err != nil || n.UID != node.UID || !n.Spec.Unschedulable {
		t.Errorf("the Node w5 (UID %s) should be left, cordoned: %v", node.UID, err)
	}
	want := []string{"kubectl delete node w5", "kubectl delete csr " + csrs[0]}
	if len(out.Left) != len(want) {
		t.Fatalf("left %q, want the Node and the CSR %s", out.Left, csrs[0])
	}
	for i, l := range out.Left {
		_, command, ok := strings.Cut(l, "): ")
		if !ok || command != want[i] {
			t.Fatalf("left[%d] = %q, want the command %q", i, l, want[i])
		}
		if r := c.Kubectl(ctx, strings.Fields(command)[1:]...); r.Err != nil {
			t.Errorf("the left command %q, run as admin: %v", command, r.Error())
		}
	}
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, "w5", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node w5 is there after the left command: %v", err)
	}
	if _, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, csrs[0], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("CSR %s is there after the left command: %v", csrs[0], err)
	}
}
