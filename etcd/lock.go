package etcd

import (
	"context"
	"errors"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// LockKey is the etcd key prefix of the control-plane join lock.
const LockKey = "/kjoin.dev/control-plane-join-lock"

// Locker serializes joiners.
type Locker interface {
	// TryLock takes the lock or returns ErrLocked at once.
	TryLock(ctx context.Context) error
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	// Lease is the ID of the lease that holds (or waits for) the lock.
	Lease() int64
}

// ErrLocked means another joiner holds the lock.
var ErrLocked = concurrency.ErrLocked

// IsLockLease reports whether a lease's attached keys are exactly the join lock's key for it
// (concurrency.Mutex names its key <prefix>/<lease in hex>).
func IsLockLease(lease int64, keys [][]byte) bool {
	return len(keys) == 1 && string(keys[0]) == LockKey+"/"+strconv.FormatInt(lease, 16)
}

// MutexLock is a Locker backed by an etcd session and mutex.
type MutexLock struct {
	cli     *clientv3.Client
	session *concurrency.Session
	mutex   *concurrency.Mutex
}

// NewMutexLock creates the join lock on cli. The session's lease (TTL seconds) releases the
// lock if this process dies. The lease is granted under ctx, so a cluster without quorum
// fails here instead of hanging.
func NewMutexLock(ctx context.Context, cli *clientv3.Client, ttl int) (*MutexLock, error) {
	lease, err := cli.Grant(ctx, int64(ttl))
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID))
	if err != nil {
		return nil, err
	}
	return &MutexLock{cli: cli, session: s, mutex: concurrency.NewMutex(s, LockKey)}, nil
}

// Lease implements Locker.
func (m *MutexLock) Lease() int64 { return int64(m.session.Lease()) }

// TryLock implements Locker.
func (m *MutexLock) TryLock(ctx context.Context) error { return m.mutex.TryLock(ctx) }

// Lock implements Locker.
func (m *MutexLock) Lock(ctx context.Context) error { return m.mutex.Lock(ctx) }

// Unlock implements Locker and ends the session, both within ctx (Session.Close would wait
// up to the lease's TTL when etcd has no quorum; the lease expires by itself then).
func (m *MutexLock) Unlock(ctx context.Context) error {
	err := m.mutex.Unlock(ctx)
	m.session.Orphan()
	if _, rerr := m.cli.Revoke(ctx, m.session.Lease()); err == nil && rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
		err = rerr
	}
	return err
}
