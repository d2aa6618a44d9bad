package phases

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"time"
)

// ResetStaticPods removes the static pod manifests (while the kubelet still runs, so it stops
// them) and waits until their ports are free.
//
//	Reads:  s.Reset.APIServerPort; /etc/kubernetes/manifests
//	Writes: s.Reset.Report.RemovedFiles
var ResetStaticPods = Phase{Name: "remove-static-pods", Short: "Remove the static pod manifests and wait for their ports", Run: runResetStaticPods}

func runResetStaticPods(ctx context.Context, e *Env, s *State) error {
	r := s.Reset.Report
	manifests, _ := filepath.Glob(e.Paths.Of(path.Join(ManifestsDir, "*.yaml")))
	for _, m := range manifests {
		hostPath, err := confined(e, path.Join(ManifestsDir, filepath.Base(m)), []string{ManifestsDir})
		if err != nil {
			s.Warn(e, "remove-static-pods", "not removing %s: %v", m, err)
			continue
		}
		if err := os.Remove(m); err == nil {
			r.RemovedFiles = append(r.RemovedFiles, hostPath)
			s.MarkChanged()
		}
	}
	if len(manifests) > 0 {
		waitPortsFree(ctx, e, []int{s.Reset.APIServerPort, 2379, 2380, 10257, 10259}, 60*time.Second)
	}
	return nil
}

func waitPortsFree(ctx context.Context, e *Env, ports []int, timeout time.Duration) {
	_ = e.Poll(ctx, 250*time.Millisecond, timeout, func(context.Context) (bool, error) {
		for _, p := range ports {
			if e.PortInUse(p) {
				return false, nil
			}
		}
		return true, nil
	})
}
