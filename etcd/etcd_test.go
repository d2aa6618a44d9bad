package etcd

import (
	"context"
	"errors"
	"slices"
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
	noQuorum      bool // membership calls fail as etcd does without a leader
	members       []*etcdserverpb.Member
	nextID        uint64
	addErrs       []error // returned by successive MemberAddAsLearner calls first
	promoteFails  int     // promotions refused as "not in sync" before one succeeds
	removeFails   int     // removals refused as etcd does while its leader changes, before one succeeds
	started       bool    // the new member publishes its name once the manifest is written
	removed       []uint64
	addCalls      int
	promoteCalled int
	events        []string // "promote", "restart", in order
	onPromote     func()   // called under mu when a member is promoted
	calls         []string // membership calls ("list", "add", "promote", "remove") and "status" (a test's Status)
}

func (f *fakeCluster) call(name string) {
	f.mu.Lock()
	f.calls = append(f.calls, name)
	f.mu.Unlock()
}

// callsAfter returns the calls after the first one named from.
func (f *fakeCluster) callsAfter(from string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(f.calls, from)
	if i < 0 {
		return nil
	}
	return slices.Clone(f.calls[i+1:])
}

func newFake() *fakeCluster {
	return &fakeCluster{nextID: 100, members: []*etcdserverpb.Member{{ID: 1, Name: "cp1", PeerURLs: []string{"https://10.0.0.1:2380"}, ClientURLs: []string{"https://10.0.0.1:2379"}}}}
}

func (f *fakeCluster) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	f.call("list")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noQuorum {
		return nil, rpctypes.ErrTimeout
	}
	var ms []*etcdserverpb.Member
	for _, m := range f.members {
		c := &etcdserverpb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, IsLearner: m.IsLearner, ClientURLs: m.ClientURLs}
		if c.Name == "" && f.started {
			c.Name, c.ClientURLs = "cp2", []string{"https://10.0.0.2:2379"}
		}
		ms = append(ms, c)
	}
	return &clientv3.MemberListResponse{Members: ms}, nil
}

func (f *fakeCluster) MemberAddAsLearner(_ context.Context, peers []string) (*clientv3.MemberAddResponse, error) {
	f.call("add")
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
	f.call("promote")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promoteCalled++
	if f.noQuorum {
		return nil, rpctypes.ErrNoLeader
	}
	if f.promoteFails > 0 {
		f.promoteFails--
		return nil, rpctypes.ErrMemberLearnerNotReady
	}
	for _, m := range f.members {
		if m.ID == id {
			m.IsLearner = false
			m.Name = "cp2"
			f.events = append(f.events, "promote")
			if f.onPromote != nil {
				f.onPromote()
			}
			return &clientv3.MemberPromoteResponse{}, nil
		}
	}
	return nil, rpctypes.ErrMemberNotFound
}

