package phases

import (
	"context"
	"maps"
	"slices"
	"strings"

	cc "kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/host"
)

// ControlPlaneStart writes the kube-apiserver, kube-controller-manager and kube-scheduler
// manifests once this node's etcd member votes, so the kubelet starts them when their storage
// answers. The API server talks to the local etcd member only: started before it (kubeadm
// writes these manifests before the kubelet starts), it backs off its etcd connection for
// seconds after etcd is up, and the Node registers that much later; the controller-manager
// and scheduler need that API server, and starting them later leaves the CPU to etcd's start.
//
//	Reads:  s.ControlPlanePods (rendered and patched by control-plane-prepare; run alone, it renders
//	        them from the cluster's ClusterConfiguration read with the bootstrap identity), s.Opts
//	Writes: /etc/kubernetes/manifests/{kube-apiserver,kube-controller-manager,kube-scheduler}.yaml;
//	        s.Cluster and s.ControlPlanePods when run alone
var ControlPlaneStart = Phase{
	Name: "control-plane-start", Short: "Write the API server, controller-manager and scheduler manifests once etcd is ready",
	Needs: []string{"discovery"}, Skip: workerSkip, Run: runControlPlaneStart,
}

func runControlPlaneStart(ctx context.Context, e *host.Env, s *State) error {
	if s.ControlPlanePods == nil { // kjoin join phase control-plane-start
		if s.Cluster == nil {
			cfg, err := cc.Fetch(ctx, s.BootstrapClient, "the bootstrap token")
			if err != nil {
				return err
			}
			s.Cluster = cfg
		}
		pods, err := renderControlPlane(e, s)
		if err != nil {
			return err
		}
		s.ControlPlanePods = pods
	}
	names := slices.Sorted(maps.Keys(s.ControlPlanePods))
	for _, name := range names {
		if err := writePatchedManifest(e, s, name, s.ControlPlanePods[name]); err != nil {
			return err
		}
	}
	e.Logf("control-plane-start", "wrote the %s manifests", strings.Join(names, ", "))
	return nil
}
