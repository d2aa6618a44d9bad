package phases

import (
	"context"
	"time"

	"kjoin.dev/kjoin/host"
)

// ResetContainers removes the pods the kubelet left in the container runtime (their sandboxes
// and containers, through the CRI), once the kubelet is stopped, as kubeadm reset does: a
// workload container would otherwise keep running, holding its ports and mounts, on a node
// that left the cluster. The runtime itself, its images and anything it holds outside pods stay.
//
//	Reads:  the kubelet service state, the runtime endpoint (kubeadm-flags.env, config.yaml,
//	        instance-config.yaml), s.Opts.DryRun
//	Writes: s.Report.RemovedPods; the runtime's pod sandboxes
var ResetContainers = ResetPhase{
	Name: "remove-containers", Short: "Remove the pods left in the container runtime (CRI)", Run: runResetContainers,
	Skip: func(s *ResetState) string {
		if !s.holdsJoin {
			return "this node holds no join"
		}
		return ""
	},
}

func runResetContainers(ctx context.Context, e *host.Env, s *ResetState) error {
	warn := func(format string, a ...any) { s.Warn(e, "remove-containers", format, a...) }
	if e.Sandboxes == nil {
		return nil
	}
	if !s.Opts.DryRun {
		if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "kubelet"); err == nil {
			warn("the kubelet still runs, so it would start the pods again: pods not removed (stop the kubelet, then run kjoin reset again)")
			return nil
		}
	}
	endpoint := host.RuntimeEndpoint(e)
	rt, err := e.Sandboxes(endpoint)
	if err != nil {
		warn("cannot reach the container runtime at %s (%v): its pods were not removed (crictl rmp -fa removes them)", endpoint, err)
		return nil
	}
	defer rt.Close()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pods, err := rt.PodSandboxes(cctx)
	if err != nil {
		warn("the container runtime at %s did not list its pods (%v): they were not removed (crictl rmp -fa removes them)", endpoint, err)
		return nil
	}
	for _, p := range pods {
		if s.Opts.DryRun {
			s.Change(e, "remove-containers", host.EffectRuntime, "remove pod %s (sandbox %.13s) from the container runtime", p.Name, p.ID)
			continue
		}
		if err := rt.RemovePodSandbox(cctx, p.ID); err != nil {
			warn("could not remove pod %s: %v", p.Name, err)
			continue
		}
		s.Report.RemovedPods = append(s.Report.RemovedPods, p.Name)
		s.Change(e, "remove-containers", host.EffectRuntime, "remove pod %s (sandbox %.13s) from the container runtime", p.Name, p.ID)
	}
	if n := len(s.Report.RemovedPods); n > 0 {
		e.Logf("remove-containers", "removed %d pods from the container runtime at %s", n, endpoint)
	}
	return nil
}
