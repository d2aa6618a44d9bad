package phases

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/drain"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// LeaveCordon marks the Node unschedulable (kubectl cordon), so that nothing new lands on it
// while it drains. A Node that is gone needs no cordon and no drain.
//
//	Reads:  s.leave (client, Opts), s.Report.Node, s.Opts.DryRun
//	Writes: the Node's spec.unschedulable, s.Report.Leave.Cordoned, s.leave.nodeGone
var LeaveCordon = ResetPhase{Name: "cordon", Short: "Mark the Node unschedulable", Skip: leaveSkip, Run: runLeaveCordon}

func runLeaveCordon(ctx context.Context, e *host.Env, s *ResetState) error {
	name := s.Report.Node
	node, err := s.leave.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s.leave.nodeGone = true
		e.Logf("cordon", "Node %q is not in the cluster: nothing to cordon or drain", name)
		return nil
	case err != nil:
		return leaveAPIError(err, "read Node "+name, s.Report.Leave.Credentials)
	}
	h := drain.NewCordonHelper(node)
	if !h.UpdateIfRequired(true) {
		s.Report.Leave.Cordoned = true
		return nil
	}
	if s.Opts.DryRun {
		s.Change(e, "cordon", host.EffectAPI, "cordon Node %q", name)
		return nil
	}
	if err, perr := h.PatchOrReplaceWithContext(ctx, s.leave.client, false); err != nil || perr != nil {
		if err == nil {
			err = perr
		}
		return leaveAPIError(err, "cordon Node "+name, s.Report.Leave.Credentials)
	}
	s.Report.Leave.Cordoned = true
	s.Change(e, "cordon", host.EffectAPI, "cordon Node %q", name)
	e.Logf("cordon", "Node %q cordoned", name)
	return nil
}

// leaveAPIError names an API call leave could not make, and what to do about it.
func leaveAPIError(err error, what, credentials string) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return operr.Wrap(operr.Auth, err, what+": the "+credentials+" credentials may not",
			"pass --kubeconfig with credentials that may drain and delete nodes (a cluster admin's), or --skip-phases for the step")
	}
	return operr.Wrap(operr.Other, err, what, "check the API server, then run the same command again: leave continues where it stopped")
}
