package phases

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/tlsbootstrap"
)

// LeaveDeleteObjects deletes what the cluster keeps of the node once its kubelet has
// stopped: the Node, its Lease (kube-node-lease) and its certificate signing requests (kjoin's,
// the kubelet's first one sent with a bootstrap token, its renewals). What
// the credentials may not delete is reported with the command that does (Report.Leave.Left),
// and leave goes on: the node itself is still cleaned up.
//
//	Reads:  s.leave.client, s.Report.Node, s.Opts.DryRun
//	Writes: deletes the Node, Lease and CSRs; s.Report (NodeDeleted, Leave.LeaseDeleted, Leave.DeletedCSRs, Leave.Left)
var LeaveDeleteObjects = ResetPhase{Name: "delete-node-objects", Short: "Delete the Node, its Lease and its CSRs", Skip: leaveSkip, Run: runLeaveDeleteObjects}

func runLeaveDeleteObjects(ctx context.Context, e *host.Env, s *ResetState) error {
	c, name, rep := s.leave.client, s.Report.Node, s.Report.Leave
	opts := metav1.DeleteOptions{}
	if s.Opts.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	// del deletes one object and says whether it existed; a refusal is left to the operator.
	del := func(what, command string, call func() error) (bool, error) {
		err := call()
		switch {
		case err == nil:
			s.Change(e, "delete-node-objects", host.EffectAPI, "delete %s", what)
			if s.Opts.DryRun {
				return false, nil
			}
			e.Logf("delete-node-objects", "deleted %s", what)
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case apierrors.IsForbidden(err):
			rep.Left = append(rep.Left, fmt.Sprintf("%s (the %s credentials may not delete it): %s", what, rep.Credentials, command))
			s.Warn(e, "delete-node-objects", "%s was left: the %s credentials may not delete it; run %s with admin credentials", what, rep.Credentials, command)
			return false, nil
		}
		return false, leaveAPIError(err, "delete "+what, rep.Credentials)
	}
	// The Lease first: the Node owns it, so the garbage collector deletes it soon after the
	// Node, and leave could not tell a Lease it deleted from one that was gone.
	var err error
	if rep.LeaseDeleted, err = del(fmt.Sprintf("Lease kube-node-lease/%s", name), "kubectl -n kube-node-lease delete lease "+name, func() error {
		return c.CoordinationV1().Leases("kube-node-lease").Delete(ctx, name, opts)
	}); err != nil {
		return err
	}
	if s.Report.NodeDeleted, err = del(fmt.Sprintf("Node %q", name), "kubectl delete node "+name, func() error {
		return c.CoreV1().Nodes().Delete(ctx, name, opts)
	}); err != nil {
		return err
	}
	csrs, lerr := c.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(lerr):
		rep.Left = append(rep.Left, fmt.Sprintf("the CSRs of node %s (the %s credentials may not list them): kubectl get csr, then kubectl delete csr NAME", name, rep.Credentials))
		s.Warn(e, "delete-node-objects", "the CSRs of node %s were left: the %s credentials may not list them", name, rep.Credentials)
		return nil
	case lerr != nil:
		return leaveAPIError(lerr, "list certificate signing requests", rep.Credentials)
	}
	for i := range csrs.Items {
		csr := &csrs.Items[i]
		if !tlsbootstrap.IsNodeCSR(csr, name) && !tlsbootstrap.IsBootstrapCSRFor(csr, name) && !tlsbootstrap.IsServingCSROf(csr, name) {
			continue
		}
		deleted, err := del("CSR "+csr.Name, "kubectl delete csr "+csr.Name, func() error {
			return c.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, opts)
		})
		if err != nil {
			return err
		}
		if deleted {
			rep.DeletedCSRs = append(rep.DeletedCSRs, csr.Name)
		}
	}
	return nil
}
