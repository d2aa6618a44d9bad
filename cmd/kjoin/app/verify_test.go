package app

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// verify --wait repeats until every check passes, naming what it waits for on stderr; without
// it the same moment is a failure (exit 8); a budget that runs out reports the last failure.
func TestVerifyWait(t *testing.T) {
	deps, client, root := adminHost(t)
	ctx := context.Background()
	renew := metav1.NewMicroTime(time.Now())
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("w1"), RenewTime: &renew}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		errb := &bytes.Buffer{}
		deps.Out, deps.Err = &bytes.Buffer{}, errb
		return Run(ctx, deps, append([]string{"verify", "w1", "--root", root}, args...)), errb.String()
	}
	if code, _ := run(); code != 8 {
		t.Fatalf("a NotReady node without --wait: exit %d, want 8", code)
	}
	if code, errs := run("--wait=1100ms"); code != 8 || !strings.Contains(errs, "waiting for w1/node.ready") {
		t.Fatalf("a budget that runs out: exit %d\n%s", code, errs)
	}
	go func() {
		time.Sleep(time.Second)
		n, _ := client.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
		n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason = corev1.ConditionTrue, "KubeletReady"
		_, _ = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		l, _ := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "w1", metav1.GetOptions{})
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		_, _ = client.CoordinationV1().Leases("kube-node-lease").Update(ctx, l, metav1.UpdateOptions{})
	}()
	if code, errs := run("--wait"); code != 0 || !strings.Contains(errs, "waiting for w1/node.ready") {
		t.Errorf("--wait while the node turns Ready: exit %d\n%s", code, errs)
	}
	if code, _ := run("--wait=-1s"); code != 2 {
		t.Errorf("a negative --wait: exit %d, want 2", code)
	}
}
