package phases

import (
	"context"
	"fmt"
	"path"
	"time"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/operr"
)

// ResetEtcdMember removes this node's etcd member, refusing when that would cost etcd its
// quorum (or remove its last member) unless --force.
//
//	Reads:  s.Reset (EtcdManifest, Opts.Force); the etcd client certificate named by the manifest
//	Writes: s.Reset.Report.EtcdMemberRemoved, s.Reset.EtcdDataMayGo
var ResetEtcdMember = Phase{
	Name: "remove-etcd-member", Short: "Remove this node's etcd member (quorum-checked)", Run: runResetEtcdMember,
	Skip: func(s *State) string {
		if len(s.Reset.EtcdManifest) == 0 {
			return "no local etcd"
		}
		return ""
	},
}

func runResetEtcdMember(ctx context.Context, e *Env, s *State) error {
	warn := func(format string, a ...any) { s.Warn(e, "remove-etcd-member", format, a...) }
	id, gone, err := removeEtcdMember(ctx, e, s.Reset.EtcdManifest, s.Reset.Opts.Force, warn)
	if err != nil {
		return err
	}
	if id != "" {
		s.Reset.Report.EtcdMemberRemoved = id
		s.MarkChanged()
	}
	s.Reset.EtcdDataMayGo = s.Reset.EtcdDataMayGo || gone
	return nil
}

// removeEtcdMember removes this node's etcd member, refusing to break quorum unless forced.
// gone reports that the member is out of the cluster (removed now, or not a member), so its
// data may be wiped.
func removeEtcdMember(ctx context.Context, e *Env, manifest []byte, force bool, warn func(string, ...any)) (id string, gone bool, err error) {
	flags := staticPodFlags(manifest)
	peerURL := flags["initial-advertise-peer-urls"]
	clientURL := flags["advertise-client-urls"]
	if peerURL == "" {
		return "", true, nil
	}
	tlsCfg, err := EtcdClientTLS(e, etcdCertificatesDir(flags))
	if err != nil {
		if force {
			warn("cannot read this node's etcd client certificate (%v); its etcd member was not removed (--force)", err)
			return "", false, nil
		}
		return "", false, operr.Wrap(operr.Preflight, err, "cannot read this node's etcd client certificate, so its etcd member cannot be removed",
			"restore the certificate, or pass --force to reset anyway (then remove the member by hand: etcdctl member remove)")
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
		if force {
			warn("etcd is unreachable (%v); member not removed (--force)", err)
			return "", false, nil
		}
		return "", false, operr.Wrap(operr.Other, err, "etcd does not answer, so this node's member cannot be removed safely", "fix etcd, or pass --force to reset anyway (then remove the member by hand: etcdctl member remove)")
	}
	var self uint64
	var others []string // healthy other voters' client URLs
	voters, healthyOthers := 0, 0
	for _, m := range list.Members {
		mine := false
		for _, u := range m.PeerURLs {
			if u == peerURL {
				self, mine = m.ID, true
			}
		}
		if m.IsLearner {
			continue
		}
		voters++
		if !mine && len(m.ClientURLs) > 0 && etcd.Probe(ctx, cli.Status, m.ClientURLs[0]).OK() {
			healthyOthers++
			others = append(others, m.ClientURLs[0])
		}
	}
	if self == 0 {
		return "", true, nil
	}
	remaining := voters - 1
	if remaining == 0 && !force {
		return "", false, operr.New(operr.Preflight, "this node holds the last etcd member: removing it destroys the cluster's data", "pass --force if that is what you want")
	}
	if remaining > 0 && healthyOthers < remaining/2+1 && !force {
		return "", false, operr.Newf(operr.Preflight,
			"removing this etcd member would leave %d voting member(s) of which only %d are healthy: etcd would lose quorum", remaining, healthyOthers).
			WithHint("bring the other control planes' etcd back first, or pass --force")
	}
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
	e.Logf("remove-etcd-member", "removed etcd member %x (%s)", self, peerURL)
	return fmt.Sprintf("%x", self), true, nil
}

// etcdCertificatesDir is the certificates directory the etcd manifest uses
// (<dir>/etcd/ca.crt is its trusted CA), else kubeadm's default.
func etcdCertificatesDir(flags map[string]string) string {
	if ca := flags["trusted-ca-file"]; path.IsAbs(ca) && path.Base(path.Dir(ca)) == "etcd" {
		return path.Dir(path.Dir(ca))
	}
	return PKIDir
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
