package phases

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// ResetDeleteNode deletes the Node object with admin credentials (--delete-node); a dry run
// asks the API server for a dry-run delete, which checks the credentials and admission.
//
//	Reads:  s.Opts (DeleteNode, Kubeconfig, DryRun), s.Report.Node
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
	found, err := deleteNode(ctx, e, s.Opts.Kubeconfig, r.Node, s.Opts.DryRun)
	if err != nil {
		return err
	}
	if found {
		s.Change(e, "delete-node", host.EffectAPI, "delete Node %q", r.Node)
	}
	if s.Opts.DryRun {
		return nil
	}
	r.NodeDeleted = true
	e.Logf("delete-node", "deleted Node %q", r.Node)
	return nil
}

// deleteNode deletes the Node (only a server-side dry run with dryRun) and reports whether it
// existed.
func deleteNode(ctx context.Context, e *host.Env, kubeconfig, name string, dryRun bool) (found bool, err error) {
	if kubeconfig == "" {
		kubeconfig = host.AdminKubeconfig
	}
	c, _, err := e.ClientFromKubeconfig(kubeconfig)
	if err != nil {
		return false, operr.Wrap(operr.Usage, err, "--delete-node needs admin credentials", "pass --kubeconfig with a cluster-admin kubeconfig")
	}
	opts := metav1.DeleteOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	err = c.CoreV1().Nodes().Delete(ctx, name, opts)
	switch {
	case apierrors.IsForbidden(err):
		return false, operr.Wrap(operr.Auth, err, "the kubeconfig's user may not delete nodes", "pass --kubeconfig with a cluster-admin kubeconfig")
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, operr.Wrap(operr.Other, err, "delete Node "+name, "")
	}
	return true, nil
}
