package etcd

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kjoin.dev/kjoin/operr"
)

// silent is a PeerProbe under which the listed peer URLs never answer and every other does.
func silent(urls ...string) PeerProbe {
	return func(_ context.Context, u string) bool {
		for _, s := range urls {
			if s == u {
				return false
			}
		}
		return true
	}
}

const ghostURL = "https://10.0.0.99:2380"

func withGhostLearner(f *fakeCluster) {
	f.members = append(f.members, &etcdserverpb.Member{ID: 0x77, PeerURLs: []string{ghostURL}, IsLearner: true})
}

func TestClassify(t *testing.T) {
	ms := []*etcdserverpb.Member{
		{ID: 1, Name: "cp1", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: 2, Name: "cp2", PeerURLs: []string{"https://10.0.0.2:2380"}, IsLearner: true},
		{ID: 3, PeerURLs: []string{"https://10.0.0.3:2380"}, IsLearner: true},
		{ID: 4, PeerURLs: []string{ghostURL}, IsLearner: true},
		{ID: 5, Name: "cp5", PeerURLs: []string{"https://10.0.0.5:2380"}},
	}
	got := Classify(context.Background(), ms, silent(ghostURL, "https://10.0.0.5:2380"))
	want := []struct {
		kind  string
		stale bool
	}{
		{"voter started", false},
		{"learner started", false},
		{"learner never started", false}, // answers: an etcd starting now
		{"learner never started, peer URL silent", true},
		{"voter started, peer URL silent", false}, // voters are never stale learners
	}
	for i, w := range want {
		if got[i].Kind() != w.kind || got[i].Stale() != w.stale {
			t.Errorf("member %x: kind %q stale %v, want %q %v", got[i].ID, got[i].Kind(), got[i].Stale(), w.kind, w.stale)
		}
	}
	if s := got[3].String(); s != "member 4 (no name, https://10.0.0.99:2380, learner never started, peer URL silent)" {
		t.Errorf("String() = %q", s)
	}
	// Not asked: a learner that never started is stale, one that started is not.
	un := Classify(context.Background(), ms, nil)
	if !un[2].Stale() || un[1].Stale() || un[2].Probed {
		t.Errorf("unprobed: %+v", un)
	}
}

func TestStaleLearnerIsNamedAtOnce(t *testing.T) {
	f := newFake()
	withGhostLearner(f)
	var logs []string
	j, manifests := newJoin(f, &fakeLock{}, &logs)
	j.Peer = silent(ghostURL)
	_, err := j.Run(context.Background())
	oe, ok := operr.As(err)
	if !ok || oe.Code != operr.Busy {
		t.Fatalf("err %v, want a Busy refusal", err)
	}
	for _, want := range []string{"member 77", ghostURL, "learner never started, peer URL silent"} {
		if !strings.Contains(oe.What, want) {
			t.Errorf("refusal %q does not name %q", oe.What, want)
		}
	}
	if !strings.Contains(oe.Hint, "--remove-dead-etcd-learners") || !strings.Contains(oe.Hint, "etcdctl member remove 77") {
		t.Errorf("hint %q lacks the remedy", oe.Hint)
	}
	if f.addCalls != 0 || len(f.removed) != 0 || len(*manifests) != 0 {
		t.Errorf("refused join changed etcd: adds %d removed %v manifests %d", f.addCalls, f.removed, len(*manifests))
	}
}

func TestDeadLearnerRemovedWithTheFlag(t *testing.T) {
	f := newFake()
	withGhostLearner(f)
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.Peer, j.RemoveDeadLearners = silent(ghostURL), true
	res, err := j.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.removed) != 1 || f.removed[0] != 0x77 || len(res.RemovedLearners) != 1 || res.RemovedLearners[0].ID != 0x77 {
		t.Errorf("removed %v (result %+v), want the ghost 77", f.removed, res.RemovedLearners)
	}
	if !res.Added || res.ID != 100 {
		t.Errorf("result %+v: this node's learner not added", res)
	}
}

func TestAnsweringLearnerIsNotRemoved(t *testing.T) {
	f := newFake()
	withGhostLearner(f)
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.RemoveDeadLearners = true
	calls := 0
	j.Peer = func(_ context.Context, u string) bool {
		if u == ghostURL {
			calls++
			return calls > 1 // silent when classified, then answers during the proof
		}
		return true
	}
	_, err := j.Run(context.Background())
	if oe, ok := operr.As(err); !ok || oe.Code != operr.Busy || !strings.Contains(oe.What, "answers") {
		t.Fatalf("err %v, want a refusal: the learner answered", err)
	}
	if len(f.removed) != 0 {
		t.Errorf("removed %v: a learner that answers must stay", f.removed)
	}
}

