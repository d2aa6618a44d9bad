package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Cluster is the part of clientv3.Cluster a join uses.
type Cluster interface {
	MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error)
	MemberAddAsLearner(ctx context.Context, peerAddrs []string) (*clientv3.MemberAddResponse, error)
	MemberPromote(ctx context.Context, id uint64) (*clientv3.MemberPromoteResponse, error)
	MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error)
}

// Conn is an etcd connection as a join or reset uses it: membership, member health and the
// join lock. Dial returns the real one; tests give a fake.
type Conn interface {
	Cluster
	// Status asks one member (its client URL) for its status: an error means unhealthy.
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
	// NewLock creates the join lock; its lease (ttl seconds) releases it if this process dies.
	// ctx bounds the lease grant (which needs quorum), not the lock's life.
	NewLock(ctx context.Context, ttl int) (Locker, error)
	// RevokeLockLease revokes a lease an interrupted run recorded, only when it is a lease of
	// the join lock: its one attached key is the lock's key for that very lease (any other
	// lease, such as the API server's, is left alone). revoked is false when it was not.
	RevokeLockLease(ctx context.Context, lease int64) (revoked bool, err error)
	// MoveLeader asks the leader (the connection's endpoint must be the leader) to hand its
	// leadership to another voter.
	MoveLeader(ctx context.Context, transfereeID uint64) (*clientv3.MoveLeaderResponse, error)
	Close() error
}

// Dial connects to etcd endpoints with a client certificate.
func Dial(endpoints []string, tlsCfg *tls.Config) (Conn, error) {
	// The client's own retry warnings would land on the operator's terminal as JSON lines;
	// every failure reaches the caller as an error instead.
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tlsCfg, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	return &conn{Client: cli}, nil
}

type conn struct{ *clientv3.Client }

func (c *conn) NewLock(ctx context.Context, ttl int) (Locker, error) {
	return NewMutexLock(ctx, c.Client, ttl)
}

func (c *conn) RevokeLockLease(ctx context.Context, lease int64) (bool, error) {
	ttl, err := c.TimeToLive(ctx, clientv3.LeaseID(lease), clientv3.WithAttachedKeys())
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, nil
		}
		return false, err
	}
	if ttl.TTL <= 0 || !IsLockLease(lease, ttl.Keys) {
		return false, nil
	}
	if _, err := c.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
