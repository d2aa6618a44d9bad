package phases

import (
	"context"
	"fmt"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// KubeletStart (re)starts the kubelet through the init system, as kubeadm does. A control
// plane with stacked etcd whose run goes on to etcd-join leaves the restart to it: etcd-join
// starts the kubelet once it holds the etcd join lock (the kubelet runs the etcd static pod),
// so a control plane waiting its turn behind others has no kubelet yet. Started earlier, that
// kubelet would try to register with its own API server, which serves only after this node's
// etcd member has joined, and its retries would back off to 7 s apart by then.
//
//	Reads:  s.Changed() (an unchanged node with a running kubelet is left alone),
//	        s.etcdJoinFollows, s.Cluster (stacked etcd)
//	Writes: s.Journal.EnabledKubelet (the unit was disabled before), s.startKubelet (the
//	        restart left to etcd-join); runs systemctl daemon-reload, enable, restart kubelet
var KubeletStart = Phase{Name: "kubelet-start", Short: "Enable and (re)start the kubelet", Run: runKubeletStart}

func runKubeletStart(ctx context.Context, e *host.Env, s *State) error {
	fx := e.Fx()
	if !fx.Planning() && !s.Changed() {
		if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "kubelet"); err == nil {
			e.Logf("kubelet-start", "kubelet already running with this configuration; not restarted")
			return nil
		}
	}
	if err := fx.Service(ctx, "daemon-reload", ""); err != nil {
		return kubeletStartError(err)
	}
	kubeletEnabled := func(j *Journal) *bool { return &j.EnabledKubelet }
	if err := recordEnable(ctx, e, s, "kubelet", kubeletEnabled); err != nil {
		return err
	}
	if err := fx.Service(ctx, "enable", "kubelet"); err != nil {
		return kubeletStartError(err)
	}
	restart := func(ctx context.Context) error {
		if err := fx.Service(ctx, "restart", "kubelet"); err != nil {
			return kubeletStartError(err)
		}
		if !fx.Planning() {
			e.Logf("kubelet-start", "kubelet restarted with the new identity and configuration")
		}
		return nil
	}
	if !fx.Planning() && s.Opts.ControlPlane && s.etcdJoinFollows && EtcdJoin.Skip(s) == "" {
		s.startKubelet = restart
		e.Logf("kubelet-start", "kubelet enabled; etcd-join starts it once this node's turn to join etcd comes")
		return nil
	}
	return restart(ctx)
}

func kubeletStartError(err error) error {
	return operr.Wrap(operr.Other, err, "could not (re)start the kubelet", "check systemctl status kubelet and journalctl -xeu kubelet")
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
