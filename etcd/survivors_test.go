package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"
)

// voters is a membership of started voters cp1..cpN (client URL https://10.0.0.I:2379) and
// one learner, which never counts.
func voters(n int) []*etcdserverpb.Member {
	var ms []*etcdserverpb.Member
	for i := 1; i <= n; i++ {
		ms = append(ms, &etcdserverpb.Member{ID: uint64(i), Name: fmt.Sprintf("cp%d", i), ClientURLs: []string{fmt.Sprintf("https://10.0.0.%d:2379", i)}})
	}
	return append(ms, &etcdserverpb.Member{ID: 99, Name: "learner", IsLearner: true, ClientURLs: []string{"https://10.0.0.99:2379"}})
}

// statusUp answers for the members whose client URLs are up (with a leader) and fails for
// the others.
func statusUp(up ...int) func(context.Context, string) (*clientv3.StatusResponse, error) {
	return func(_ context.Context, ep string) (*clientv3.StatusResponse, error) {
		for _, i := range up {
			if ep == fmt.Sprintf("https://10.0.0.%d:2379", i) {
				return &clientv3.StatusResponse{Leader: 1}, nil
			}
		}
		return nil, context.DeadlineExceeded
	}
}

// Quorum is a majority of the voters having a leader: 2 of 3 holds it, 1 of 3 and 2 of 4
// (exactly half) do not; a learner is never counted; a voter that never started is named.
// Quorum that holds returns at once; lost quorum is asked about again every Interval and
// fails only once it has been lost for the whole QuorumGrace.
func TestQuorumIsAMajorityForTheWholeGrace(t *testing.T) {
	for _, tc := range []struct {
		members []*etcdserverpb.Member
		up      []int
		lost    string
	}{
		{voters(3), []int{1, 2}, ""},
		{voters(3), []int{1, 2, 99}, ""},
		{voters(3), []int{1, 99}, "1 of 3 voting members have a leader (cp2: unreachable, cp3: unreachable)"},
		{voters(4), []int{1, 2}, "2 of 4 voting members have a leader (cp3: unreachable, cp4: unreachable)"},
		{append(voters(2), &etcdserverpb.Member{ID: 5, Name: "cp5"}), []int{1}, "1 of 3 voting members have a leader (cp2: unreachable, cp5: not started)"},
	} {
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		asked := 0
		status := statusUp(tc.up...)
		j := &Join{Clock: clk, QuorumGrace: 10 * time.Second, Interval: time.Second, members: tc.members, Logf: func(string, ...any) {},
			Status: func(ctx context.Context, ep string) (*clientv3.StatusResponse, error) {
				asked++
				return status(ctx, ep)
			}}
		name := fmt.Sprintf("%d members, up %v", len(tc.members), tc.up)
		done := make(chan error, 1)
		go func() { done <- j.quorumLost(context.Background()) }()
		if tc.lost == "" {
			if err := <-done; err != nil {
				t.Errorf("%s: quorum held, got %v", name, err)
			}
			continue
		}
		for i := 0; i < 10; i++ {
			if err, ok := awaitWaiter(clk, done); !ok {
				t.Fatalf("%s: returned %v after %d of the grace's 10 s", name, err, i)
			}
			clk.Step(time.Second)
		}
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.lost) {
				t.Errorf("%s: want %q, got %v", name, tc.lost, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still waiting when the grace had ended", name)
		}
		started := 0
		for _, m := range tc.members {
			if !m.IsLearner && len(m.ClientURLs) > 0 {
				started++
			}
		}
		if want := 11 * started; asked != want {
			t.Errorf("%s: %d status calls, want %d (every started voter, every second of the grace)", name, asked, want)
		}
	}
}

// awaitWaiter waits until quorumLost waits on clk (true) or returns (false, its error).
func awaitWaiter(clk *clocktesting.FakeClock, done <-chan error) (error, bool) {
	deadline := time.Now().Add(5 * time.Second)
	for !clk.HasWaiters() && time.Now().Before(deadline) {
		select {
		case err := <-done:
			return err, false
		case <-time.After(time.Millisecond):
		}
	}
	return nil, clk.HasWaiters()
}

