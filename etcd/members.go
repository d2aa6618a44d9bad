package etcd

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"k8s.io/utils/clock"
)

// MemberState is one etcd member as a join, verify and diagnose classify it: voter or
// learner, started (it has published its name) or not, and whether its peer URL answers.
type MemberState struct {
	ID      uint64
	Name    string // empty for a member that never started
	PeerURL string
	Learner bool
	Started bool
	// Silent is true when nothing accepted a connection at the peer URL when asked.
	Silent bool
	// Probed is false when the peer URL was not asked (Silent is then meaningless).
	Probed bool
}

// Kind is the member's class: "voter started", "learner started", "learner never started"
// (a voter that never started: "voter never started"), with ", peer URL silent" when its peer
// URL did not answer.
func (m MemberState) Kind() string {
	k := "voter"
	if m.Learner {
		k = "learner"
	}
	if m.Started {
		k += " started"
	} else {
		k += " never started"
	}
	if m.Probed && m.Silent {
		k += ", peer URL silent"
	}
	return k
}

// String names the member for an operator: ID, name, peer URL and class.
func (m MemberState) String() string {
	name := m.Name
	if name == "" {
		name = "no name"
	}
	return fmt.Sprintf("member %x (%s, %s, %s)", m.ID, name, m.PeerURL, m.Kind())
}

// Stale reports whether the member is a learner (it holds no vote) left by a join that did
// not finish: its peer URL is silent (started or not), or, when it was not asked, it never
// started. A learner that never started but whose peer URL answers is an etcd starting now.
func (m MemberState) Stale() bool {
	if !m.Learner {
		return false
	}
	if m.Probed {
		return m.Silent
	}
	return !m.Started
}

// PeerProbe reports whether something accepts a connection at an etcd peer URL.
type PeerProbe func(ctx context.Context, peerURL string) bool

// DialPeer is the real PeerProbe: a TCP connection to the peer URL's host and port within 1 s.
// It proves only that something listens there; a member that is down, a machine that is gone
// and an address nobody has all fail it.
func DialPeer(ctx context.Context, peerURL string) bool {
	u, err := url.Parse(peerURL)
	if err != nil || u.Host == "" {
		return false
	}
	hostport := u.Host
	if u.Port() == "" {
		hostport = net.JoinHostPort(u.Hostname(), "2380")
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(cctx, "tcp", hostport)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Classify turns a member list into MemberStates, asking each member's first peer URL once
// (probe may be nil: nothing is asked).
func Classify(ctx context.Context, ms []*etcdserverpb.Member, probe PeerProbe) []MemberState {
	out := make([]MemberState, 0, len(ms))
	for _, m := range ms {
		s := MemberState{ID: m.ID, Name: m.Name, Learner: m.IsLearner, Started: m.Name != ""}
		if len(m.PeerURLs) > 0 {
			s.PeerURL = m.PeerURLs[0]
		}
		if probe != nil && s.PeerURL != "" {
			s.Probed, s.Silent = true, !probe(ctx, s.PeerURL)
		}
		out = append(out, s)
	}
	return out
}

// SilentFor reports whether peerURL stays silent for the whole of d, asked every interval:
// the proof that a member is dead. One answer ends it (false).
func SilentFor(ctx context.Context, clk clock.Clock, probe PeerProbe, peerURL string, d, interval time.Duration) bool {
	start := clk.Now()
	for {
		if probe(ctx, peerURL) {
			return false
		}
		if clk.Since(start) >= d {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-clk.After(interval):
		}
	}
}

// Describe lists member states for a message, separated by semicolons.
func Describe(ms []MemberState) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.String())
	}
	return strings.Join(parts, "; ")
}

// LeftBehind are the members a cluster should not have: learners left by joins that did not
// finish, and members (voters included) whose peer URL is silent.
func LeftBehind(states []MemberState) []MemberState {
	var out []MemberState
	for _, m := range states {
		if m.Stale() || (m.Probed && m.Silent) {
			out = append(out, m)
		}
	}
	return out
}

// LeftBehindRemedy is what an operator does about members LeftBehind lists (verify, diagnose).
const LeftBehindRemedy = "a learner left by a failed join: the next kjoin join --control-plane removes it with --remove-dead-etcd-learners (or etcdctl member remove <id>); " +
	"a voter whose machine is gone: join that machine again with kjoin join --control-plane (it replaces its own former member once that is proven dead), " +
	"or remove it with etcdctl member remove <id> while the other voters keep quorum; a joining control plane never removes another's voter"

// hexID is a member ID as etcdctl prints it.
func hexID(id uint64) string { return strconv.FormatUint(id, 16) }
