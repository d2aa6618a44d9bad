package phases

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// ResetEtcdMember removes this node's etcd member, refusing when that would cost etcd its
// quorum (or remove its last member) unless --allow-etcd-quorum-loss. Once the checks pass, the
// API server, controller-manager and scheduler are stopped first (their manifests removed,
// their ports waited for) while their etcd still serves: an API server whose etcd member is
// gone hangs in its shutdown until the kubelet kills it, 30 s later.
//
//	Reads:  s.EtcdManifest, s.Opts.AllowEtcdQuorumLoss; the etcd client certificate named by the manifest
//	Writes: s.Report.EtcdMemberRemoved, s.EtcdDataMayGo; removes the join's static pod
//	        manifests but etcd's (s.Report.RemovedFiles)
var ResetEtcdMember = ResetPhase{
	Name: "remove-etcd-member", Short: "Remove this node's etcd member (quorum-checked)", Run: runResetEtcdMember,
	Skip: func(s *ResetState) string {
		if len(s.EtcdManifest) == 0 {
			return "no local etcd"
		}
		return ""
	},
}

func runResetEtcdMember(ctx context.Context, e *host.Env, s *ResetState) error {
	warn := func(format string, a ...any) { s.Warn(e, "remove-etcd-member", format, a...) }
	id, gone, err := removeEtcdMember(ctx, e, s.EtcdManifest, s.Opts.AllowEtcdQuorumLoss, warn, func(id uint64, what string) bool {
		if s.Opts.DryRun {
			s.Change(e, "remove-etcd-member", host.EffectAPI, "remove etcd member %x (%s)", id, what)
			return false
		}
		removeStaticPods(ctx, e, s, "remove-etcd-member", path.Join(host.ManifestsDir, "etcd.yaml"), []int{s.APIServerPort, 10257, 10259})
		return true
	})
	if err != nil {
		return err
	}
	if id != "" {
		s.Report.EtcdMemberRemoved = id
		s.Change(e, "remove-etcd-member", host.EffectAPI, "remove etcd member %s", id)
	}
	s.EtcdDataMayGo = s.EtcdDataMayGo || gone
	return nil
}

