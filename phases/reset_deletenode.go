package phases

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// ResetDeleteNode deletes the Node object with admin credentials (--delete-node).
//
//	Reads:  s.Opts (DeleteNode, Kubeconfig), s.Report.Node
//	Writes: s.Report.NodeDeleted
var ResetDeleteNode = ResetPhase{
	Name: "delete-node", Short: "Delete the Node object (--delete-node)", Run: runResetDeleteNode,
	Skip: func(s *ResetState) string {
		switch {
		case !s.Opts.DeleteNode:
			return "no --delete-node"
		case s.Report.Node == "":
			return "no node name known"
		}
		return ""
	},
}

func runResetDeleteNode(ctx context.Context, e *host.Env, s *ResetState) error {
	r := s.Report
	if err := deleteNode(ctx, e, s.Opts.Kubeconfig, r.Node); err != nil {
		return err
	}
	r.NodeDeleted = true
	s.MarkChanged()
	e.Logf("delete-node", "deleted Node %q", r.Node)
	return nil
}

func deleteNode(ctx context.Context, e *host.Env, kubeconfig, name string) error {
	if kubeconfig == "" {
		kubeconfig = host.AdminKubeconfig
	}
	c, _, err := e.ClientFromKubeconfig(kubeconfig)
	if err != nil {
		return operr.Wrap(operr.Usage, err, "--delete-node needs admin credentials", "pass --kubeconfig with a cluster-admin kubeconfig")
	}
	err = c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsForbidden(err) {
		return operr.Wrap(operr.Auth, err, "the kubeconfig's user may not delete nodes", "pass --kubeconfig with a cluster-admin kubeconfig")
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return operr.Wrap(operr.Other, err, "delete Node "+name, "")
	}
	return nil
}
