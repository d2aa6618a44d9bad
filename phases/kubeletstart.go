package phases

import (
	"context"
	"fmt"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// KubeletStart (re)starts the kubelet through the init system, as kubeadm does.
//
//	Reads:  s.Changed() (an unchanged node with a running kubelet is left alone)
//	Writes: s.Journal.EnabledKubelet (the unit was disabled before); runs systemctl
//	        daemon-reload, enable, restart kubelet
var KubeletStart = Phase{Name: "kubelet-start", Short: "Enable and (re)start the kubelet", Run: runKubeletStart}

func runKubeletStart(ctx context.Context, e *host.Env, s *State) error {
	fx := e.Fx()
	if !fx.Planning() && !s.Changed() {
		if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "kubelet"); err == nil {
			e.Logf("kubelet-start", "kubelet already running with this configuration; not restarted")
			return nil
		}
	}
	for _, st := range [][2]string{{"daemon-reload", ""}, {"enable", "kubelet"}, {"restart", "kubelet"}} {
		if st[0] == "enable" {
			if err := recordEnable(ctx, e, s, "kubelet", func(j *Journal) *bool { return &j.EnabledKubelet }); err != nil {
				return err
			}
		}
		if err := fx.Service(ctx, st[0], st[1]); err != nil {
			return operr.Wrap(operr.Other, err, "could not (re)start the kubelet", "check systemctl status kubelet and journalctl -xeu kubelet")
		}
	}
	if !fx.Planning() {
		e.Logf("kubelet-start", "kubelet restarted with the new identity and configuration")
	}
	return nil
}

// recordEnable notes in the journal (the flag of it enabled names), before unit is enabled,
// that this join is the one enabling it, so that reset disables only what the join enabled.
func recordEnable(ctx context.Context, e *host.Env, s *State, unit string, enabled func(*Journal) *bool) error {
	if s.Journal == nil || *enabled(s.Journal) || e.Fx().Planning() {
		return nil
	}
	if _, err := e.Exec.Run(ctx, "systemctl", "is-enabled", "--quiet", unit); err == nil {
		return nil
	}
	*enabled(s.Journal) = true
	if err := s.Journal.Save(e); err != nil {
		return fmt.Errorf("save journal: %w", err)
	}
	return nil
}