// removeEtcdMember removes this node's etcd member, refusing to break quorum unless allowed.
// The member is this node's when it has the manifest's peer URL or, with no peer URL in it,
// the manifest's --name: a manifest naming neither is not taken as "not a member".
// gone reports that the member is out of the cluster (removed now, or not a member), so its
// data may be wiped. Once every check passed, proceed is asked with the member's ID and a
// description; when it says no (a dry run) nothing is removed and gone reports that the member
// would be.
func removeEtcdMember(ctx context.Context, e *host.Env, manifest []byte, allowQuorumLoss bool, warn func(string, ...any), proceed func(id uint64, what string) bool) (id string, gone bool, err error) {
	flags := staticPodFlags(manifest)
	peerURL := flags["initial-advertise-peer-urls"]
	name := flags["name"]
	clientURL := firstURL(flags["advertise-client-urls"])
	if clientURL == "" {
		clientURL = "https://127.0.0.1:2379"
	}
	if peerURL == "" && name == "" {
		if allowQuorumLoss {
			warn("the etcd manifest names neither this member's peer URL nor its name; no etcd member was removed (--allow-etcd-quorum-loss)")
			return "", false, nil
		}
		return "", false, operr.New(operr.Preflight, "the etcd manifest names neither this member's peer URL (--initial-advertise-peer-urls) nor its name (--name), so its etcd member cannot be found",
			"remove the member by hand (etcdctl member list, etcdctl member remove), then reset with --allow-etcd-quorum-loss")
	}
	tlsCfg, err := host.EtcdClientTLS(e, etcdCertificatesDir(flags))
	if err != nil {
		if allowQuorumLoss {
			warn("cannot read this node's etcd client certificate (%v); its etcd member was not removed (--allow-etcd-quorum-loss)", err)
			return "", false, nil
		}
		return "", false, operr.Wrap(operr.Preflight, err, "cannot read this node's etcd client certificate, so its etcd member cannot be removed",
			"restore the certificate, or pass --allow-etcd-quorum-loss to reset anyway (then remove the member by hand: etcdctl member remove)")
	}
	cli, err := e.DialEtcd([]string{clientURL}, tlsCfg)
	if err != nil {
		return "", false, operr.Wrap(operr.Other, err, "connect to etcd", "")
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(cctx)
	if err != nil {
		if allowQuorumLoss {
			warn("etcd is unreachable (%v); member not removed (--allow-etcd-quorum-loss)", err)
			return "", false, nil
		}
		return "", false, operr.Wrap(operr.Other, err, "etcd does not answer, so this node's member cannot be removed safely", "fix etcd, or pass --allow-etcd-quorum-loss to reset anyway (then remove the member by hand: etcdctl member remove)")
	}
	var self uint64
	var others []string   // healthy other voters' client URLs
	var otherIDs []uint64 // and their IDs
	voters, healthyOthers := 0, 0
	for _, m := range list.Members {
		mine := (peerURL != "" && slices.Contains(m.PeerURLs, firstURL(peerURL))) || (peerURL == "" && m.Name == name)
		if mine {
			self = m.ID
		}
		if m.IsLearner {
			continue
		}
		voters++
		if !mine && len(m.ClientURLs) > 0 && etcd.Probe(ctx, cli.Status, m.ClientURLs[0]).OK() {
			healthyOthers++
			others = append(others, m.ClientURLs[0])
			otherIDs = append(otherIDs, m.ID)
		}
	}
	if self == 0 {
		return "", true, nil
	}
	remaining := voters - 1
	if remaining == 0 && !allowQuorumLoss {
		return "", false, operr.New(operr.Preflight, "this node holds the last etcd member: removing it destroys the cluster's data", "pass --allow-etcd-quorum-loss if that is what you want")
	}
	if remaining > 0 && healthyOthers < remaining/2+1 && !allowQuorumLoss {
		return "", false, operr.Newf(operr.Preflight,
			"removing this etcd member would leave %d voting member(s) of which only %d are healthy: etcd would lose quorum", remaining, healthyOthers).
			WithHint("bring the other control planes' etcd back first, or pass --allow-etcd-quorum-loss")
	}
	if !proceed(self, strings.TrimSpace(name+" "+peerURL)) {
		return "", true, nil
	}
	handOffLeadership(ctx, e, cli, clientURL, self, otherIDs, warn)
	// Ask the other members: the member being removed stops serving the moment the removal
	// is applied, so its own answer may be "server stopped" for a removal that happened.
	rcli := cli
	if len(others) > 0 {
		if oc, err := e.DialEtcd(others, tlsCfg); err == nil {
			defer oc.Close()
			rcli = oc
		}
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	if err := etcd.RemoveMember(rctx, rcli, self, e.Clock); err != nil && !memberGone(ctx, rcli, self) {
		return "", false, operr.Wrap(operr.Other, err, fmt.Sprintf("remove etcd member %x", self), "")
	}
	e.Logf("remove-etcd-member", "removed etcd member %x (%s %s)", self, name, peerURL)
	return fmt.Sprintf("%x", self), true, nil
}

// handOffLeadership moves etcd's leadership from this member to a healthy voter before the
// member is removed: a leader that removes itself leaves the cluster without one until an
// election ends (writes wait, an election timeout or more), a hand-off takes a heartbeat.
// When it fails the removal goes on (etcd elects a leader by itself), with a warning.
func handOffLeadership(ctx context.Context, e *host.Env, cli etcd.Conn, self string, id uint64, to []uint64, warn func(string, ...any)) {
	if len(to) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, self)
	if err != nil || st.Leader != id {
		return
	}
	if _, err := cli.MoveLeader(sctx, to[0]); err != nil {
		warn("could not hand etcd's leadership to member %x before removing this one (%v): the cluster elects a new leader by itself", to[0], err)
		return
	}
	e.Logf("remove-etcd-member", "handed etcd leadership from %x to %x", id, to[0])
}

// firstURL is the first of a comma-separated URL list, as etcd flags hold them.
func firstURL(list string) string {
	u, _, _ := strings.Cut(list, ",")
	return strings.TrimSpace(u)
}

// etcdCertificatesDir is the certificates directory the etcd manifest uses
// (<dir>/etcd/ca.crt is its trusted CA), else kubeadm's default.
func etcdCertificatesDir(flags map[string]string) string {
	if ca := flags["trusted-ca-file"]; path.IsAbs(ca) && path.Base(path.Dir(ca)) == "etcd" {
		return path.Dir(path.Dir(ca))
	}
	return host.PKIDir
}

// memberGone reports whether the membership (as cli sees it) no longer has id.
func memberGone(ctx context.Context, cli etcd.Conn, id uint64) bool {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := cli.MemberList(cctx)
	if err != nil {
		return false
	}
	for _, m := range list.Members {
		if m.ID == id {
			return false
		}
	}
	return true
}
