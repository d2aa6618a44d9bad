package diagnose

import (
	"context"

	"kjoin.dev/kjoin/cri"
)

// DialRuntime connects to a CRI runtime service on a unix socket (unix:///path), under root
// (the host root the paths live under; "/" on a real node).
func DialRuntime(root string) func(ctx context.Context, endpoint string) (Runtime, error) {
	return func(_ context.Context, endpoint string) (Runtime, error) {
		return cri.Dial(root, endpoint)
	}
}
