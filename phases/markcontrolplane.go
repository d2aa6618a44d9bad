package phases

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// Control-plane node labels and taint (kubeadm's).
const (
	LabelControlPlane  = "node-role.kubernetes.io/control-plane"
	LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"
)

// MarkControlPlane labels and taints the node as a control plane, with admin credentials
// (NodeRestriction forbids the kubelet to), once the kubelet has registered it.
//
//	Reads:  s.AdminClient, s.Opts (NodeName, Taints, TaintsSet, Timeouts)
//	Writes: the Node's labels and taints
var MarkControlPlane = Phase{Name: "mark-control-plane", Short: "Label and taint the node as a control plane", Skip: workerSkip, Run: runMarkControlPlane}

func runMarkControlPlane(ctx context.Context, e *host.Env, s *State) error {
	taints := []corev1.Taint{{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}}
	if s.Opts.TaintsSet {
		taints = nil
		for _, t := range s.Opts.Taints {
			taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
		}
	}
	if s.Opts.DryRun {
		e.Fx().API("label node " + s.Opts.NodeName + " " + LabelControlPlane + " and " + LabelExcludeFromLB + "; taint it " + LabelControlPlane + ":NoSchedule")
		return nil
	}
	name := s.Opts.NodeName
	// Followed with one list and one watch, not a read every interval (issue 35's cost).
	err := newNodeWatch(e, "mark-control-plane", s.AdminClient, name).until(ctx, s.Opts.Timeouts.ControlPlane, func(*corev1.Node) {}, func(n *corev1.Node) bool { return n != nil })
	if err != nil {
		return operr.Newf(operr.Timeout,
			"node %q did not register within %s", name, s.Opts.Timeouts.ControlPlane).
			WithHint("the kubelet registers through this node's own API server: check it and etcd (crictl ps -a), and journalctl -xeu kubelet")
	}
	changed := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.AdminClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		before := len(n.Labels) + len(n.Spec.Taints)
		n.Labels[LabelControlPlane] = ""
		n.Labels[LabelExcludeFromLB] = ""
		for _, t := range taints {
			if !hasTaint(n.Spec.Taints, t) {
				n.Spec.Taints = append(n.Spec.Taints, t)
			}
		}
		if len(n.Labels)+len(n.Spec.Taints) == before {
			return nil
		}
		changed = true
		_, err = s.AdminClient.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return operr.Wrap(operr.Other, err, "could not label and taint node "+name, "")
	}
	if changed {
		e.Fx().API(fmt.Sprintf("label node %s %s and taint it %s:NoSchedule", name, LabelControlPlane, LabelControlPlane))
	}
	e.Logf("mark-control-plane", "node %q labelled %s and tainted %s:NoSchedule", name, LabelControlPlane, LabelControlPlane)
	return nil
}

func hasTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for _, x := range ts {
		if x.Key == t.Key && x.Effect == t.Effect {
			return true
		}
	}
	return false
}
