package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"kjoin.dev/kjoin/operr"
)

// replaceFormer handles a voting member with this node's peer URL found while this node's
// data directory is empty: the member of a machine that had this address before (this one
// reinstalled). Started as that member, etcd would vote with an empty log. It is removed,
// so that this node joins afresh as a learner, only when all of these hold:
//
//   - the operator meant it: --replace, or the member has this node's name as well;
//   - it is dead: its peer URL stays silent for DeadAfter;
//   - the other voters keep quorum: a majority of the current voters answer without it.
//
// Otherwise the join is refused at once, naming the member and the remedy.
func (j *Join) replaceFormer(ctx context.Context, me *etcdserverpb.Member, members []*etcdserverpb.Member, dry bool) (*MemberState, error) {
	st := Classify(ctx, []*etcdserverpb.Member{me}, nil)[0]
	if !j.Replace && (me.Name == "" || me.Name != j.Name) {
		return nil, &operr.Error{Code: operr.Preflight,
			What: fmt.Sprintf("etcd %s votes with this node's peer URL, but this node's etcd data directory is empty: it is the member of a machine that had this address before, under another name", st),
			Hint: fmt.Sprintf("if that machine is gone for good, run the same command with --replace (kjoin removes the member once its peer URL has stayed silent for %s and the other voters keep quorum), or remove it on a control plane with etcdctl member remove %s; if that machine still runs, give this node another address", j.DeadAfter, hexID(me.ID))}
	}
	j.Logf("etcd %s votes with this node's peer URL while this node's data directory is empty: the member of the machine this node replaces; checking that it is dead (its peer URL silent for %s)", st, j.DeadAfter)
	if !j.silent(ctx, j.PeerURL, dry) {
		return nil, &operr.Error{Code: operr.Busy,
			What: fmt.Sprintf("etcd %s votes with this node's peer URL and something answers at %s: not removed", st, j.PeerURL),
			Hint: "another machine (or a process on this one) serves this peer URL: stop it if it is the former machine, or give this node another address; then run the same command again"}
	}
	st.Probed, st.Silent = true, true
	others, healthy, detail := j.voterHealth(ctx, members, me.ID)
	voters := others + 1 // the former member still votes until it is removed
	if !majority(healthy, voters) {
		return nil, &operr.Error{Code: operr.Other, Retryable: true,
			What: fmt.Sprintf("etcd %s is dead, but only %d of the %d voters answer (%s): removing it needs a majority of them", st, healthy, voters, strings.Join(detail, ", ")),
			Hint: "bring the other control planes' etcd back first, then run the same command again"}
	}
	if dry {
		return &st, nil
	}
	rctx, cancel := context.WithTimeout(ctx, 4*j.CallTimeout)
	err := RemoveMember(rctx, j.Cluster, me.ID, j.Clock)
	cancel()
	if err != nil {
		return nil, etcdError(err, "remove the former etcd member "+hexID(me.ID))
	}
	j.Logf("removed etcd %s: its peer URL stayed silent for %s and %d of the other %d voters answer; this node joins as a new member", st, j.DeadAfter, healthy, voters-1)
	return &st, nil
}

// clearLearners looks at every other learner before this join adds its own (etcd allows one
// learner at a time). A learner that has started and answers is another join in progress:
// the join waits for it as before. A learner that never started, or whose peer URL is silent,
// was left by a join that did not finish: without RemoveDeadLearners the join is refused at
// once, naming it; with it, each is removed once proven dead (silent for DeadAfter). A
// learner holds no vote, so its removal never touches quorum. Voters are never removed here.
func (j *Join) clearLearners(ctx context.Context, members []*etcdserverpb.Member, dry bool) ([]MemberState, error) {
	var others []*etcdserverpb.Member
	for _, m := range members {
		if find([]*etcdserverpb.Member{m}, j.PeerURL) == nil {
			others = append(others, m)
		}
	}
	states := Classify(ctx, others, j.Peer)
	j.Logf("etcd members before this join: %s", Describe(states))
	var stale []MemberState
	for _, m := range states {
		if m.Stale() {
			stale = append(stale, m)
		}
	}
	if len(stale) == 0 {
		return nil, nil
	}
	if !j.RemoveDeadLearners {
		return nil, &operr.Error{Code: operr.Busy,
			What: fmt.Sprintf("etcd allows one learner at a time, and %s blocks this join: left by a join that did not finish", Describe(stale)),
			Hint: fmt.Sprintf("if no join is running for it, run the same command with --remove-dead-etcd-learners (kjoin removes a learner only once its peer URL has stayed silent for %s), or remove it on a control plane with etcdctl member remove %s", j.DeadAfter, hexID(stale[0].ID))}
	}
	var removed []MemberState
	for _, m := range stale {
		if !j.silent(ctx, m.PeerURL, dry) {
			return removed, &operr.Error{Code: operr.Busy, Retryable: true,
				What: fmt.Sprintf("etcd %s answers at its peer URL: not removed (a join in progress?)", m),
				Hint: "wait for that join to finish, then run the same command again"}
		}
		m.Probed, m.Silent = true, true
		if dry {
			removed = append(removed, m)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 4*j.CallTimeout)
		err := RemoveMember(rctx, j.Cluster, m.ID, j.Clock)
		cancel()
		if err != nil {
			return removed, etcdError(err, "remove the dead learner "+hexID(m.ID))
		}
		removed = append(removed, m)
		j.Logf("removed dead etcd %s: its peer URL stayed silent for %s", m, j.DeadAfter)
	}
	return removed, nil
}

// silent proves a peer URL dead: silent for DeadAfter; in a dry run, silent when asked once.
func (j *Join) silent(ctx context.Context, peerURL string, dry bool) bool {
	if dry {
		return !j.Peer(ctx, peerURL)
	}
	return SilentFor(ctx, j.Clock, j.Peer, peerURL, j.DeadAfter, j.Interval*5)
}

// Plan says, without the lock and without changing etcd, what Run would do about the members
// of an earlier life: the former voter it would replace and the dead learners it would remove
// (each peer URL asked once instead of proven silent for DeadAfter), or the refusal Run would
// return, as its error.
func (j *Join) Plan(ctx context.Context) (*Result, error) {
	j.defaults()
	members, err := j.list(ctx)
	if err != nil {
		return nil, operr.Wrap(operr.Other, err, "etcd has no quorum or cannot be reached", "check the existing control planes' etcd before adding a member")
	}
	res := &Result{}
	me := find(members, j.PeerURL)
	if me != nil && !me.IsLearner && j.FreshData && me.ID != j.OwnMember {
		if res.Replaced, err = j.replaceFormer(ctx, me, members, true); err != nil {
			return res, err
		}
		members = slices.DeleteFunc(slices.Clone(members), func(m *etcdserverpb.Member) bool { return m.ID == me.ID })
		me = nil
	}
	if me == nil {
		res.RemovedLearners, err = j.clearLearners(ctx, members, true)
	}
	return res, err
}

// deadAfterDefault is the default proof window for a dead member.
const deadAfterDefault = 5 * time.Second