// threeVoters: cp1, cp2 (this node's address, name given) and cp3, all started.
func threeVoters(formerName string) *fakeCluster {
	f := newFake()
	f.members = append(f.members,
		&etcdserverpb.Member{ID: 0x22, Name: formerName, PeerURLs: []string{"https://10.0.0.2:2380"}, ClientURLs: []string{"https://10.0.0.2:2379"}},
		&etcdserverpb.Member{ID: 3, Name: "cp3", PeerURLs: []string{"https://10.0.0.3:2380"}, ClientURLs: []string{"https://10.0.0.3:2379"}})
	return f
}

func healthyExcept(dead ...string) func(context.Context, string) (*clientv3.StatusResponse, error) {
	return func(_ context.Context, ep string) (*clientv3.StatusResponse, error) {
		for _, d := range dead {
			if d == ep {
				return nil, context.DeadlineExceeded
			}
		}
		return &clientv3.StatusResponse{Leader: 1}, nil
	}
}

func TestFormerVoterOfThisNameIsReplaced(t *testing.T) {
	f := threeVoters("cp2")
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.FreshData, j.Peer, j.Status = true, silent("https://10.0.0.2:2380"), healthyExcept("https://10.0.0.2:2379")
	res, err := j.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Replaced == nil || res.Replaced.ID != 0x22 || len(f.removed) != 1 || f.removed[0] != 0x22 {
		t.Fatalf("replaced %+v removed %v, want the former member 22", res.Replaced, f.removed)
	}
	if !res.Added || res.ID == 0x22 || res.AlreadyVoting {
		t.Errorf("result %+v: want a new learner, promoted", res)
	}
	// The log counts the others: of 3 voters, the former member's 2 peers, both answering.
	var said []string
	j, _ = newJoin(threeVoters("cp2"), &fakeLock{}, &logs)
	j.FreshData, j.Peer, j.Status = true, silent("https://10.0.0.2:2380"), healthyExcept("https://10.0.0.2:2379")
	j.Logf = func(format string, a ...any) { said = append(said, fmt.Sprintf(format, a...)) }
	if _, err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := "and 2 of the other 2 voters answer; this node joins as a new member"; !strings.Contains(strings.Join(said, "\n"), want) {
		t.Errorf("logs %q lack %q", said, want)
	}
}

func TestFormerVoterRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		former  string
		replace bool
		peer    PeerProbe
		status  func(context.Context, string) (*clientv3.StatusResponse, error)
		code    operr.Code
		want    []string
	}{
		{"another name without --replace", "old-cp", false, silent("https://10.0.0.2:2380"), healthyExcept("https://10.0.0.2:2379"),
			operr.Preflight, []string{"member 22 (old-cp, https://10.0.0.2:2380, voter started)", "--replace", "etcdctl member remove 22"}},
		{"its peer URL answers", "cp2", true, silent(), healthyExcept(),
			operr.Busy, []string{"member 22", "something answers at https://10.0.0.2:2380"}},
		{"quorum would be lost", "cp2", false, silent("https://10.0.0.2:2380"), healthyExcept("https://10.0.0.2:2379", "https://10.0.0.3:2379"),
			operr.Other, []string{"only 1 of the 3 voters answer", "cp3:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := threeVoters(tc.former)
			var logs []string
			j, manifests := newJoin(f, &fakeLock{}, &logs)
			j.FreshData, j.Replace, j.Peer, j.Status = true, tc.replace, tc.peer, tc.status
			_, err := j.Run(context.Background())
			oe, ok := operr.As(err)
			if !ok || oe.Code != tc.code {
				t.Fatalf("err %v, want code %v", err, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(oe.What+" "+oe.Hint, w) {
					t.Errorf("%q lacks %q", oe.What+" "+oe.Hint, w)
				}
			}
			if len(f.removed) != 0 || f.addCalls != 0 || len(*manifests) != 0 {
				t.Errorf("refused join changed etcd: removed %v adds %d manifests %d", f.removed, f.addCalls, len(*manifests))
			}
		})
	}
}

