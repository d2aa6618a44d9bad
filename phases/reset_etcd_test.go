package phases

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/etcd/etcdtest"
	"kjoin.dev/kjoin/operr"
)

// Reset of a control plane: refused when removing its member would cost etcd its quorum,
// allowed with --force; with a healthy peer the member goes and so does its data.
func TestResetControlPlaneQuorum(t *testing.T) {
	t.Parallel()
	join := func(t *testing.T) *cpHost {
		c := newCPHost(t)
		if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
			t.Fatal(err)
		}
		writeHost(t, c.env, "/var/lib/etcd/member/snap/db", "data", 0o600)
		return c
	}
	t.Run("peer unhealthy: refused", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		c.etcd.Unhealthy["https://10.0.0.11:2379"] = true
		_, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
		if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "lose quorum") {
			t.Fatalf("got %v", err)
		}
		if c.etcd.Member("https://10.0.0.12:2380") == nil || !c.env.Exists("/var/lib/etcd/member/snap/db") || !c.env.Exists("/etc/kubernetes/manifests/etcd.yaml") ||
			!c.env.Exists("/etc/kubernetes/manifests/kube-apiserver.yaml") {
			t.Error("a refused reset removed the member, its data, its manifest or the API server's")
		}
		rep, err := Reset(context.Background(), c.env, ResetOptions{AllowEtcdQuorumLoss: true}, nil)
		if err != nil || rep.EtcdMemberRemoved == "" || c.etcd.Member("https://10.0.0.12:2380") != nil {
			t.Fatalf("--force: %+v %v", rep, err)
		}
	})
	t.Run("peer healthy: removed", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		// The API server stops while its etcd still serves: its manifest is gone, etcd's
		// still there, when the member is removed.
		var apiServerThen, etcdThen bool
		c.etcd.OnRemove = func() {
			apiServerThen, etcdThen = c.env.Exists("/etc/kubernetes/manifests/kube-apiserver.yaml"), c.env.Exists("/etc/kubernetes/manifests/etcd.yaml")
		}
		rep, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if apiServerThen || !etcdThen {
			t.Errorf("when the member was removed: API server manifest there %v, etcd's %v; want the API server stopped first, etcd still running", apiServerThen, etcdThen)
		}
		if c.etcd.Member("https://10.0.0.12:2380") != nil || rep.EtcdMemberRemoved == "" || rep.Role != "control-plane" {
			t.Errorf("report %+v", rep)
		}
		if c.env.Exists("/var/lib/etcd/member") || c.env.Exists("/etc/kubernetes/manifests/etcd.yaml") || c.env.Exists("/etc/kubernetes/pki/ca.key") {
			t.Error("reset left etcd data, a manifest or a key behind")
		}
	})
	t.Run("dry run: checked and planned, nothing removed", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		rep, err := Reset(context.Background(), c.env, ResetOptions{DryRun: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		id := c.etcd.Member("https://10.0.0.12:2380")
		if id == nil || !c.env.Exists("/var/lib/etcd/member/snap/db") || !c.env.Exists("/etc/kubernetes/manifests/etcd.yaml") || rep.EtcdMemberRemoved != "" {
			t.Fatalf("a dry run removed the member, its data or its manifest: %+v", rep)
		}
		plan := strings.Join(rep.PlannedActions, "\n")
		for _, want := range []string{fmt.Sprintf("remove etcd member %x (cp2 https://10.0.0.12:2380)", id.ID), "remove /etc/kubernetes/manifests/etcd.yaml", "remove /var/lib/etcd/member"} {
			if !strings.Contains(plan, want) {
				t.Errorf("plan lacks %q:\n%s", want, plan)
			}
		}
		// The same checks refuse a dry run where the reset would be refused.
		c.etcd.Unhealthy["https://10.0.0.11:2379"] = true
		if _, err := Reset(context.Background(), c.env, ResetOptions{DryRun: true}, nil); operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "lose quorum") {
			t.Fatalf("dry run with etcd short of quorum: %v", err)
		}
	})
	t.Run("removal answered by the removed member", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		c.etcd.RemoveStops = true
		rep, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
		if err != nil || rep.EtcdMemberRemoved == "" || c.etcd.Member("https://10.0.0.12:2380") != nil {
			t.Fatalf("a removal that took effect but was answered \"server stopped\": %+v %v", rep, err)
		}
	})
	t.Run("three voters, another one down: refused", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		c.etcd.Members = append(c.etcd.Members, &etcdserverpb.Member{ID: 3, Name: "cp3", PeerURLs: []string{"https://10.0.0.13:2380"}, ClientURLs: []string{"https://10.0.0.13:2379"}})
		c.etcd.Unhealthy["https://10.0.0.13:2379"] = true
		for _, m := range c.etcd.Members {
			if m.PeerURLs[0] == "https://10.0.0.12:2380" {
				m.ClientURLs = []string{"https://10.0.0.12:2379"} // this node's own member answers
			}
		}
		_, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
		if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "only 1 are healthy") {
			t.Fatalf("got %v: this node's own member must not count among the healthy others", err)
		}
		if c.etcd.Member("https://10.0.0.12:2380") == nil {
			t.Error("the member was removed although quorum would be lost")
		}
	})
	t.Run("three voters, one never started: refused", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		// A voter added but never started has no client URL: it is not asked, and not healthy.
		c.etcd.Members = append(c.etcd.Members, &etcdserverpb.Member{ID: 3, PeerURLs: []string{"https://10.0.0.13:2380"}})
		_, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
		if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "leave 2 voting member(s) of which only 1 are healthy") {
			t.Fatalf("got %v: a voter that never started must count as a voter that is not healthy", err)
		}
		if c.etcd.Member("https://10.0.0.12:2380") == nil {
			t.Error("the member was removed although quorum would be lost")
		}
	})
	t.Run("member not removed: its data stays", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		rep, err := Reset(context.Background(), c.env, ResetOptions{}, []string{"remove-etcd-member"})
		if err != nil {
			t.Fatal(err)
		}
		if c.etcd.Member("https://10.0.0.12:2380") == nil || !c.env.Exists("/var/lib/etcd/member/snap/db") {
			t.Errorf("with remove-etcd-member skipped the member's data went while the member is still in the cluster: %+v", rep)
		}
		if !strings.Contains(strings.Join(rep.Warnings, "\n"), "kept the etcd data") {
			t.Errorf("warnings %v", rep.Warnings)
		}
	})
	t.Run("last member: refused", func(t *testing.T) {
		t.Parallel()
		c := join(t)
		_, _ = c.etcd.MemberRemove(context.Background(), 1)
		_, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
		if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "last etcd member") {
			t.Fatalf("got %v", err)
		}
	})
}

