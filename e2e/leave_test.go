//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/tlsbootstrap"
)

func decodeLeave(t *testing.T, r lab.Result) output.LeaveResult {
	t.Helper()
	return decodeAnswer[output.LeaveResult](t, r)
}

// decodeAnswer decodes a command's -o json answer, failing with its output when it is not one.
func decodeAnswer[T any](t *testing.T, r lab.Result) T {
	t.Helper()
	var out T
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
		t.Fatalf("-o json answer: %v\n%s\n%s", err, r.Stdout, tail(r.Stderr, 20))
	}
	return out
}

// TestLeave: a worker kjoin joined leaves the cluster. A PodDisruptionBudget that allows no
// disruption stops the drain at its timeout, with the node cordoned and nothing else
// touched; once the budget allows it, the same command evicts the ReplicaSet's pod, stops the
// kubelet, deletes the Node, its Lease and its CSRs, and removes the join's files. Again, it
// changes nothing.
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

	// A ReplicaSet's pod on w5, guarded by a budget that allows no disruption.
	one := int32(1)
	labels := map[string]string{"app": "leave-web"}
	tmpl := pausePod(c, "w5")
	tmpl.Spec.NodeName, tmpl.Spec.Tolerations = "", nil // the scheduler places it; cordoned, w5 takes no new one
	tmpl.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "w5"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "leave-web", Namespace: "default"}, Spec: appsv1.ReplicaSetSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}}}
	if _, err := c.Client.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AppsV1().ReplicaSets("default").Delete(context.Background(), "leave-web", metav1.DeleteOptions{})
	})
	var pod corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=leave-web"})
		if err != nil || len(l.Items) != 1 || l.Items[0].Status.Phase != corev1.PodRunning || l.Items[0].Spec.NodeName != "w5" {
			return false, nil
		}
		pod = l.Items[0]
		return true, nil
	})
	if err != nil {
		c.DumpLogs(t, "w5")
		t.Fatalf("the ReplicaSet's pod does not run on w5: %v", err)
	}
	minAvailable := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "leave-web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.PolicyV1().PodDisruptionBudgets("default").Delete(context.Background(), "leave-web", metav1.DeleteOptions{})
	})
	// The budget's controller must have counted the pod, or the eviction is refused for
	// another reason.
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "leave-web", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1 && p.Status.DisruptionsAllowed == 0, nil
	})
	if err != nil {
		t.Fatalf("the budget never counted the pod: %v", err)
	}
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
	dry := decodeLeave(t, c.MustRun(t, "w5", append(leave, "--dry-run")...))
	plan := strings.Join(dry.PlannedActions, "\n")
	for _, want := range []string{`cordon Node "w5"`, "evict pod default/" + pod.Name, "stop the kubelet", `delete Node "w5"`, "delete Lease kube-node-lease/w5", "delete CSR " + csrs[0]} {
		if !strings.Contains(plan, want) {
			t.Errorf("leave --dry-run's plan lacks %q:\n%s\nwarnings %q, left %q", want, plan, dry.Warnings, dry.Left)
		}
	}
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, "w5", metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Errorf("leave --dry-run cordoned w5 or deleted it: %v", err)
	}

	// The budget holds: the drain stops at its timeout (exit 6), the node cordoned, its pod,
	// kubelet and files untouched.
	blocked := c.Run(t, "w5", append(leave, "--drain-timeout", "10s")...)
	out := decodeLeave(t, blocked)
	if blocked.ExitCode != 6 || out.Error == nil || !strings.Contains(out.Error.Message, "disruption budget") {
		t.Fatalf("want exit 6 naming the disruption budget, got exit %d: %s", blocked.ExitCode, blocked.Stdout)
	}
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, "w5", metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Errorf("w5 is not cordoned after the blocked drain: %v", err)
	}
	if p, err := c.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || p.UID != pod.UID || p.DeletionTimestamp != nil {
		t.Errorf("the budget's pod %s (UID %s) did not stay: %v", pod.Name, pod.UID, err)
	}
	if c.Run(t, "w5", "systemctl", "is-active", "--quiet", "kubelet").ExitCode != 0 {
		t.Error("the blocked leave stopped the kubelet")
	}
	if _, err := os.Stat(c.HostPath("w5", "/etc/kubernetes/kubelet.conf")); err != nil {
		t.Errorf("the blocked leave removed kubelet.conf: %v", err)
	}

	// The budget allows it now: the same command continues and finishes.
	if err := c.Client.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "leave-web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := c.Run(t, "w5", leave...)
	done := decodeLeave(t, r)
	if r.ExitCode != 0 {
		c.DumpLogs(t, "w5")
		t.Fatalf("leave: exit %d: %s\n%s", r.ExitCode, r.Stdout, tail(r.Stderr, 20))
	}
	if !slices.Contains(done.EvictedPods, "default/"+pod.Name) || !done.NodeDeleted || !done.LeaseDeleted || !done.KubeletStopped || len(done.Left) != 0 {
		t.Errorf("leave report: %+v", done)
	}
	for _, name := range csrs {
		if !slices.Contains(done.DeletedCSRs, name) {
			t.Errorf("leave did not delete w5's CSR %s: %v", name, done.DeletedCSRs)
		}
		if _, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("CSR %s survived leave: %v", name, err)
		}
	}
	if p, err := c.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); err == nil && p.UID == pod.UID && p.DeletionTimestamp == nil {
		t.Errorf("pod %s (UID %s) was not evicted", pod.Name, pod.UID)
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
	again := decodeLeave(t, c.MustRun(t, "w5", leave...))
	if again.Changed {
		t.Errorf("second leave changed something: %+v", again)
	}
}