// Quorum lost while the new member has not started yet (the member list itself fails): the
// join fails naming quorum, not its timeout.
func TestQuorumLostBeforeTheMemberStarted(t *testing.T) {
	f := newFake()
	f.members = append(f.members, &etcdserverpb.Member{ID: 2, Name: "cp3", PeerURLs: []string{"https://10.0.0.3:2380"}, ClientURLs: []string{"https://10.0.0.3:2379"}})
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.Timeout, j.QuorumGrace = 20*time.Second, time.Nanosecond
	j.Status = func(context.Context, string) (*clientv3.StatusResponse, error) {
		return &clientv3.StatusResponse{}, nil
	}
	j.WriteManifest = func([]Member) error {
		f.mu.Lock()
		f.noQuorum = true
		f.mu.Unlock()
		return nil
	}
	_, err := j.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "etcd lost quorum during the join: 0 of 2") {
		t.Fatalf("err %v", err)
	}
}

// lostAnswer applies an add or a promotion but loses the answer (a timeout, a restarted
// leader): the member exists although the call failed.
type lostAnswer struct {
	*fakeCluster
	addErr, promoteErr error
}

func (l *lostAnswer) MemberAddAsLearner(ctx context.Context, peers []string) (*clientv3.MemberAddResponse, error) {
	r, err := l.fakeCluster.MemberAddAsLearner(ctx, peers)
	if err != nil || l.addErr != nil {
		return nil, errors.Join(err, l.addErr)
	}
	return r, nil
}

func (l *lostAnswer) MemberPromote(ctx context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	r, err := l.fakeCluster.MemberPromote(ctx, id)
	if err != nil || l.promoteErr != nil {
		return nil, errors.Join(err, l.promoteErr)
	}
	return r, nil
}

// An add whose learner exists although etcd answered "peer URL exists" (a racing earlier
// run) continues with that learner; an add refused otherwise fails, naming the add, before
// any manifest is written.
func TestJoinAddRefusedOrRaced(t *testing.T) {
	f := newFake()
	var logs []string
	j, manifests := newJoin(f, &fakeLock{}, &logs)
	j.Cluster = &lostAnswer{fakeCluster: f, addErr: rpctypes.ErrPeerURLExist}
	res, err := j.Run(context.Background())
	if err != nil || res.ID != 100 || res.Added || len(*manifests) != 1 {
		t.Fatalf("raced add: res %+v err %v manifests %d", res, err, len(*manifests))
	}

	f = newFake()
	f.addErrs = []error{rpctypes.ErrPermissionDenied}
	j, manifests = newJoin(f, &fakeLock{}, &logs)
	if _, err := j.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "add learner https://10.0.0.2:2380") || len(*manifests) != 0 {
		t.Fatalf("refused add: err %v manifests %d", err, len(*manifests))
	}
}

// A promotion applied whose answer was lost is seen in the member list: the join succeeds
// instead of retrying until its timeout.
func TestJoinPromotionAnswerLost(t *testing.T) {
	f := newFake()
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.Cluster = &lostAnswer{fakeCluster: f, promoteErr: rpctypes.ErrTimeout}
	if _, err := j.Run(context.Background()); err != nil {
		t.Fatalf("err %v", err)
	}
	if f.promoteCalled != 1 {
		t.Errorf("promoted %d times", f.promoteCalled)
	}
}

// A refused promotion is logged once per distinct reason, not once per retry.
func TestJoinLogsEachPromotionRefusalOnce(t *testing.T) {
	f := newFake()
	f.promoteFails = 4
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	if _, err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range logs {
		if strings.HasPrefix(l, "promote %x: %v") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("logged the refusal %d times: %q", n, logs)
	}
}

// A failed join says whether it could remove the etcd manifest.
func TestJoinFailureLogsTheManifestRemoval(t *testing.T) {
	for _, merr := range []error{nil, errors.New("read-only file system")} {
		f := newFake()
		f.promoteFails = 1 << 30
		var logs []string
		j, _ := newJoin(f, &fakeLock{}, &logs)
		j.Timeout = 100 * time.Millisecond
		j.RemoveManifest = func(bool) error { return merr }
		if _, err := j.Run(context.Background()); err == nil {
			t.Fatal("join succeeded")
		}
		want := "removed the etcd manifest of the failed join"
		if merr != nil {
			want = "could not remove the etcd manifest of the failed join: %v"
		}
		if !strings.Contains(strings.Join(logs, "\n"), want) {
			t.Errorf("manifest removal error %v: logs %q lack %q", merr, logs, want)
		}
	}
}

