// Package etcdtest is an in-memory etcd cluster for unit tests of the control-plane join,
// reset and verify: membership, member health, and a join lock another joiner may hold. It
// implements etcd.Conn.
package etcdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kjoin.dev/kjoin/etcd"
)

// Cluster is an in-memory etcd cluster; New starts it with one member, cp1.
type Cluster struct {
	mu        sync.Mutex
	Members   []*etcdserverpb.Member
	NextID    uint64
	Unhealthy map[string]bool // client URLs whose Status fails
	Revoked   []int64         // leases revoked
	// LockLeases are leases that hold a join lock key (only those may be revoked).
	LockLeases map[int64]bool
	// Started reports whether a learner's etcd has started (it then publishes its name).
	Started func() bool
	// PromoteRefusals are returned by MemberPromote before it succeeds (-1: always refuse).
	PromoteRefusals int
	LockHeld        bool // by another joiner
	// RemoveStops: a removal is applied, but answered as the removed member answers it
	// ("server stopped").
	RemoveStops bool
	// RemoveError, when set, is MemberRemove's answer: the member stays.
	RemoveError error
	// MoveLeaderError, when set, is MoveLeader's answer: the leader stays.
	MoveLeaderError error
	Locks, Unlocks  int
	Added, Removed  []uint64
	Promoted        []uint64
	// OnPromote is called when a member is promoted (nil: nothing).
	OnPromote func()
	// OnRemove, when set, is called as a member is removed.
	OnRemove func()
	// Leader is the member every healthy one names as leader (New: cp1); MovedTo records
	// each leadership hand-off.
	Leader  uint64
	MovedTo []uint64
	// LeaderRemoved counts removals of the member that led at that moment.
	LeaderRemoved int
}

// New is a cluster of one healthy voter, cp1 (10.0.0.11).
func New() *Cluster {
	return &Cluster{NextID: 0x100, Unhealthy: map[string]bool{}, Started: func() bool { return true }, Leader: 1,
		Members: []*etcdserverpb.Member{{ID: 1, Name: "cp1", PeerURLs: []string{"https://10.0.0.11:2380"}, ClientURLs: []string{"https://10.0.0.11:2379"}}}}
}

// Dial is an etcd.Dial that answers with this cluster.
func (f *Cluster) Dial([]string, *tls.Config) (etcd.Conn, error) { return f, nil }

func (f *Cluster) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*etcdserverpb.Member
	for _, m := range f.Members {
		c := copyMember(m)
		if c.Name == "" && f.Started() {
			c.Name = "cp2"
		}
		out = append(out, c)
	}
	return &clientv3.MemberListResponse{Members: out}, nil
}

func (f *Cluster) MemberAddAsLearner(_ context.Context, peers []string) (*clientv3.MemberAddResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.Members {
		if m.PeerURLs[0] == peers[0] {
			return nil, rpctypes.ErrPeerURLExist
		}
	}
	m := &etcdserverpb.Member{ID: f.NextID, PeerURLs: peers, IsLearner: true}
	f.NextID++
	f.Members = append(f.Members, m)
	f.Added = append(f.Added, m.ID)
	return &clientv3.MemberAddResponse{Member: m, Members: append([]*etcdserverpb.Member{}, f.Members...)}, nil
}

func (f *Cluster) MemberPromote(_ context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.PromoteRefusals != 0 {
		if f.PromoteRefusals > 0 {
			f.PromoteRefusals--
		}
		return nil, rpctypes.ErrMemberLearnerNotReady
	}
	for _, m := range f.Members {
		if m.ID == id {
			m.IsLearner, m.Name = false, "cp2"
			f.Promoted = append(f.Promoted, id)
			if f.OnPromote != nil {
				f.OnPromote()
			}
			return &clientv3.MemberPromoteResponse{}, nil
		}
	}
	return nil, rpctypes.ErrMemberNotFound
}

func (f *Cluster) MemberRemove(_ context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.RemoveError != nil {
		return nil, f.RemoveError
	}
	for i, m := range f.Members {
		if m.ID == id {
			f.Members = append(f.Members[:i], f.Members[i+1:]...)
			f.Removed = append(f.Removed, id)
			if f.OnRemove != nil {
				f.OnRemove()
			}
			if id == f.Leader {
				f.LeaderRemoved++
			}
			if f.RemoveStops {
				return nil, errors.New("etcdserver: server stopped")
			}
			return &clientv3.MemberRemoveResponse{}, nil
		}
	}
	return nil, rpctypes.ErrMemberNotFound
}

func (f *Cluster) Status(_ context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Unhealthy[endpoint] {
		return nil, errors.New("connection refused")
	}
	return &clientv3.StatusResponse{Leader: f.Leader}, nil
}

// MoveLeader hands leadership to a voter, as etcd does when asked through the leader.
func (f *Cluster) MoveLeader(_ context.Context, id uint64) (*clientv3.MoveLeaderResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.MoveLeaderError != nil {
		return nil, f.MoveLeaderError
	}
	for _, m := range f.Members {
		if m.ID == id && !m.IsLearner {
			f.Leader = id
			f.MovedTo = append(f.MovedTo, id)
			return &clientv3.MoveLeaderResponse{}, nil
		}
	}
	return nil, rpctypes.ErrMemberNotFound
}

func (f *Cluster) NewLock(context.Context, int) (etcd.Locker, error) { return (*fakeLock)(f), nil }
func (f *Cluster) Close() error                                      { return nil }

func (f *Cluster) RevokeLockLease(_ context.Context, lease int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.LockLeases[lease] {
		return false, nil
	}
	f.Revoked = append(f.Revoked, lease)
	delete(f.LockLeases, lease)
	return true, nil
}

// Member returns the member with a peer URL, or nil.
func (f *Cluster) Member(peerURL string) *etcdserverpb.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.Members {
		if m.PeerURLs[0] == peerURL {
			return copyMember(m)
		}
	}
	return nil
}

type fakeLock Cluster

func (l *fakeLock) Lease() int64 { return 0x4b1 }

func (l *fakeLock) TryLock(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.LockHeld {
		return etcd.ErrLocked
	}
	l.Locks++
	return nil
}

// Lock waits for the other joiner, who never lets go in these tests: it ends with ctx.
func (l *fakeLock) Lock(ctx context.Context) error {
	if err := l.TryLock(ctx); err == nil {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (l *fakeLock) Unlock(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Unlocks++
	return nil
}

func copyMember(m *etcdserverpb.Member) *etcdserverpb.Member {
	return &etcdserverpb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}
}
