package phases

import (
	"context"

	"kjoin.dev/kjoin/host"
)

// ResetKubelet stops the kubelet, and disables its unit when the join enabled it (a unit that
// was enabled before the join stays enabled, as kubeadm reset leaves it).
//
//	Reads:  the kubelet service state, s.Journal.EnabledKubelet, s.Opts.DryRun
//	Writes: s.Report.KubeletStopped, s.Report.KubeletDisabled, s.kubeletStopping
var ResetKubelet = ResetPhase{Name: "stop-kubelet", Short: "Stop the kubelet", Run: runResetKubelet}

func runResetKubelet(ctx context.Context, e *host.Env, s *ResetState) error {
	if s.Opts.DryRun {
		if s.Journal != nil && s.Journal.EnabledKubelet {
			s.Plan(e, "stop-kubelet", "disable the kubelet unit (the join enabled it)")
		}
		if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "kubelet"); err == nil {
			s.Plan(e, "stop-kubelet", "stop the kubelet")
			s.kubeletStopping = true
		}
		return nil
	}
	if s.Journal != nil && s.Journal.EnabledKubelet {
		if err := e.Fx().Service(ctx, "disable", "kubelet"); err != nil {
			s.Warn(e, "stop-kubelet", "could not disable the kubelet unit the join enabled: %v", err)
		} else {
			s.Report.KubeletDisabled = true
			e.Logf("stop-kubelet", "disabled the kubelet unit (the join had enabled it)")
		}
	}
	if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "kubelet"); err != nil {
		return nil
	}
	if err := e.Fx().Service(ctx, "stop", "kubelet"); err != nil {
		s.Warn(e, "stop-kubelet", "could not stop the kubelet: %v", err)
		return nil
	}
	s.Report.KubeletStopped, s.kubeletStopping = true, true
	e.Logf("stop-kubelet", "stopped the kubelet")
	return nil
}
