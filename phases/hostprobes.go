package phases

import (
	"context"
	"sync"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/host"
)

// hostProbes are version-check's two local questions, asked in the background from the start
// of preflight: the kubelet binary's version (kubelet --version, the process start of a ~90 MB
// binary: 30–40 ms, a third of a worker join's own time) and the container runtime's CRI
// answer. Both are read-only and need nothing from the cluster, so they run while preflight
// and discovery do; version-check waits for them. A run that skips preflight (or runs
// version-check alone) asks them in version-check itself, as before.
type hostProbes struct {
	done chan struct{}

	kubelet    string
	kubeletErr error
	runtime    *cri.Info
	runtimeErr error
}

// startHostProbes starts both questions; s.Opts.CRISocket must be set (Defaults fills it).
func startHostProbes(ctx context.Context, e *host.Env, s *State) *hostProbes {
	p := &hostProbes{done: make(chan struct{})}
	socket := s.Opts.CRISocket
	go func() {
		defer close(p.done)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); p.runtime, p.runtimeErr = describeRuntime(ctx, e, socket) }()
		p.kubelet, p.kubeletErr = kubeletVersion(ctx, e)
		wg.Wait()
	}()
	return p
}

// wait returns once both answers are in, or ctx's error.
func (p *hostProbes) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