func TestVoterWithDataIsResumedNotReplaced(t *testing.T) {
	f := threeVoters("cp2")
	var logs []string
	j, _ := newJoin(f, &fakeLock{}, &logs)
	j.Peer, j.Status = silent("https://10.0.0.2:2380"), healthyExcept()
	res, err := j.Run(context.Background())
	if err != nil || !res.AlreadyVoting || res.Replaced != nil || len(f.removed) != 0 {
		t.Fatalf("res %+v err %v removed %v: a member whose data is here is this node's", res, err, f.removed)
	}
}

func TestSilentFor(t *testing.T) {
	j, _ := newJoin(newFake(), &fakeLock{}, new([]string))
	n := 0
	answersThird := func(context.Context, string) bool { n++; return n == 3 }
	if SilentFor(context.Background(), j.Clock, answersThird, ghostURL, 50*j.Interval, j.Interval) {
		t.Error("a peer that answered once within the window counted as silent")
	}
	if !SilentFor(context.Background(), j.Clock, silent(ghostURL), ghostURL, 3*j.Interval, j.Interval) {
		t.Error("a silent peer did not count as silent")
	}
}

func TestDialPeer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if !DialPeer(context.Background(), "https://"+addr) {
		t.Errorf("a listening peer URL %s did not answer", addr)
	}
	l.Close()
	if DialPeer(context.Background(), "https://"+addr) {
		t.Errorf("a closed peer URL %s answered", addr)
	}
	if DialPeer(context.Background(), "::not a url") {
		t.Error("a bad URL answered")
	}
}

func TestJournalsMemberIsResumedWithEmptyData(t *testing.T) {
	f := threeVoters("cp2")
	j, _ := newJoin(f, &fakeLock{}, new([]string))
	j.FreshData, j.OwnMember = true, 0x22
	j.Peer, j.Status = silent("https://10.0.0.2:2380"), healthyExcept()
	res, err := j.Run(context.Background())
	if err != nil || !res.AlreadyVoting || len(f.removed) != 0 {
		t.Fatalf("res %+v err %v removed %v: the member this node's journal records is its own", res, err, f.removed)
	}
}

func TestPlanChangesNothing(t *testing.T) {
	f := threeVoters("cp2")
	withGhostLearner(f)
	j, manifests := newJoin(f, &fakeLock{}, new([]string))
	j.FreshData, j.Peer, j.Status = true, silent("https://10.0.0.2:2380", ghostURL), healthyExcept("https://10.0.0.2:2379")
	res, err := j.Plan(context.Background())
	if oe, ok := operr.As(err); !ok || oe.Code != operr.Busy || !strings.Contains(oe.What, "member 77") {
		t.Fatalf("err %v: without the flag the plan is Run's refusal", err)
	}
	if res.Replaced == nil || res.Replaced.ID != 0x22 {
		t.Errorf("plan %+v: the former voter would be replaced", res)
	}
	j.RemoveDeadLearners = true
	res, err = j.Plan(context.Background())
	if err != nil || res.Replaced == nil || len(res.RemovedLearners) != 1 || res.RemovedLearners[0].ID != 0x77 {
		t.Fatalf("plan %+v err %v", res, err)
	}
	if len(f.removed) != 0 || f.addCalls != 0 || len(*manifests) != 0 || f.promoteCalled != 0 {
		t.Errorf("a plan changed etcd: removed %v adds %d manifests %d", f.removed, f.addCalls, len(*manifests))
	}
}

// Exactly half the voters answering is no quorum: with cp1 answering and cp3 gone (two
// voters), a join whose membership calls fail reports lost quorum after the grace.
func TestHalfTheVotersIsNoQuorum(t *testing.T) {
	f := newFake()
	f.members = append(f.members, &etcdserverpb.Member{ID: 2, Name: "cp3", PeerURLs: []string{"https://10.0.0.3:2380"}, ClientURLs: []string{"https://10.0.0.3:2379"}})
	j, _ := newJoin(f, &fakeLock{}, new([]string))
	j.Timeout, j.QuorumGrace = 3*time.Second, 20*time.Millisecond
	j.Status = healthyExcept("https://10.0.0.3:2379") // cp1 has a leader, cp3 does not answer
	j.At = func(p string) {
		if p == "etcd-join/promoting" {
			f.mu.Lock()
			f.noQuorum = true
			f.mu.Unlock()
		}
	}
	_, err := j.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "etcd lost quorum during the join: 1 of 2 voting members have a leader") {
		t.Fatalf("err %v: one of two voters is no majority", err)
	}
}
