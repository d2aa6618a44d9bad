package phases

import (
	"strings"
	"testing"

	"kjoin.dev/kjoin/host"
)

func TestKubeletStartRestartsOnlyAfterAChange(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.runner.active = true
	s := &State{Opts: h.options(t)}
	if err := runPhase(KubeletStart, h.env, s); err != nil {
		t.Fatal(err)
	}
	if s.Changed() || strings.Contains(strings.Join(h.runner.calls, "\n"), "restart") {
		t.Errorf("an unchanged node's running kubelet was restarted: %v", h.runner.calls)
	}
	s.fx = host.Apply(h.env, nil)
	s.fx.API("an earlier phase's change") // the kubelet must take it
	h.runner.calls = nil
	if err := runPhase(KubeletStart, h.env, s); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.runner.calls, ";"); got != "systemctl daemon-reload;systemctl enable kubelet;systemctl restart kubelet" /* no journal: nothing to record */ {
		t.Errorf("commands %q", got)
	}
}

func TestKubeletStartDryRunPlansOnly(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	o := h.options(t)
	o.DryRun = true
	s := &State{Opts: o}
	if err := runPhase(KubeletStart, h.env, s); err != nil {
		t.Fatal(err)
	}
	if len(h.runner.calls) != 0 || len(s.PlannedActions()) != 3 {
		t.Errorf("calls %v planned %v", h.runner.calls, s.PlannedActions())
	}
}

// The join notes that it enabled a disabled kubelet unit, and reset disables exactly that;
// a unit enabled before the join (the kubelet package's, an operator's) stays enabled.
func TestResetDisablesOnlyTheUnitTheJoinEnabled(t *testing.T) {
	t.Parallel()
	for _, before := range []bool{false, true} {
		h := newTestHost(t)
		h.runner.enabled = before
		s := &State{Opts: h.options(t), Journal: &Journal{Node: "w1"}}
		s.fx = host.Apply(h.env, nil)
		s.fx.API("an earlier phase's change")
		if err := runPhase(KubeletStart, h.env, s); err != nil {
			t.Fatal(err)
		}
		j, err := LoadJournal(h.env)
		if err != nil {
			t.Fatal(err)
		}
		if j.EnabledKubelet == before {
			t.Errorf("unit enabled before the join: %v; the saved journal says the join enabled it: %v", before, j.EnabledKubelet)
		}
		h.runner.calls = nil
		rs := &ResetState{Report: &ResetReport{}, Journal: j}
		if err := runResetPhase(ResetKubelet, h.env, rs); err != nil {
			t.Fatal(err)
		}
		disabled := strings.Contains(strings.Join(h.runner.calls, ";"), "systemctl disable kubelet")
		if disabled == before || rs.Report.KubeletDisabled == before || h.runner.enabled != before {
			t.Errorf("unit enabled before the join: %v; reset disabled it: %v (report %v), enabled after reset: %v; calls %v",
				before, disabled, rs.Report.KubeletDisabled, h.runner.enabled, h.runner.calls)
		}
		if !rs.Report.KubeletStopped || h.runner.active {
			t.Errorf("reset did not stop the kubelet: %v", h.runner.calls)
		}
	}
}
