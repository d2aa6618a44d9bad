package phases

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

// fakeEtcd is an in-memory etcd cluster for the control-plane phases: membership, member
// health, and a join lock that another joiner may hold.
type fakeEtcd struct {
	mu        sync.Mutex
	members   []*etcdserverpb.Member
	nextID    uint64
	unhealthy map[string]bool // client URLs whose Status fails
	revoked   []int64         // leases revoked
	// lockLeases are leases that hold a join lock key (only those may be revoked).
	lockLeases map[int64]bool
	// started reports whether a learner's etcd has started (it then publishes its name).
	started func() bool
	// promoteRefusals are returned by MemberPromote before it succeeds (-1: always refuse).
	promoteRefusals int
	lockHeld        bool // by another joiner
	// removeStops: a removal is applied, but answered as the removed member answers it
	// ("server stopped").
	removeStops    bool
	locks, unlocks int
	added, removed []uint64
	promoted       []uint64
	// onPromote is called when a member is promoted (nil: nothing).
	onPromote func()
}

func newFakeEtcd() *fakeEtcd {
	return &fakeEtcd{nextID: 0x100, unhealthy: map[string]bool{}, started: func() bool { return true },
		members: []*etcdserverpb.Member{{ID: 1, Name: "cp1", PeerURLs: []string{"https://10.0.0.11:2380"}, ClientURLs: []string{"https://10.0.0.11:2379"}}}}
}

func (f *fakeEtcd) dial([]string, *tls.Config) (etcd.Conn, error) { return f, nil }

func (f *fakeEtcd) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*etcdserverpb.Member
	for _, m := range f.members {
		c := copyMember(m)
		if c.Name == "" && f.started() {
			c.Name = "cp2"
		}
		out = append(out, c)
	}
	return &clientv3.MemberListResponse{Members: out}, nil
}

func (f *fakeEtcd) MemberAddAsLearner(_ context.Context, peers []string) (*clientv3.MemberAddResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		if m.PeerURLs[0] == peers[0] {
			return nil, rpctypes.ErrPeerURLExist
		}
	}
	m := &etcdserverpb.Member{ID: f.nextID, PeerURLs: peers, IsLearner: true}
	f.nextID++
	f.members = append(f.members, m)
	f.added = append(f.added, m.ID)
	return &clientv3.MemberAddResponse{Member: m, Members: append([]*etcdserverpb.Member{}, f.members...)}, nil
}

func (f *fakeEtcd) MemberPromote(_ context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.promoteRefusals != 0 {
		if f.promoteRefusals > 0 {
			f.promoteRefusals--
		}
		return nil, rpctypes.ErrMemberLearnerNotReady
	}
	for _, m := range f.members {
		if m.ID == id {
			m.IsLearner, m.Name = false, "cp2"
			f.promoted = append(f.promoted, id)
			if f.onPromote != nil {
				f.onPromote()
			}
			return &clientv3.MemberPromoteResponse{}, nil
		}
	}
	return nil, rpctypes.ErrMemberNotFound
}

func (f *fakeEtcd) MemberRemove(_ context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, m := range f.members {
		if m.ID == id {
			f.members = append(f.members[:i], f.members[i+1:]...)
			f.removed = append(f.removed, id)
			if f.removeStops {
				return nil, errors.New("etcdserver: server stopped")
			}
			return &clientv3.MemberRemoveResponse{}, nil
		}
	}
	return nil, rpctypes.ErrMemberNotFound
}

func (f *fakeEtcd) Status(_ context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unhealthy[endpoint] {
		return nil, errors.New("context deadline exceeded")
	}
	return &clientv3.StatusResponse{Leader: 1}, nil
}

func (f *fakeEtcd) NewLock(context.Context, int) (etcd.Locker, error) { return (*fakeLock)(f), nil }
func (f *fakeEtcd) Close() error                                      { return nil }

func (f *fakeEtcd) RevokeLockLease(_ context.Context, lease int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.lockLeases[lease] {
		return false, nil
	}
	f.revoked = append(f.revoked, lease)
	delete(f.lockLeases, lease)
	return true, nil
}

// member returns the member with a peer URL, or nil.
func (f *fakeEtcd) member(peerURL string) *etcdserverpb.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		if m.PeerURLs[0] == peerURL {
			return copyMember(m)
		}
	}
	return nil
}

type fakeLock fakeEtcd

func (l *fakeLock) Lease() int64 { return 0x4b1 }

func (l *fakeLock) TryLock(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lockHeld {
		return etcd.ErrLocked
	}
	l.locks++
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
	l.unlocks++
	return nil
}

func copyMember(m *etcdserverpb.Member) *etcdserverpb.Member {
	return &etcdserverpb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}
}
