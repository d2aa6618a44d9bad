package etcd

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
)

// fakeCluster is an in-memory etcd membership.
type fakeCluster struct {
	mu            sync.Mutex
	members       []*etcdserverpb.Member
	nextID        uint64
	addErrs       []error // returned by successive MemberAddAsLearner calls first
	promoteFails  int     // promotions refused as "not in sync" before one succeeds
	started       bool    // the new member publishes its name once the manifest is written
	removed       []uint64
	addCalls      int
	promoteCalled int
}

func newFake() *fakeCluster {
	return &fakeCluster{nextID: 100, members: []*etcdserverpb.Member{{ID: 1, Name: "cp1", PeerURLs: []string{"https://10.0.0.1:2380"}}}}
}

func (f *fakeCluster) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ms []*etcdserverpb.Member
	for _, m := range f.members {
		c := &etcdserverpb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, IsLearner: m.IsLearner}
		if c.Name == "" && f.started {
			c.Name = "cp2"
		}
		ms = append(ms, c)
	}
	return &clientv3.MemberListResponse{Members: ms}, nil
}

func (f *fakeCluster) MemberAddAsLearner(_ context.Context, peers []string) (*clientv3.MemberAddResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addCalls++
	if len(f.addErrs) > 0 {
		err := f.addErrs[0]
		f.addErrs = f.addErrs[1:]
		return nil, err
	}
	for _, m := range f.members {
		if m.PeerURLs[0] == peers[0] {
			return nil, rpctypes.ErrPeerURLExist
		}
	}
	m := &etcdserverpb.Member{ID: f.nextID, PeerURLs: peers, IsLearner: true}
	f.nextID++
	f.members = append(f.members, m)
	return &clientv3.MemberAddResponse{Member: m, Members: append([]*etcdserverpb.Member{}, f.members...)}, nil
}

func (f *fakeCluster) MemberPromote(_ context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promoteCalled++
	if f.promoteFails > 0 {
		f.promoteFails--
		return nil, rpctypes.ErrMemberLearnerNotReady
	}
	for _, m := range f.members {
		if m.ID == id {
			m.IsLearner = false
			m.Name = "cp2"
			return &clientv3.MemberPromoteResponse{}, nil
		}
	}
	return nil, rpctypes.ErrMemberNotFound
}

func (f *fakeCluster) MemberRemove(_ context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	for i, m := range f.members {
		if m.ID == id {
			f.members = append(f.members[:i], f.members[i+1:]...)
		}
	}
	return &clientv3.MemberRemoveResponse{}, nil
}

type fakeLock struct {
	busy             bool
	locked, unlocked int
	waited           bool
}

func (l *fakeLock) TryLock(context.Context) error {
	if l.busy {
		return ErrLocked
	}
	l.locked++
	return nil
}
func (l *fakeLock) Lock(context.Context) error   { l.waited = true; l.locked++; return nil }
func (l *fakeLock) Unlock(context.Context) error { l.unlocked++; return nil }

func newJoin(f *fakeCluster, l *fakeLock, logs *[]string) (*Join, *[][]Member) {
	var manifests [][]Member
	return &Join{
		Cluster: f, Lock: l, Name: "cp2", PeerURL: "https://10.0.0.2:2380",
		Timeout: 2 * time.Second, Interval: 5 * time.Millisecond, CallTimeout: time.Second, Clock: clock.RealClock{},
		Logf: func(format string, a ...any) { *logs = append(*logs, format) },
		WriteManifest: func(ms []Member) error {
			manifests = append(manifests, ms)
			f.mu.Lock()
			f.started = true
			f.mu.Unlock()
			return nil
		},
	}, &manifests
}

func TestJoinAddsLearnerThenPromotes(t *testing.T) {
	f := newFake()
	f.promoteFails = 3
	f.addErrs = []error{rpctypes.ErrUnhealthy, rpctypes.ErrUnhealthy}
	l := &fakeLock{}
	var logs []string
	j, manifests := newJoin(f, l, &logs)
	res, err := j.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Added || res.ID != 100 || f.addCalls != 3 || f.promoteCalled != 4 {
		t.Errorf("res %+v adds %d promotes %d", res, f.addCalls, f.promoteCalled)
	}
	if len(*manifests) != 1 || len((*manifests)[0]) != 2 || (*manifests)[0][1] != (Member{"cp2", "https://10.0.0.2:2380"}) || (*manifests)[0][0].Name != "cp1" {
		t.Errorf("initial cluster %+v", *manifests)
	}
	if l.locked != 1 || l.unlocked != 1 {
		t.Errorf("lock taken %d released %d", l.locked, l.unlocked)
	}
	ms, _ := f.MemberList(context.Background())
	for _, m := range ms.Members {
		if m.IsLearner {
			t.Errorf("stray learner %+v", m)
		}
	}
}

func TestJoinRerunIsIdempotent(t *testing.T) {
	f := newFake()
	f.members = append(f.members, &etcdserverpb.Member{ID: 7, Name: "cp2", PeerURLs: []string{"https://10.0.0.2:2380"}})
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	res, err := j.Run(context.Background())
	if err != nil || !res.AlreadyVoting || res.Added || f.addCalls != 0 || f.promoteCalled != 0 {
		t.Fatalf("res %+v err %v adds %d promotes %d", res, err, f.addCalls, f.promoteCalled)
	}

	// An unpromoted learner from an interrupted run is promoted, not added again.
	f = newFake()
	f.members = append(f.members, &etcdserverpb.Member{ID: 8, PeerURLs: []string{"https://10.0.0.2:2380"}, IsLearner: true})
	j, _ = newJoin(f, &fakeLock{}, &logs)
	res, err = j.Run(context.Background())
	if err != nil || res.ID != 8 || res.Added || f.addCalls != 0 {
		t.Fatalf("res %+v err %v adds %d", res, err, f.addCalls)
	}
}

func TestJoinRemovesItsLearnerOnFailure(t *testing.T) {
	f := newFake()
	f.promoteFails = 1 << 30
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.Timeout = 200 * time.Millisecond
	_, err := j.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not catch up") {
		t.Fatalf("err %v", err)
	}
	if len(f.removed) != 1 || f.removed[0] != 100 {
		t.Errorf("removed %v, want the learner 100 this run added", f.removed)
	}
}

func TestJoinWaitsForAnotherJoiner(t *testing.T) {
	f := newFake()
	l := &fakeLock{busy: true}
	var logs []string
	j, _ := newJoin(f, l, &logs)
	if _, err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !l.waited || !strings.Contains(strings.Join(logs, "\n"), "another control-plane node is joining") {
		t.Errorf("waited=%v logs %v", l.waited, logs)
	}
}

func TestNonRetryableAddFails(t *testing.T) {
	f := newFake()
	f.addErrs = []error{errors.New("permission denied")}
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	if _, err := j.Run(context.Background()); err == nil || f.addCalls != 1 {
		t.Fatalf("err %v after %d adds", err, f.addCalls)
	}
}
