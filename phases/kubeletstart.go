package phases

import (
	"context"
	"fmt"
	"strings"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// KubeletStart (re)starts the kubelet through the init system, as kubeadm does.
//
//	Reads:  s.Opts.DryRun, s.Changed() (an unchanged node with a running kubelet is left alone)
//	Writes: s.Journal.EnabledKubelet (the unit was disabled before); runs systemctl
//	        daemon-reload, enable, restart kubelet
var KubeletStart = Phase{Name: "kubelet-start", Short: "Enable and (re)start the kubelet", Run: runKubeletStart}

func runKubeletStart(ctx context.Context, e *host.Env, s *State) error {
	steps := [][]string{{"daemon-reload"}, {"enable", "kubelet"}, {"restart", "kubelet"}}
	if s.Opts.DryRun {
		for _, st := range steps {
			s.PlannedAPI = append(s.PlannedAPI, "run: systemctl "+strings.Join(st, " "))
		}
		return nil
	}
	if !s.Changed() {
		if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "kubelet"); err == nil {
			e.Logf("kubelet-start", "kubelet already running with this configuration; not restarted")
			return nil
		}
	}
	for _, st := range steps {
		if st[0] == "enable" {
			if err := recordEnable(ctx, e, s); err != nil {
				return err
			}
		}
		if _, err := e.Exec.Run(ctx, "systemctl", st...); err != nil {
			return operr.Wrap(operr.Other, err, "could not (re)start the kubelet", "check systemctl status kubelet and journalctl -xeu kubelet")
		}
	}
	s.MarkChanged()
	e.Logf("kubelet-start", "kubelet restarted with the new identity and configuration")
	return nil
}

// recordEnable notes in the journal, before enabling the kubelet unit, that this join is the
// one enabling it, so that reset disables only what the join enabled.
func recordEnable(ctx context.Context, e *host.Env, s *State) error {
	if s.Journal == nil || s.Journal.EnabledKubelet {
		return nil
	}
	if _, err := e.Exec.Run(ctx, "systemctl", "is-enabled", "--quiet", "kubelet"); err == nil {
		return nil
	}
	s.Journal.EnabledKubelet = true
	if err := s.Journal.Save(e); err != nil {
		return fmt.Errorf("save journal: %w", err)
	}
	return nil
}