func (f *fakeCluster) MemberRemove(_ context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	f.call("remove")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noQuorum {
		return nil, errors.New("etcdserver: request timed out")
	}
	if f.removeFails > 0 {
		f.removeFails--
		return nil, rpctypes.ErrLeaderChanged
	}
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
func (l *fakeLock) Lease() int64                 { return 1 }

func newJoin(f *fakeCluster, l *fakeLock, logs *[]string) (*Join, *[][]Member) {
	var manifests [][]Member
	return &Join{
		Cluster: f, Lock: l, Name: "cp2", PeerURL: "https://10.0.0.2:2380",
		Timeout: 2 * time.Second, Interval: 5 * time.Millisecond, CallTimeout: time.Second, Clock: clock.RealClock{},
		Peer: func(context.Context, string) bool { return true }, DeadAfter: 20 * time.Millisecond,
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

// A voter stops while the learner waits to be promoted (2 voters, quorum lost): the join
// fails QuorumGrace after it first saw the loss, naming quorum, not after its timeout. From
// that moment it only asks the voters for their status: a membership call without quorum
// waits out its call timeout, and a removal of the learner could not succeed, so it is not
// tried and the error names the learner left behind; the manifest is removed, the data kept.
func TestJoinFailsFastWhenQuorumIsLost(t *testing.T) {
	f := newFake()
	f.members = append(f.members, &etcdserverpb.Member{ID: 2, Name: "cp3", PeerURLs: []string{"https://10.0.0.3:2380"}, ClientURLs: []string{"https://10.0.0.3:2379"}})
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.Timeout, j.QuorumGrace = time.Minute, 50*time.Millisecond
	j.Status = func(_ context.Context, ep string) (*clientv3.StatusResponse, error) {
		f.call("status")
		if ep == "https://10.0.0.3:2379" {
			return nil, context.DeadlineExceeded
		}
		return &clientv3.StatusResponse{}, nil // answers, but has no leader
	}
	var removedManifest, wiped int
	j.RemoveManifest = func(wipe bool) error {
		removedManifest++
		if wipe {
			wiped++
		}
		return nil
	}
	j.At = func(p string) {
		if p == "etcd-join/promoting" {
			f.mu.Lock()
			f.noQuorum = true
			f.mu.Unlock()
		}
	}
	start := time.Now()
	_, err := j.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "etcd lost quorum during the join: 0 of 2 voting members have a leader (cp1: no leader, cp3: unreachable)") {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(err.Error(), "learner 64 this join added could not be removed (etcd has no quorum)") {
		t.Errorf("error does not name the learner left behind: %v", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("took %s: waited for the timeout instead of failing on lost quorum", time.Since(start))
	}
	if removedManifest != 1 || wiped != 0 {
		t.Errorf("manifest removals %d, data wiped %d; want 1 and 0", removedManifest, wiped)
	}
	after := f.callsAfter("status")
	if len(after) < 4 {
		t.Errorf("calls after the loss was first seen: %v; want the voters asked again until the grace ended", after)
	}
	for _, c := range after {
		if c != "status" {
			t.Errorf("calls after the loss was first seen: %v; want only status probes (no membership call, no removal)", after)
			break
		}
	}
}

// A leader election while the learner waits to be promoted: the join asks only the voters'
// status until one has a leader again, then promotes; it does not fail within its grace.
func TestJoinWaitsOutALeaderElectionOnStatus(t *testing.T) {
	f := newFake()
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.Timeout, j.QuorumGrace = time.Minute, time.Minute
	probes := 0
	j.Status = func(context.Context, string) (*clientv3.StatusResponse, error) {
		f.call("status")
		probes++
		if probes < 4 {
			return &clientv3.StatusResponse{}, nil // no leader
		}
		f.mu.Lock()
		f.noQuorum = false
		f.mu.Unlock()
		return &clientv3.StatusResponse{Leader: 1}, nil
	}
	j.At = func(p string) {
		if p == "etcd-join/promoting" {
			f.mu.Lock()
			f.noQuorum = true
			f.mu.Unlock()
		}
	}
	if _, err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, want := f.callsAfter("status"), []string{"status", "status", "status", "list", "promote"}; !slices.Equal(after, want) {
		t.Errorf("calls after the loss was first seen: %v; want %v", after, want)
	}
	if !slices.Contains(logs, "etcd has a leader again after %s") {
		t.Errorf("logs %q: no word of the leader's return", logs)
	}
}

// A failed join whose learner was removed removes the manifest and wipes the data dir, so
// the kubelet never starts an etcd of a removed member.
func TestJoinFailureRemovesManifestAndData(t *testing.T) {
	f := newFake()
	f.promoteFails = 1 << 30
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.Timeout = 200 * time.Millisecond
	var calls []bool
	j.RemoveManifest = func(wipe bool) error { calls = append(calls, wipe); return nil }
	if _, err := j.Run(context.Background()); err == nil {
		t.Fatal("join succeeded")
	}
	if len(f.removed) != 1 || len(calls) != 1 || !calls[0] {
		t.Errorf("removed %v, manifest removals (wipe) %v", f.removed, calls)
	}
}

// A learner that has started (its name is listed) but does not serve clients is restarted,
// once, and promoted only when it serves again; one that serves is left alone.
func TestJoinRestartsAStalledLearner(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stalled     bool
		restartErr  error
		wantRestart int
	}{
		{"serving learner", false, nil, 0},
		{"stalled learner", true, nil, 1},
		{"stalled, restart impossible", true, errors.New("no access"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			var logs []string
			j, _ := newJoin(f, &fakeLock{}, &logs)
			j.StallGrace = 40 * time.Millisecond
			restarts := 0
			serving := !tc.stalled
			j.Status = func(_ context.Context, ep string) (*clientv3.StatusResponse, error) {
				f.mu.Lock()
				defer f.mu.Unlock()
				if ep == "https://10.0.0.2:2379" && !serving {
					return nil, context.DeadlineExceeded
				}
				return &clientv3.StatusResponse{Header: &etcdserverpb.ResponseHeader{}, Leader: 1}, nil
			}
			j.Restart = func() error {
				f.mu.Lock()
				defer f.mu.Unlock()
				restarts++
				f.events = append(f.events, "restart")
				if tc.restartErr != nil {
					go func() { // etcd serves after its own 7 s, here 100 ms
						time.Sleep(100 * time.Millisecond)
						f.mu.Lock()
						serving = true
						f.mu.Unlock()
					}()
					return tc.restartErr
				}
				go func() { // the kubelet starts it again
					time.Sleep(30 * time.Millisecond)
					f.mu.Lock()
					serving = true
					f.mu.Unlock()
				}()
				return nil
			}
			servedAtPromotion := false
			f.onPromote = func() { servedAtPromotion = serving }
			if _, err := j.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.restartErr == nil && !servedAtPromotion {
				t.Error("the learner was promoted before it served clients")
			}
			if restarts != tc.wantRestart {
				t.Errorf("restarted %d times, want %d", restarts, tc.wantRestart)
			}
			want := []string{"promote"}
			if tc.wantRestart > 0 {
				want = []string{"restart", "promote"}
			}
			if !slices.Equal(f.events, want) {
				t.Errorf("events %v, want %v", f.events, want)
			}
		})
	}
}

// OnTurn runs once the lock is held, before the membership is looked at; when it fails the
// join adds nothing, writes no manifest, lets the lock go and returns that failure.
func TestJoinOnTurnRunsUnderTheLock(t *testing.T) {
	for _, fail := range []bool{false, true} {
		f := newFake()
		l := &fakeLock{}
		var logs []string
		j, manifests := newJoin(f, l, &logs)
		boom := errors.New("kubelet did not start")
		var lockedThen, addsThen int
		j.OnTurn = func(context.Context) error {
			lockedThen, addsThen = l.locked, f.addCalls
			if fail {
				return boom
			}
			return nil
		}
		res, err := j.Run(context.Background())
		if lockedThen != 1 || addsThen != 0 {
			t.Errorf("fail=%v: OnTurn ran with %d locks taken and %d adds made; want 1 and 0", fail, lockedThen, addsThen)
		}
		switch {
		case fail && (!errors.Is(err, boom) || f.addCalls != 0 || len(*manifests) != 0 || l.unlocked != 1):
			t.Errorf("OnTurn failed: err %v, %d adds, %d manifests, %d unlocks; want its error and nothing done, the lock let go", err, f.addCalls, len(*manifests), l.unlocked)
		case !fail && (err != nil || !res.Added):
			t.Errorf("OnTurn succeeded: %v %+v", err, res)
		}
	}
}
