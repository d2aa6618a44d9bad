package etcd

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/operr"
)

// Member is an etcd member for the manifest's --initial-cluster.
type Member struct{ Name, PeerURL string }

// Retryable reports whether etcd refused a call for a passing reason: membership changed a
// moment ago ("unhealthy cluster"), no leader, a leader change, a timeout.
func Retryable(err error) bool {
	for _, e := range []error{rpctypes.ErrUnhealthy, rpctypes.ErrTooManyLearners, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
		rpctypes.ErrLeaderChanged, rpctypes.ErrNoLeader, rpctypes.ErrNotCapable, context.DeadlineExceeded} {
		if errors.Is(err, e) || strings.Contains(err.Error(), e.Error()) {
			return true
		}
	}
	return false
}

func etcdError(err error, what string) error {
	if strings.Contains(err.Error(), "too many learner members") {
		return &operr.Error{Code: operr.Busy, Retryable: true, Err: err, What: what + ": etcd already has a learner (another join in progress or a stray learner)",
			Hint: "wait for the other join, or remove a stray learner with etcdctl member remove"}
	}
	return operr.Wrap(operr.Other, err, what, "")
}

// backoff is the retry schedule of membership changes etcd refuses for a while (it refuses
// them until every member has been connected for a few seconds): from initial, doubling, at
// most 1 s apart, so a join proceeds within a second of etcd allowing it.
func backoff(initial time.Duration) wait.Backoff {
	return wait.Backoff{Duration: initial, Factor: 2, Cap: time.Second, Steps: math.MaxInt32}
}

// RemoveMember removes a member, retrying passing refusals (etcd refuses membership changes
// for a few seconds after the last one) until ctx ends.
func RemoveMember(ctx context.Context, c Cluster, id uint64, clk clock.Clock) error {
	return retryPassing(ctx, clk, backoff(500*time.Millisecond), 5*time.Second, nil, func(cctx context.Context) error {
		_, err := c.MemberRemove(cctx, id)
		if errors.Is(err, rpctypes.ErrMemberNotFound) {
			return nil
		}
		return err
	})
}

// retryPassing calls fn with a per-call timeout until it succeeds or fails for a reason etcd
// does not report as passing (Retryable), stepping bo on clk between calls; when ctx ends it
// returns fn's last error. It is a hand loop, not wait.ExponentialBackoffWithContext, because
// it waits on the injected clock (tests step a fake one) and keeps etcd's own last error
// rather than wait's "timed out waiting for the condition".
func retryPassing(ctx context.Context, clk clock.Clock, bo wait.Backoff, callTimeout time.Duration, logf func(string, ...any), fn func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := fn(cctx)
		cancel()
		if err == nil || !Retryable(err) {
			return err
		}
		if logf != nil {
			logf("%v (retrying)", err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-clk.After(bo.Step()):
		}
	}
}
