package diagnose

import (
	"context"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/host"
)

// DialRuntime connects to a CRI runtime service on a unix socket (unix:///path) under the
// host's root (e.Paths; "/" on a real node).
func DialRuntime(e *host.Env) func(ctx context.Context, endpoint string) (Runtime, error) {
	return func(_ context.Context, endpoint string) (Runtime, error) {
		return cri.Dial(e.Paths.Root, endpoint)
	}
}
