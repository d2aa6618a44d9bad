package phases

import (
	"context"

	"kjoin.dev/kjoin/host"
)

// ResetApprover stops kjoin's approver on a node leaving the cluster (its credentials go with
// the node's files), and disables its unit when the join enabled it (a unit enabled by the
// operator stays enabled; without admin.conf it will not start again).
//
//	Reads:  the kjoin-approver unit's state, s.Journal.EnabledApprover
//	Writes: systemctl disable, stop kjoin-approver; s.Report.ApproverStopped
var ResetApprover = ResetPhase{Name: "stop-approver", Short: "Stop kjoin's approver", Run: runResetApprover}

func runResetApprover(ctx context.Context, e *host.Env, s *ResetState) error {
	_, stopped := stopUnit(ctx, e, s, "stop-approver", ApproverUnit, s.Journal != nil && s.Journal.EnabledApprover)
	s.Report.ApproverStopped = stopped && !e.Fx().Planning()
	return nil
}
