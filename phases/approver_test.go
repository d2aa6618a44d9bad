package phases

import (
	"context"
	"strings"
	"testing"
)

// A control-plane join enables and starts kjoin-approver.service when it is installed, records
// that it enabled it, leaves it alone on a re-run, and reset stops it and disables only what
// the join enabled. A unit the operator enabled stays enabled; a missing unit is named, not
// created.
func TestControlPlaneJoinStartsTheApprover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		before *unitState
	}{
		{"installed, disabled", &unitState{}},
		{"enabled by the operator, stopped", &unitState{enabled: true}},
		{"not installed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCPHost(t)
			var operatorEnabled bool
			if tc.before != nil {
				operatorEnabled = tc.before.enabled
				c.runner.approver = &unitState{enabled: tc.before.enabled, active: tc.before.active}
			}
			res, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{})
			if err != nil {
				t.Fatalf("join: %v\n%s", err, c.out)
			}
			calls := strings.Join(c.runner.calls, ";")
			j, err := LoadJournal(c.env)
			if err != nil {
				t.Fatal(err)
			}
			if tc.before == nil {
				if strings.Contains(calls, "enable "+ApproverUnit) || strings.Contains(calls, "start "+ApproverUnit) || j.EnabledApprover {
					t.Errorf("a missing unit was enabled or started: %s (journal %v)", calls, j.EnabledApprover)
				}
				if !strings.Contains(c.out.String(), ApproverUnit+".service is not installed") {
					t.Errorf("the missing unit is not named:\n%s", c.out)
				}
				return
			}
			if !c.runner.approver.enabled || !c.runner.approver.active {
				t.Errorf("after the join the approver is enabled %v, active %v; calls %s", c.runner.approver.enabled, c.runner.approver.active, calls)
			}
			if j.EnabledApprover == operatorEnabled {
				t.Errorf("enabled before the join: %v; the journal says the join enabled it: %v", operatorEnabled, j.EnabledApprover)
			}
			if status := phaseStatus(res, "approver"); status != "ran" {
				t.Errorf("approver phase %q, want ran", status)
			}
			// A re-run finds it enabled and running: nothing to do.
			c.runner.calls = nil
			s := &State{Opts: c.options(t)}
			c.env.PortInUse = func(int) bool { return true }
			res, err = Run(context.Background(), c.env, s, Join, RunOptions{})
			if err != nil {
				t.Fatalf("re-run: %v\n%s", err, c.out)
			}
			if calls := strings.Join(c.runner.calls, ";"); strings.Contains(calls, "enable "+ApproverUnit) || strings.Contains(calls, "start "+ApproverUnit) || s.Changed() {
				t.Errorf("re-run touched the approver: %s (changed %v)", calls, s.Changed())
			}
			// Reset stops it; disables it only when the join enabled it.
			rs := &ResetState{Report: &ResetReport{}, Journal: j}
			if err := runResetPhase(ResetApprover, c.env, rs); err != nil {
				t.Fatal(err)
			}
			if !rs.Report.ApproverStopped || c.runner.approver.active {
				t.Errorf("reset did not stop the approver: report %v, active %v", rs.Report.ApproverStopped, c.runner.approver.active)
			}
			if c.runner.approver.enabled != operatorEnabled {
				t.Errorf("enabled before the join: %v; after reset: %v", operatorEnabled, c.runner.approver.enabled)
			}
		})
	}
}

func phaseStatus(rs []PhaseResult, name string) string {
	for _, r := range rs {
		if r.Name == name {
			return r.Status
		}
	}
	return ""
}

// A worker never touches the approver.
func TestWorkerJoinSkipsTheApprover(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.runner.approver = &unitState{}
	res, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{})
	if err != nil {
		t.Fatalf("join: %v\n%s", err, h.out)
	}
	if status := phaseStatus(res, "approver"); status != "skipped" || h.runner.approver.enabled || h.runner.approver.active {
		t.Errorf("worker: approver phase %q, unit %+v", status, *h.runner.approver)
	}
}
