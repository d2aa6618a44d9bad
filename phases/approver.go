package phases

import (
	"context"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// ApproverUnit is the systemd unit kjoin's package ships for kjoin approver.
const ApproverUnit = "kjoin-approver"

// StartApprover enables and starts kjoin's approver on a new control plane when its unit is
// installed (kjoin's package ships it), so that every control plane decides the CSRs of
// tokens bound to a node (kjoin token create --node), as each one's controller-manager
// decides the others'. Without the unit (a kjoin binary copied by hand) it says how to run
// the approver and changes nothing. A unit enabled before the join is left as it is.
//
//	Reads:  the kjoin-approver unit (systemctl cat, is-enabled, is-active)
//	Writes: s.Journal.EnabledApprover (the unit was disabled before); runs systemctl
//	        enable, start kjoin-approver
var StartApprover = Phase{Name: "approver", Short: "Enable and start kjoin's approver (control planes, when its unit is installed)", Skip: workerSkip, Run: runStartApprover}

func runStartApprover(ctx context.Context, e *host.Env, s *State) error {
	fx := e.Fx()
	if _, err := e.Exec.Run(ctx, "systemctl", "cat", ApproverUnit+".service"); err != nil {
		e.Logf("approver", "%s.service is not installed (kjoin's package ships it): run kjoin approver on a control plane for tokens bound to a node", ApproverUnit)
		return nil
	}
	if _, err := e.Exec.Run(ctx, "systemctl", "is-enabled", "--quiet", ApproverUnit); err != nil {
		if err := recordEnable(ctx, e, s, ApproverUnit, func(j *Journal) *bool { return &j.EnabledApprover }); err != nil {
			return err
		}
		if err := fx.Service(ctx, "enable", ApproverUnit); err != nil {
			return operr.Wrap(operr.Other, err, "could not enable kjoin's approver", "check systemctl status "+ApproverUnit+"; the join itself is done, run kjoin join phase approver again")
		}
	}
	if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", ApproverUnit); err == nil {
		return nil
	}
	if err := fx.Service(ctx, "start", ApproverUnit); err != nil {
		return operr.Wrap(operr.Other, err, "could not start kjoin's approver", "check systemctl status "+ApproverUnit+" and journalctl -u "+ApproverUnit+"; the join itself is done, run kjoin join phase approver again")
	}
	if !fx.Planning() {
		e.Logf("approver", "%s started: this control plane decides the CSRs of tokens bound to a node", ApproverUnit)
	}
	return nil
}
