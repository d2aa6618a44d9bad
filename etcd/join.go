package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/operr"
)

// Join describes one member join.
type Join struct {
	Cluster Cluster
	Lock    Locker
	Name    string
	PeerURL string
	// WriteManifest writes the etcd static pod with the cluster's members (the kubelet starts it).
	WriteManifest func(members []Member) error
	// RemoveManifest removes the etcd static pod again when the join fails, so the kubelet
	// starts no etcd for a member that is not in the cluster; wipeData also empties the data
	// dir (the member was removed, so its data can never be used again).
	RemoveManifest func(wipeData bool) error
	// Status asks one member (client URL) for its status; with it a join that loses etcd
	// quorum fails after QuorumGrace instead of waiting for the timeout.
	Status      func(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
	QuorumGrace time.Duration
	// OnTurn runs once the join holds the lock, before it looks at the membership (nil: no
	// step): what runs this node's etcd member and would only wait while others join starts
	// here (the kubelet, which runs the etcd static pod).
	OnTurn func(ctx context.Context) error
	// Restart restarts this node's etcd process (the kubelet starts it again); nil: never.
	// Used once at most, on a learner whose start-up publish has stalled (see unstall).
	Restart func() error
	// Local reads this node's etcd member's own state (MetricsState); with it a stalled
	// publish is known for certain, without a grace period, and a learner still receiving
	// the leader's snapshot is never restarted. nil, or when it fails: StallGrace decides.
	Local func(ctx context.Context) (LocalState, error)
	// StallGrace is how long a started learner may not serve clients before it counts as
	// stalled when Local cannot tell (default 600 ms: a member that is not stalled serves as
	// soon as its name is listed).
	StallGrace time.Duration
	// FreshData is true when this node's etcd data directory was empty as the join began: a
	// voting member with this node's peer URL is then another (earlier) machine's member,
	// never this node's, since a member that votes has written its data (see replaceFormer).
	FreshData bool
	// OwnMember is the member an earlier run of this join on this node recorded (its journal):
	// never taken for another machine's.
	OwnMember uint64
	// Replace is the operator's explicit intent (--replace) to remove such a member whose
	// name is not this node's; one named like this node needs none.
	Replace bool
	// RemoveDeadLearners removes other learners that are provably dead (never started or
	// silent, and silent for DeadAfter) instead of refusing (--remove-dead-etcd-learners).
	RemoveDeadLearners bool
	// Peer asks whether an etcd peer URL answers (nil: DialPeer); DeadAfter is how long it
	// must stay silent to prove a member dead (default 5 s).
	Peer      PeerProbe
	DeadAfter time.Duration
	// At marks points inside the join for the lab's fault injection (may be nil).
	At          func(point string)
	Timeout     time.Duration
	Interval    time.Duration
	CallTimeout time.Duration
	Clock       clock.Clock
	Logf        func(format string, args ...any)

	members  []*etcdserverpb.Member // the last membership seen
	lostFrom time.Time              // when quorum was first seen lost, zero while it holds
}

// Result reports what a join did.
type Result struct {
	ID uint64
	// Added is false when the member already existed (a re-run).
	Added bool
	// AlreadyVoting is true when there was nothing to do.
	AlreadyVoting bool
	Waited        time.Duration // for the lock
	// Replaced is the former machine's voter this join removed (zero: none).
	Replaced *MemberState
	// RemovedLearners are the dead learners this join removed (--remove-dead-etcd-learners).
	RemovedLearners []MemberState
}

// Run adds the member as a learner, writes the manifest, waits until it has started and
// promotes it, holding the join lock throughout. A learner this run added is removed again
// if the join fails.
func (j *Join) Run(ctx context.Context) (res *Result, err error) {
	j.defaults()
	res = &Result{}
	ctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()

	start := j.Clock.Now()
	if err := j.Lock.TryLock(ctx); errors.Is(err, ErrLocked) {
		j.Logf("another control-plane node is joining etcd; waiting for it to finish")
		if err := j.Lock.Lock(ctx); err != nil {
			return nil, &operr.Error{Code: operr.Busy, Retryable: true, Err: err,
				What: "another control-plane join held the etcd join lock until the timeout", Hint: "retry when the other join has finished"}
		}
		res.Waited = j.Clock.Since(start)
		j.Logf("etcd join lock acquired after %s", res.Waited.Round(time.Millisecond))
	} else if err != nil {
		return nil, operr.Wrap(operr.Busy, err, "cannot take the etcd join lock", "check etcd health on the existing control planes")
	}
	defer func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), j.CallTimeout)
		defer ucancel()
		_ = j.Lock.Unlock(uctx)
	}()
	j.At("etcd-join/locked")
	if j.OnTurn != nil {
		if err := j.OnTurn(ctx); err != nil {
			return nil, err
		}
	}

	members, err := j.list(ctx)
	if err != nil {
		return nil, operr.Wrap(operr.Other, err, "etcd has no quorum or cannot be reached", "check the existing control planes' etcd before adding a member")
	}
	me := find(members, j.PeerURL)
	if me != nil && !me.IsLearner && j.FreshData && me.ID != j.OwnMember {
		former, err := j.replaceFormer(ctx, me, members, false)
		if err != nil {
			return nil, err
		}
		res.Replaced = former
		if members, err = j.list(ctx); err != nil {
			return nil, operr.Wrap(operr.Other, err, "etcd has no quorum or cannot be reached", "check the existing control planes' etcd before adding a member")
		}
		me = find(members, j.PeerURL)
	}
	if me == nil {
		removed, err := j.clearLearners(ctx, members, false)
		res.RemovedLearners = removed
		if err != nil {
			return res, err
		}
		if len(removed) > 0 {
			if members, err = j.list(ctx); err != nil {
				return nil, operr.Wrap(operr.Other, err, "etcd has no quorum or cannot be reached", "check the existing control planes' etcd before adding a member")
			}
		}
	}
	switch {
	case me != nil && !me.IsLearner:
		res.ID, res.AlreadyVoting = me.ID, true
		j.Logf("member %s (%x) already exists and votes", j.Name, me.ID)
		return res, j.WriteManifest(initialCluster(members, me.ID, j.Name))
	case me != nil:
		res.ID = me.ID
		j.Logf("learner %x for %s already exists (earlier run); continuing", me.ID, j.Name)
	default:
		added, err := j.addLearner(ctx)
		if errors.Is(err, rpctypes.ErrPeerURLExist) {
			if members, err = j.list(ctx); err == nil {
				if me = find(members, j.PeerURL); me != nil {
					res.ID = me.ID
				}
			}
		}
		if err != nil && res.ID == 0 {
			return nil, etcdError(err, "add learner "+j.PeerURL)
		}
		if added != nil {
			res.ID, res.Added, members = added.Member.ID, true, added.Members
			j.Logf("added learner %x for %s (%s)", res.ID, j.Name, j.PeerURL)
		}
	}
	j.At("etcd-join/learner-added")
	defer func() {
		if err != nil {
			err = j.undo(ctx, res, err)
		}
	}()
	if err = j.WriteManifest(initialCluster(members, res.ID, j.Name)); err != nil {
		return res, err
	}
	started, err := j.waitStarted(ctx, res.ID)
	if err != nil {
		return res, err
	}
	if err = j.unstall(ctx, started); err != nil {
		return res, err
	}
	j.At("etcd-join/promoting")
	if err = j.promote(ctx, res.ID); err != nil {
		return res, err
	}
	return res, nil
}