// A learner that does not serve for less than StallGrace is left alone (not restarted).
func TestJoinBrieflySlowLearnerIsNotRestarted(t *testing.T) {
	f := newFake()
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.StallGrace = time.Second
	slow := true
	j.Status = func(_ context.Context, ep string) (*clientv3.StatusResponse, error) {
		if ep == "https://10.0.0.2:2379" && slow {
			slow = false // serves from its second answer
			return nil, context.DeadlineExceeded
		}
		return &clientv3.StatusResponse{Leader: 1}, nil
	}
	restarts := 0
	j.Restart = func() error { restarts++; return nil }
	if _, err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if slow || restarts != 0 {
		t.Errorf("asked while slow: %v; restarted %d times", !slow, restarts)
	}
}

// The defaults a Join fills are the documented ones, and set values are kept.
func TestJoinDefaults(t *testing.T) {
	j := &Join{}
	j.defaults()
	if j.Interval != 200*time.Millisecond || j.CallTimeout != 5*time.Second || j.QuorumGrace != 10*time.Second ||
		j.StallGrace != 600*time.Millisecond || j.DeadAfter != 5*time.Second || j.Peer == nil || j.Logf == nil || j.At == nil {
		t.Errorf("defaults %+v", j)
	}
	j = &Join{Interval: 1, CallTimeout: 2, QuorumGrace: 3, StallGrace: 4, DeadAfter: 5}
	j.defaults()
	if j.Interval != 1 || j.CallTimeout != 2 || j.QuorumGrace != 3 || j.StallGrace != 4 || j.DeadAfter != 5 {
		t.Errorf("set values replaced: %+v", j)
	}
}

// IsLockLease accepts exactly one attached key, the lock's key for that lease in hex.
func TestIsLockLease(t *testing.T) {
	key := []byte(LockKey + "/1f")
	for name, c := range map[string]struct {
		keys [][]byte
		want bool
	}{
		"the lock's key":   {[][]byte{key}, true},
		"another lease's":  {[][]byte{[]byte(LockKey + "/20")}, false},
		"decimal":          {[][]byte{[]byte(LockKey + "/31")}, false},
		"two keys":         {[][]byte{key, []byte("/registry/leases/x")}, false},
		"no keys":          {nil, false},
		"the API server's": {[][]byte{[]byte("/registry/masterleases/10.0.0.1")}, false},
	} {
		if got := IsLockLease(0x1f, c.keys); got != c.want {
			t.Errorf("%s: %v", name, got)
		}
	}
}

// fakeLease is the lease API a conn uses: TimeToLive and Revoke.
type fakeLease struct {
	clientv3.Lease
	ttl       *clientv3.LeaseTimeToLiveResponse
	ttlErr    error
	revokeErr error
	revoked   []clientv3.LeaseID
}

func (f *fakeLease) TimeToLive(context.Context, clientv3.LeaseID, ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	return f.ttl, f.ttlErr
}

func (f *fakeLease) Revoke(_ context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	f.revoked = append(f.revoked, id)
	return &clientv3.LeaseRevokeResponse{}, f.revokeErr
}

// RevokeLockLease revokes a live lease that holds the join lock and nothing else; a lease
// that is gone, expired or another's is left alone; errors other than "not found" are
// reported.
func TestRevokeLockLease(t *testing.T) {
	lockKeys := [][]byte{[]byte(LockKey + "/1f")}
	boom := errors.New("etcdserver: request timed out")
	for name, c := range map[string]struct {
		lease       fakeLease
		revoked     bool
		err         error
		revokeCalls int
	}{
		"the lock's live lease": {fakeLease{ttl: &clientv3.LeaseTimeToLiveResponse{TTL: 12, Keys: lockKeys}}, true, nil, 1},
		"not found":             {fakeLease{ttlErr: rpctypes.ErrLeaseNotFound}, false, nil, 0},
		"unreachable":           {fakeLease{ttlErr: boom}, false, boom, 0},
		"expired":               {fakeLease{ttl: &clientv3.LeaseTimeToLiveResponse{TTL: 0, Keys: lockKeys}}, false, nil, 0},
		"another lease":         {fakeLease{ttl: &clientv3.LeaseTimeToLiveResponse{TTL: 12, Keys: [][]byte{[]byte("/registry/x")}}}, false, nil, 0},
		"gone at revoke":        {fakeLease{ttl: &clientv3.LeaseTimeToLiveResponse{TTL: 12, Keys: lockKeys}, revokeErr: rpctypes.ErrLeaseNotFound}, false, nil, 1},
		"revoke fails":          {fakeLease{ttl: &clientv3.LeaseTimeToLiveResponse{TTL: 12, Keys: lockKeys}, revokeErr: boom}, false, boom, 1},
	} {
		fl := c.lease
		cn := &conn{Client: &clientv3.Client{Lease: &fl}}
		revoked, err := cn.RevokeLockLease(context.Background(), 0x1f)
		if revoked != c.revoked || !errors.Is(err, c.err) || len(fl.revoked) != c.revokeCalls {
			t.Errorf("%s: revoked %v err %v revoke calls %d", name, revoked, err, len(fl.revoked))
		}
	}
}

