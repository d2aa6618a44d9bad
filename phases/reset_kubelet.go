package phases

import (
	"context"

	"kjoin.dev/kjoin/host"
)

// ResetKubelet stops the kubelet.
//
//	Reads:  the kubelet service state
//	Writes: s.Report.KubeletStopped
var ResetKubelet = ResetPhase{Name: "stop-kubelet", Short: "Stop the kubelet", Run: runResetKubelet}

func runResetKubelet(ctx context.Context, e *host.Env, s *ResetState) error {
	if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "kubelet"); err != nil {
		return nil
	}
	if _, err := e.Exec.Run(ctx, "systemctl", "stop", "kubelet"); err != nil {
		s.Warn(e, "stop-kubelet", "could not stop the kubelet: %v", err)
		return nil
	}
	s.Report.KubeletStopped = true
	s.MarkChanged()
	e.Logf("stop-kubelet", "stopped the kubelet")
	return nil
}
