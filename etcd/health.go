package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Health is what one member answers about itself.
type Health struct {
	Err    error  // it did not answer
	Leader uint64 // the leader it follows; 0: it has none (its cluster lost quorum)
}

// OK reports whether the member answered and has a leader.
func (h Health) OK() bool { return h.Err == nil && h.Leader != 0 }

func (h Health) String() string {
	switch {
	case h.Err != nil:
		return "unreachable"
	case h.Leader == 0:
		return "no leader"
	default:
		return fmt.Sprintf("leader %x", h.Leader)
	}
}

// Probe asks the member at endpoint (a client URL) for its status, within 2 s: the one
// health check of joins, reset and their error messages.
func Probe(ctx context.Context, status func(context.Context, string) (*clientv3.StatusResponse, error), endpoint string) Health {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := status(cctx, endpoint)
	if err != nil {
		return Health{Err: err}
	}
	return Health{Leader: st.Leader}
}
