package phases

import (
	"context"

	"kjoin.dev/kjoin/host"
)

// ResetApprover stops kjoin's approver on a node leaving the cluster (its credentials go with
// the node's files), and disables its unit when the join enabled it (a unit enabled by the
// operator stays enabled; without admin.conf it will not start again).
//
//	Reads:  the kjoin-approver unit's state, s.Journal.EnabledApprover, s.Opts.DryRun
//	Writes: s.Report.ApproverStopped; runs systemctl disable, stop kjoin-approver
var ResetApprover = ResetPhase{Name: "stop-approver", Short: "Stop kjoin's approver", Run: runResetApprover}

func runResetApprover(ctx context.Context, e *host.Env, s *ResetState) error {
	enabledByJoin := s.Journal != nil && s.Journal.EnabledApprover
	_, notActive := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", ApproverUnit)
	if s.Opts.DryRun {
		if enabledByJoin {
			s.Plan(e, "stop-approver", "disable %s (the join enabled it)", ApproverUnit)
		}
		if notActive == nil {
			s.Plan(e, "stop-approver", "stop %s", ApproverUnit)
		}
		return nil
	}
	if enabledByJoin {
		if err := e.Fx().Service(ctx, "disable", ApproverUnit); err != nil {
			s.Warn(e, "stop-approver", "could not disable %s, which the join enabled: %v", ApproverUnit, err)
		} else {
			e.Logf("stop-approver", "disabled %s (the join had enabled it)", ApproverUnit)
		}
	}
	if notActive != nil {
		return nil
	}
	if err := e.Fx().Service(ctx, "stop", ApproverUnit); err != nil {
		s.Warn(e, "stop-approver", "could not stop %s: %v", ApproverUnit, err)
		return nil
	}
	s.Report.ApproverStopped = true
	e.Logf("stop-approver", "stopped %s", ApproverUnit)
	return nil
}
