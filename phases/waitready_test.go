package phases

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/operr"
)

func notReadyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime network not ready: NetworkReady=false"}}}}
}

func leaseOf(name string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"}, Spec: coordinationv1.LeaseSpec{RenewTime: &now}}
}

// A Node that registers but stays NotReady is a warning naming the blocking condition, or a
// timeout with --wait-ready.
func TestWaitReadyNamesTheBlockingCondition(t *testing.T) {
	t.Parallel()
	for _, require := range []bool{false, true} {
		h := newTestHost(t, notReadyNode("w1"), leaseOf("w1"))
		o := h.options(t)
		o.WaitReady, o.WaitReadyTimeout = require, time.Minute
		s := &State{Opts: o, NodeClient: h.client, Started: h.env.Clock.Now()}
		err := WaitReady.Run(context.Background(), h.env, s)
		if require {
			if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "NetworkReady=false") {
				t.Errorf("--wait-ready: %v", err)
			}
			continue
		}
		if err != nil || s.Ready || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "NetworkReady=false") {
			t.Errorf("err %v ready %v warnings %q", err, s.Ready, s.Warnings)
		}
	}
}

func TestWaitReadyTimesOutWithoutRegistration(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t), NodeClient: h.client, Started: h.env.Clock.Now()}
	err := WaitReady.Run(context.Background(), h.env, s)
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), `did not register Node "w1"`) {
		t.Fatalf("got %v", err)
	}
}

// The join does not wait for the kubelet's first Lease: Ready without a Lease succeeds and
// reports the Lease as pending.
func TestWaitReadyDoesNotWaitForTheLease(t *testing.T) {
	t.Parallel()
	ready := notReadyNode("w1")
	ready.Status.Conditions[0].Status = corev1.ConditionTrue
	h := newTestHost(t, ready)
	s := &State{Opts: h.options(t), NodeClient: h.client, Started: h.env.Clock.Now()}
	if err := WaitReady.Run(context.Background(), h.env, s); err != nil {
		t.Fatal(err)
	}
	if !s.Ready || s.LeaseFound || !strings.Contains(h.out.String(), "Lease pending") {
		t.Errorf("ready %v lease %v output:\n%s", s.Ready, s.LeaseFound, h.out)
	}
}
