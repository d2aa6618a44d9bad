package phases

import (
	"context"
	"os"
	"path"
	"strings"
	"time"

	"kjoin.dev/kjoin/host"
)

// ResetStaticPods removes the join's static pod manifests (while the kubelet still runs, so
// it stops them) and waits until their ports are free: those the journal lists, or kubeadm's
// four on a node kubeadm joined, never another static pod (an operator's kube-vip.yaml).
//
//	Reads:  s.Journal, s.Journaled, s.APIServerPort, s.Opts.DryRun; /etc/kubernetes/manifests
//	Writes: s.Report.RemovedFiles
var ResetStaticPods = ResetPhase{Name: "remove-static-pods", Short: "Remove the join's static pod manifests and wait for their ports", Run: runResetStaticPods}

func runResetStaticPods(ctx context.Context, e *host.Env, s *ResetState) error {
	removeStaticPods(ctx, e, s, "remove-static-pods", "", []int{s.APIServerPort, 2379, 2380, 10257, 10259})
	return nil
}

// LeaveStopControlPlane removes the join's static pod manifests but etcd's (the kubelet stops
// the API server, controller-manager and scheduler) and waits for their ports, so that this
// node serves no API while its etcd member is removed; etcd's own goes in remove-static-pods.
//
//	Reads:  s.Journal, s.Journaled, s.APIServerPort, s.Opts.DryRun; /etc/kubernetes/manifests
//	Writes: s.Report.RemovedFiles
var LeaveStopControlPlane = ResetPhase{Name: "stop-control-plane", Short: "Stop the API server, controller-manager and scheduler (etcd stays)", Run: runLeaveStopControlPlane}

func runLeaveStopControlPlane(ctx context.Context, e *host.Env, s *ResetState) error {
	removeStaticPods(ctx, e, s, "stop-control-plane", path.Join(host.ManifestsDir, "etcd.yaml"), []int{s.APIServerPort, 10257, 10259})
	return nil
}

// removeStaticPods removes the join's static pod manifests but keep (while the kubelet still
// runs, so it stops them) and waits until ports are free.
func removeStaticPods(ctx context.Context, e *host.Env, s *ResetState, phase, keep string, ports []int) {
	r := s.Report
	removed := 0
	for _, t := range resetTargets(s) {
		if path.Dir(path.Clean(t)) != host.ManifestsDir || !strings.HasSuffix(t, ".yaml") || path.Clean(t) == keep {
			continue
		}
		hostPath, err := confined(e, t, []string{host.ManifestsDir})
		if err != nil {
			s.Warn(e, phase, "not removing %s: %v", t, err)
			continue
		}
		if st, err := os.Lstat(e.Paths.Of(hostPath)); err != nil || !st.Mode().IsRegular() {
			continue
		}
		if ok, err := s.remove(e, phase, hostPath); err == nil && ok {
			r.RemovedFiles = append(r.RemovedFiles, hostPath)
			removed++
		}
	}
	if removed > 0 {
		waitPortsFree(ctx, e, ports, 60*time.Second)
	}
}

func waitPortsFree(ctx context.Context, e *host.Env, ports []int, timeout time.Duration) {
	_ = e.Poll(ctx, 250*time.Millisecond, timeout, func(context.Context) (bool, error) {
		for _, p := range ports {
			if e.PortInUse(p) {
				return false, nil
			}
		}
		return true, nil
	})
}
