package diagnose

import (
	"context"
	"fmt"
	"path"
	"time"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/host"
)

// etcdChecks runs on a control plane with a stacked etcd (this node has an etcd manifest):
// the cluster's members as this node's etcd lists them, naming learners left by joins that
// did not finish and members whose peer URL is silent, with the remedy (etcd.members). They
// block later control-plane joins, not this node, so they are warnings.
func (g *diagnosis) etcdChecks(ctx context.Context) {
	if !g.e.Exists(path.Join(host.ManifestsDir, "etcd.yaml")) || g.e.DialEtcd == nil {
		return
	}
	tlsCfg, err := host.EtcdClientTLS(g.e, host.PKIDir)
	if err != nil {
		g.warn("etcd.members", "etcd members not checked: no etcd client certificate here", err.Error())
		return
	}
	conn, err := g.e.DialEtcd([]string{"https://127.0.0.1:2379"}, tlsCfg)
	if err != nil {
		g.warn("etcd.members", "etcd members not checked", err.Error())
		return
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	list, err := conn.MemberList(cctx)
	cancel()
	if err != nil {
		g.warn("etcd.members", "this node's etcd did not list the members (no quorum, or not running)", err.Error())
		return
	}
	states := etcd.Classify(ctx, list.Members, g.e.EtcdPeer)
	if left := etcd.LeftBehind(states); len(left) > 0 {
		g.warn("etcd.members", fmt.Sprintf("%d etcd member(s) left behind, which block control-plane joins: %s", len(left), etcd.Describe(left)), etcd.LeftBehindRemedy)
		return
	}
	g.pass("etcd.members", fmt.Sprintf("%d etcd members, none left behind", len(states)), etcd.Describe(states))
}