// dialLog is an etcd dialer that records each dial's endpoints and which connection each
// removal went through; dials of failDial fail.
type dialLog struct {
	cluster  *etcdtest.Cluster
	failDial string
	dials    []string
	removals []string
}

func (d *dialLog) dial(eps []string, _ *tls.Config) (etcd.Conn, error) {
	ep := strings.Join(eps, ",")
	d.dials = append(d.dials, ep)
	if ep == d.failDial {
		return nil, errors.New("connection refused")
	}
	return dialedConn{Conn: d.cluster, eps: ep, log: d}, nil
}

type dialedConn struct {
	etcd.Conn
	eps string
	log *dialLog
}

func (c dialedConn) MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	c.log.removals = append(c.log.removals, c.eps)
	return c.Conn.MemberRemove(ctx, id)
}

// Reset asks this node's own member (the manifest's client URL) for the membership and the
// healthy others for the removal (the removed member's own answer may be "server stopped");
// with no healthy other, or none that can be dialled, it asks its own member. A removal etcd
// refuses fails the reset and leaves the member.
func TestResetEtcdAsksTheOthersToRemove(t *testing.T) {
	t.Parallel()
	const self, other = "https://10.0.0.12:2379", "https://10.0.0.11:2379"
	for _, tc := range []struct {
		name            string
		setup           func(*cpHost, *dialLog)
		opts            ResetOptions
		dials, removals []string
		wantErr         string
	}{
		{"a healthy other", nil, ResetOptions{}, []string{self, other}, []string{other}, ""},
		{"no healthy other (--allow-etcd-quorum-loss)", func(c *cpHost, _ *dialLog) { c.etcd.Unhealthy[other] = true },
			ResetOptions{AllowEtcdQuorumLoss: true}, []string{self}, []string{self}, ""},
		{"the others cannot be dialled", func(_ *cpHost, d *dialLog) { d.failDial = other }, ResetOptions{}, []string{self, other}, []string{self}, ""},
		{"removal refused", func(c *cpHost, _ *dialLog) { c.etcd.RemoveError = errors.New("etcdserver: permission denied") },
			ResetOptions{}, []string{self, other}, []string{other}, "remove etcd member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCPHost(t)
			if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
				t.Fatal(err)
			}
			d := &dialLog{cluster: c.etcd}
			c.env.DialEtcd = d.dial
			if tc.setup != nil {
				tc.setup(c, d)
			}
			rep, err := Reset(context.Background(), c.env, tc.opts, nil)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("reset: %v, want error %q", err, tc.wantErr)
			}
			if !slices.Equal(d.dials, tc.dials) || !slices.Equal(d.removals, tc.removals) {
				t.Errorf("dialled %q, removal through %q; want %q and %q", d.dials, d.removals, tc.dials, tc.removals)
			}
			gone := c.etcd.Member("https://10.0.0.12:2380") == nil
			if gone != (tc.wantErr == "") || (rep != nil && (rep.EtcdMemberRemoved != "") != gone) {
				t.Errorf("member gone %v, reported %+v", gone, rep)
			}
		})
	}
}