// defaults fills the zero settings.
func (j *Join) defaults() {
	if j.Interval == 0 {
		j.Interval = 200 * time.Millisecond
	}
	if j.CallTimeout == 0 {
		j.CallTimeout = 5 * time.Second
	}
	if j.Logf == nil {
		j.Logf = func(string, ...any) {}
	}
	if j.At == nil {
		j.At = func(string) {}
	}
	if j.QuorumGrace == 0 {
		j.QuorumGrace = 10 * time.Second
	}
	if j.StallGrace == 0 {
		j.StallGrace = 600 * time.Millisecond
	}
	if j.Peer == nil {
		j.Peer = DialPeer
	}
	if j.DeadAfter == 0 {
		j.DeadAfter = deadAfterDefault
	}
}

// addLearner adds the learner, retrying what etcd reports as passing: a cluster that has
// just changed membership is "unhealthy" for a few seconds, leaders change, calls time out.
func (j *Join) addLearner(ctx context.Context) (*clientv3.MemberAddResponse, error) {
	var added *clientv3.MemberAddResponse
	err := retryPassing(ctx, j.Clock, backoff(j.Interval), j.CallTimeout, func(f string, a ...any) { j.Logf("add learner: "+f, a...) }, func(cctx context.Context) error {
		var err error
		added, err = j.Cluster.MemberAddAsLearner(cctx, []string{j.PeerURL})
		return err
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

func (j *Join) list(ctx context.Context) ([]*etcdserverpb.Member, error) {
	cctx, cancel := context.WithTimeout(ctx, j.CallTimeout)
	defer cancel()
	r, err := j.Cluster.MemberList(cctx)
	if err != nil {
		return nil, err
	}
	j.members = r.Members
	return r.Members, nil
}

// undo runs when the join failed after its learner existed: a learner this run added is
// removed (retried for a few seconds: etcd may be electing a leader; not tried while the
// quorum the join saw lost is still lost, as that call could only time out), and the etcd
// manifest is removed in any case, so no etcd starts for a member that is not in the
// cluster. The data dir is wiped only with the member gone. A learner that cannot be removed
// (no quorum) is named in the error: the next run resumes it.
func (j *Join) undo(ctx context.Context, res *Result, cause error) error {
	removed := false
	if res.Added {
		var rerr error
		if uctx := context.WithoutCancel(ctx); j.noQuorum(uctx) {
			rerr = errors.New("etcd has no quorum")
		} else {
			rctx, cancel := context.WithTimeout(uctx, 2*j.CallTimeout)
			rerr = RemoveMember(rctx, j.Cluster, res.ID, j.Clock)
			cancel()
		}
		if rerr == nil {
			removed = true
			j.Logf("removed learner %x that this failed join had added", res.ID)
		} else {
			left := fmt.Sprintf("the learner %x this join added could not be removed (%v): the next run resumes it, or remove it with etcdctl member remove %x", res.ID, rerr, res.ID)
			if oe, ok := operr.As(cause); ok {
				oe.What += "; " + left
			} else {
				cause = fmt.Errorf("%w; %s", cause, left)
			}
		}
	}
	if j.RemoveManifest != nil {
		if merr := j.RemoveManifest(removed); merr != nil {
			j.Logf("could not remove the etcd manifest of the failed join: %v", merr)
		} else {
			j.Logf("removed the etcd manifest of the failed join")
		}
	}
	return cause
}

// quorumLost is called after a failed membership call: it asks every voting member of the
// last membership seen for its status, and returns nil at once while a majority has a leader.
// Without one it asks again every Interval, and only that (a membership call without quorum
// waits out its CallTimeout), until a majority has a leader again (nil: the caller retries)
// or QuorumGrace has passed since the loss was first seen: an error naming it. A leader
// election takes a second or two; a stopped member's cluster never recovers by waiting.
func (j *Join) quorumLost(ctx context.Context) error {
	if j.Status == nil || len(j.members) == 0 {
		return nil
	}
	for {
		voters, healthy, detail := j.voterHealth(ctx, j.members, 0)
		if majority(healthy, voters) {
			if !j.lostFrom.IsZero() {
				j.Logf("etcd has a leader again after %s", j.Clock.Since(j.lostFrom).Round(time.Millisecond))
			}
			j.lostFrom = time.Time{}
			return nil
		}
		if j.lostFrom.IsZero() {
			j.lostFrom = j.Clock.Now()
			j.Logf("etcd has no quorum: %d of %d voting members have a leader (%s); waiting up to %s for one", healthy, voters, strings.Join(detail, ", "), j.QuorumGrace)
		}
		if j.Clock.Since(j.lostFrom) >= j.QuorumGrace {
			return &operr.Error{Code: operr.Other, Retryable: true,
				What: fmt.Sprintf("etcd lost quorum during the join: %d of %d voting members have a leader (%s)", healthy, voters, strings.Join(detail, ", ")),
				Hint: "bring the other control planes' etcd back (quorum needs a majority of voters), then run the same command again"}
		}
		select {
		case <-ctx.Done():
			return nil // the caller reports its own timeout
		case <-j.Clock.After(j.Interval):
		}
	}
}

// noQuorum reports whether the join has seen etcd without quorum and it is still without:
// a membership call would only wait out its timeout.
func (j *Join) noQuorum(ctx context.Context) bool {
	if j.lostFrom.IsZero() || j.Status == nil {
		return false
	}
	voters, healthy, _ := j.voterHealth(ctx, j.members, 0)
	return !majority(healthy, voters)
}

// majority reports whether healthy voters are more than half of voters: etcd's quorum.
func majority(healthy, voters int) bool { return healthy > voters/2 }

// voterHealth asks every voting member but skip for its status: how many voters there are
// (skip not counted), how many have a leader, and what ails the others (by name, else ID).
// Without Status every started voter counts as healthy (etcd itself refuses a membership
// change without quorum).
func (j *Join) voterHealth(ctx context.Context, members []*etcdserverpb.Member, skip uint64) (voters, healthy int, detail []string) {
	for _, m := range members {
		if m.IsLearner || m.ID == skip {
			continue
		}
		voters++
		name := m.Name
		if name == "" {
			name = hexID(m.ID)
		}
		switch {
		case len(m.ClientURLs) == 0:
			detail = append(detail, name+": not started")
		case j.Status == nil:
			healthy++
		default:
			if h := Probe(ctx, j.Status, m.ClientURLs[0]); h.OK() {
				healthy++
			} else {
				detail = append(detail, name+": "+h.String())
			}
		}
	}
	return voters, healthy, detail
}

func (j *Join) waitStarted(ctx context.Context, id uint64) (*etcdserverpb.Member, error) {
	for {
		if ms, err := j.list(ctx); err == nil {
			for _, m := range ms {
				if m.ID == id && m.Name != "" {
					j.Logf("member %x has started", id)
					return m, nil
				}
			}
		} else if qerr := j.quorumLost(ctx); qerr != nil {
			return nil, qerr
		}
		select {
		case <-ctx.Done():
			return nil, operr.Newf(operr.Timeout,
				"etcd member %x (%s) did not start within %s", id, j.Name, j.Timeout).
				WithHint("check the etcd pod on this node: crictl ps -a --name etcd; crictl logs <id>")
		case <-j.Clock.After(j.Interval):
		}
	}
}

// unstall restarts a started learner whose start-up publish has stalled. etcd serves clients
// only once its request to publish its own name has been applied by the member itself. A
// new member learns the leader from the heartbeat whose answer starts the leader's probe of
// its (empty) log, and proposes its publish at once; the leader commits that entry in the
// same round trip in which it finds the member needs a snapshot (v3.7 compacts the leader's
// log every 100 entries and never keeps index 1, so past a cluster's first 100 writes every
// new member gets one), and etcd builds the snapshot
// only after applying what that round committed (server.go, applyAll: msgSnapC is read after
// applyEntries). So the publish usually reaches the member inside the
// snapshot, not as a log entry: the member never sees its request applied and waits out
// etcd's request timeout (7 s with kubeadm's flags) before it publishes again, although
// every member already lists its name, and this node's API server waits on it. Nothing on
// the joining node orders the two (the leader's log compaction and the member's flags are
// the cluster's), so the join restarts the learner: it holds no vote, so restarting it costs
// the cluster nothing, and the restarted member publishes as a log entry at once. Once at
// most; promotion waits until it serves again, since a learner that is down can still look
// caught up to the leader.
func (j *Join) unstall(ctx context.Context, m *etcdserverpb.Member) error {
	if j.Restart == nil || j.Status == nil || len(m.ClientURLs) == 0 || !m.IsLearner {
		return nil
	}
	endpoint := m.ClientURLs[0]
	stalled, why := j.publishStalled(ctx, m)
	if !stalled {
		return nil
	}
	j.Logf("learner %x has started but does not serve clients at %s: %s; restarting it (a learner holds no vote)", m.ID, endpoint, why)
	if err := j.Restart(); err != nil {
		j.Logf("could not restart etcd: %v; waiting for it instead", err)
		return nil
	}
	restarted := j.Clock.Now()
	for !j.serving(ctx, endpoint) {
		if qerr := j.quorumLost(ctx); qerr != nil {
			return qerr
		}
		select {
		case <-ctx.Done():
			return operr.Newf(operr.Timeout, "etcd learner %x (%s) did not serve clients at %s within %s of its restart", m.ID, j.Name, endpoint, j.Clock.Since(restarted).Round(time.Second)).
				WithHint("check the etcd pod on this node: crictl ps -a --name etcd; crictl logs <id>")
		case <-j.Clock.After(j.Interval):
		}
	}
	j.Logf("learner %x serves clients %s after its restart", m.ID, j.Clock.Since(restarted).Round(time.Millisecond))
	return nil
}

// serving reports whether the member at endpoint answers a status call within StallGrace.
func (j *Join) serving(ctx context.Context, endpoint string) bool {
	cctx, cancel := context.WithTimeout(ctx, j.StallGrace)
	defer cancel()
	_, err := j.Status(cctx, endpoint)
	return err == nil
}

// stallConfirm is how long the learner's state must show a stalled publish before the join
// believes it: a publish applied as a log entry is answered within microseconds, between
// which the applied index and the pending count may be read apart.
const stallConfirm = 100 * time.Millisecond

// publishStalled reports whether the learner's publish has stalled, and how that is known.
// With Local: the learner has applied at least what a voter had applied once it listed the
// learner's name (so the publish entry is in the learner's state) while its publish request
// is still pending. A learner still catching up (receiving the leader's snapshot, however
// long that takes) is not stalled; one whose publish was applied is not either. Without
// Local, or when it fails: the learner does not serve for StallGrace.
func (j *Join) publishStalled(ctx context.Context, m *etcdserverpb.Member) (bool, string) {
	if j.Local != nil {
		if published, err := j.votersApplied(ctx, m.ID); err != nil {
			j.Logf("cannot read the voters' applied index (%v): judging learner %x by time", err, m.ID)
		} else if stalled, why, err := j.watchPublish(ctx, m, published); err != nil {
			j.Logf("cannot read learner %x's own state (%v): judging it by time", m.ID, err)
		} else {
			return stalled, why
		}
	}
	endpoint := m.ClientURLs[0]
	since := j.Clock.Now()
	for !j.serving(ctx, endpoint) {
		if j.Clock.Since(since) >= j.StallGrace {
			return true, fmt.Sprintf("it has not served for %s since it was listed: etcd is likely waiting out its request timeout on its start-up publish", j.Clock.Since(since).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return false, "" // promote reports the timeout
		case <-j.Clock.After(j.Interval):
		}
	}
	return false, ""
}

// votersApplied is the highest raft index the voting members (but skip) report applied. The
// member list that named the learner came from a member that had applied its publish, so
// this index is at or past the publish entry.
func (j *Join) votersApplied(ctx context.Context, skip uint64) (uint64, error) {
	var best uint64
	answered := 0
	var lastErr error
	for _, m := range j.members {
		if m.IsLearner || m.ID == skip || len(m.ClientURLs) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, j.CallTimeout)
		st, err := j.Status(cctx, m.ClientURLs[0])
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		answered++
		best = max(best, st.RaftAppliedIndex)
	}
	if answered == 0 {
		if lastErr == nil {
			lastErr = errors.New("no voting member with a client URL")
		}
		return 0, lastErr
	}
	return best, nil
}

// watchPublish reads the learner's own state until it shows the publish applied (not
// stalled) or stalled for stallConfirm; err when the state cannot be read.
func (j *Join) watchPublish(ctx context.Context, m *etcdserverpb.Member, published uint64) (bool, string, error) {
	const every = 25 * time.Millisecond
	var since time.Time
	start, said := j.Clock.Now(), false
	for {
		st, err := j.Local(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return false, "", nil // promote reports the timeout
			}
			return false, "", err
		}
		switch {
		case st.Applied >= published && st.Pending == 0:
			return false, "", nil
		case st.Applied >= published:
			if since.IsZero() {
				since = j.Clock.Now()
			} else if j.Clock.Since(since) >= stallConfirm {
				return true, fmt.Sprintf("it has applied index %d, past its own publish (a voter had applied %d when it listed the learner), yet its publish request still waits: the entry came inside the leader's snapshot, and etcd waits out its request timeout before it publishes again", st.Applied, published), nil
			}
		default:
			since = time.Time{}
			if !said && j.Clock.Since(start) >= 2*time.Second {
				j.Logf("learner %x is catching up: applied index %d of %d (the leader's snapshot)", m.ID, st.Applied, published)
				said = true
			}
		}
		select {
		case <-ctx.Done():
			return false, "", nil
		case <-j.Clock.After(every):
		}
	}
}

// promote retries every Interval (sub-second, no back-off): the learner is promoted as soon
// as etcd accepts it, which is the moment it has caught up. A hand loop, like waitStarted:
// between calls it also checks quorum (first: without it the list would only time out) and
// the member list, which wait's conditions cannot return as errors of their own kind, and
// it waits on the injected clock.
func (j *Join) promote(ctx context.Context, id uint64) error {
	last := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, j.CallTimeout)
		_, err := j.Cluster.MemberPromote(cctx, id)
		cancel()
		if err == nil {
			j.Logf("promoted member %x to voter", id)
			return nil
		}
		if qerr := j.quorumLost(ctx); qerr != nil {
			return qerr
		}
		if ms, lerr := j.list(ctx); lerr == nil {
			for _, m := range ms {
				if m.ID == id && !m.IsLearner {
					j.Logf("member %x already votes", id)
					return nil
				}
			}
		}
		if err.Error() != last {
			last = err.Error()
			j.Logf("promote %x: %v (retrying: the learner is still catching up)", id, err)
		}
		select {
		case <-ctx.Done():
			return operr.Wrap(operr.Timeout, err, fmt.Sprintf("etcd learner %x did not catch up to be promoted within %s", id, j.Timeout), "check etcd's logs on this node and the network between control planes")
		case <-j.Clock.After(j.Interval):
		}
	}
}

func find(ms []*etcdserverpb.Member, peerURL string) *etcdserverpb.Member {
	for _, m := range ms {
		for _, u := range m.PeerURLs {
			if u == peerURL {
				return m
			}
		}
	}
	return nil
}

// initialCluster lists every member for --initial-cluster; members that have not started yet
// have no name, so they are named by their ID (the joining one by its node name).
func initialCluster(ms []*etcdserverpb.Member, self uint64, selfName string) []Member {
	var out []Member
	for _, m := range ms {
		name := m.Name
		if m.ID == self {
			name = selfName
		} else if name == "" {
			name = strconv.FormatUint(m.ID, 16)
		}
		for _, u := range m.PeerURLs {
			out = append(out, Member{Name: name, PeerURL: u})
		}
	}
	return out
}