// Dial without endpoints fails (it never returns a connection that cannot work).
func TestDialWithoutEndpoints(t *testing.T) {
	if c, err := Dial(nil, nil); err == nil || c != nil {
		t.Errorf("conn %v err %v", c, err)
	}
}

// Classify takes a member without peer URLs (etcd never lists one, but the type allows it)
// as one with no peer URL to probe.
func TestClassifyMemberWithoutPeerURL(t *testing.T) {
	probed := 0
	got := Classify(context.Background(), []*etcdserverpb.Member{{ID: 3, Name: "cp3"}}, func(context.Context, string) bool { probed++; return true })
	if len(got) != 1 || got[0].PeerURL != "" || got[0].Probed || probed != 0 {
		t.Errorf("%+v probed %d", got, probed)
	}
}

// Without a status probe every started voter counts as healthy (replaceFormer's count then
// rests on etcd's own refusal without quorum); one that never started is named.
func TestVoterHealthWithoutStatus(t *testing.T) {
	j := &Join{}
	voters, healthy, detail := j.voterHealth(context.Background(), append(voters(3), &etcdserverpb.Member{ID: 7, Name: "cp7"}), 2)
	if voters != 3 || healthy != 2 || len(detail) != 1 || detail[0] != "cp7: not started" {
		t.Errorf("voters %d healthy %d detail %q", voters, healthy, detail)
	}
}

// noQuorum (whether undo may skip the learner's removal) holds only after the join saw quorum
// lost, and only while at most half of the voters have a leader: 1 of 2 is lost, 2 of 2 is back.
func TestNoQuorumIsAtMostHalfWithALeader(t *testing.T) {
	for _, tc := range []struct {
		seen bool
		up   []int
		want bool
	}{
		{true, []int{1}, true},
		{true, nil, true},
		{true, []int{1, 2}, false},
		{false, []int{1}, false},
	} {
		j := &Join{members: voters(2), Status: statusUp(tc.up...)}
		if tc.seen {
			j.lostFrom = time.Unix(1000, 0)
		}
		if got := j.noQuorum(context.Background()); got != tc.want {
			t.Errorf("loss seen %v, up %v: noQuorum %v, want %v", tc.seen, tc.up, got, tc.want)
		}
	}
}

// votersApplied with no voter to ask (learners and members that never started) is an error
// naming that, never an applied index of 0.
func TestVotersAppliedWithoutAVoterToAsk(t *testing.T) {
	j := &Join{CallTimeout: time.Second, Status: statusUp(99),
		members: []*etcdserverpb.Member{{ID: 5, Name: "cp5"}, {ID: 99, IsLearner: true, ClientURLs: []string{"https://10.0.0.99:2379"}}}}
	if idx, err := j.votersApplied(context.Background(), 0); err == nil || err.Error() != "no voting member with a client URL" {
		t.Errorf("applied %d, err %v; want the error naming no voter to ask", idx, err)
	}
}

// RemoveMember retries a refusal etcd reports as passing (a leader change), after a pause on
// its clock, and then removes the member.
func TestRemoveMemberRetriesAPassingRefusal(t *testing.T) {
	f := newFake()
	f.members = append(f.members, &etcdserverpb.Member{ID: 7, Name: "cp7", PeerURLs: []string{"https://10.0.0.7:2380"}})
	f.removeFails = 1
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	done := make(chan error, 1)
	go func() { done <- RemoveMember(context.Background(), f, 7, clk) }()
	if err, ok := awaitWaiter(clk, done); !ok {
		t.Fatalf("returned %v without pausing to retry", err)
	}
	clk.Step(time.Minute)
	select {
	case err := <-done:
		if err != nil || len(f.removed) != 1 || f.removed[0] != 7 {
			t.Errorf("err %v, removed %v; want member 7 removed on the retry", err, f.removed)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RemoveMember did not retry after its pause")
	}
}
