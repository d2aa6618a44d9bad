package phases

import (
	"context"

	"kjoin.dev/kjoin/host"
)

// ResetKubelet stops the kubelet, and disables its unit when the join enabled it (a unit that
// was enabled before the join stays enabled, as kubeadm reset leaves it).
//
//	Reads:  the kubelet service state, s.Journal.EnabledKubelet
//	Writes: systemctl disable, stop kubelet; s.Report.KubeletStopped, s.Report.KubeletDisabled, s.kubeletStopping
var ResetKubelet = ResetPhase{Name: "stop-kubelet", Short: "Stop the kubelet", Run: runResetKubelet}

func runResetKubelet(ctx context.Context, e *host.Env, s *ResetState) error {
	disabled, stopped := stopUnit(ctx, e, s, "stop-kubelet", "kubelet", s.Journal != nil && s.Journal.EnabledKubelet)
	s.kubeletStopping = stopped // in a dry run: would be, so mark-node plans its step
	if !e.Fx().Planning() {
		s.Report.KubeletDisabled, s.Report.KubeletStopped = disabled, stopped
	}
	return nil
}

// stopUnit stops a unit reset takes down, through the run's effects, and first disables it
// when the join enabled it (enabledByJoin). It reports whether the unit was (in a dry run:
// would be) disabled, and stopped (it was active). A unit that will not stop or disable is
// warned about, and the reset goes on.
func stopUnit(ctx context.Context, e *host.Env, s *ResetState, phase, unit string, enabledByJoin bool) (disabled, stopped bool) {
	fx := e.Fx()
	// did says what was done, or in a dry run what would be.
	did := func(verb, done string) string {
		if fx.Planning() {
			return "would " + verb
		}
		return done
	}
	if enabledByJoin {
		if err := fx.Service(ctx, "disable", unit); err != nil {
			s.Warn(e, phase, "could not disable the %s unit, which the join enabled: %v", unit, err)
		} else {
			disabled = true
			e.Logf(phase, "%s the %s unit (the join had enabled it)", did("disable", "disabled"), unit)
		}
	}
	if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", unit); err != nil {
		return disabled, false
	}
	if err := fx.Service(ctx, "stop", unit); err != nil {
		s.Warn(e, phase, "could not stop the %s unit: %v", unit, err)
		return disabled, false
	}
	e.Logf(phase, "%s the %s unit", did("stop", "stopped"), unit)
	return disabled, true
}
