package phases

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

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
