package phases

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"kjoin.dev/kjoin/certs"
	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/manifests"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// EtcdJoin adds this node's stacked etcd member: under a lock held in etcd (so control planes
// can join in parallel), as a learner, then the etcd manifest, then promotion once it has
// caught up. Re-runs find their member and continue.
//
// A failed join removes the etcd manifest again and, with its removed learner, that learner's
// data (member/), only from a data directory the join found empty;
// the lock's lease is kept in the journal while held, so the re-run of a killed join revokes it.
//
//	Reads:  s.Cluster, s.AdminClient, s.Journal (EtcdLockLease), s.Opts (NodeName, AdvertiseAddress, Timeouts),
//	        s.startKubelet (kubelet-start's restart, run once this node holds the etcd join lock)
//	Writes: s.EtcdMemberID, s.Journal (EtcdLockLease, EtcdMemberID, EtcdDataDir); /etc/kubernetes/manifests/etcd.yaml, the etcd data dir
//	        (etcd.local.dataDir, /var/lib/etcd by default; its member/ removed with an undone learner);
//	        runs systemctl restart kubelet when kubelet-start left it to this turn
var EtcdJoin = Phase{
	Name: "etcd-join", Short: "Add this node's etcd member (learner, then voter)",
	Skip: func(s *State) string {
		if r := workerSkip(s); r != "" {
			return r
		}
		if s.Cluster != nil && s.Cluster.Etcd.Local == nil {
			return "external etcd"
		}
		return ""
	},
	Run: runEtcdJoin,
}

func runEtcdJoin(ctx context.Context, e *host.Env, s *State) error {
	needPrepare := operr.New(operr.Usage, "etcd-join needs the control-plane-prepare phase", "run the whole join, or kjoin join phase control-plane-prepare first")
	if s.Cluster == nil {
		return needPrepare
	}
	peerURL := "https://" + host.JoinHostPort(s.Opts.AdvertiseAddress, 2380)
	if s.Opts.DryRun {
		e.Fx().API("add etcd learner " + peerURL + ", write " + path.Join(host.ManifestsDir, "etcd.yaml") + ", promote it to voter")
		return planEtcdRepairs(ctx, e, s, peerURL)
	}
	if s.AdminClient == nil {
		return needPrepare
	}
	endpoints, err := etcdEndpoints(ctx, e, s)
	if err != nil {
		return err
	}
	tlsCfg, err := etcdTLS(e, s)
	if err != nil {
		return err
	}
	cli, err := e.DialEtcd(endpoints, tlsCfg)
	if err != nil {
		return operr.Wrap(operr.Other, err, "connect to etcd at "+strings.Join(endpoints, ","), "")
	}
	defer cli.Close()
	if j := s.Journal; j != nil && j.EtcdLockLease != 0 {
		// An interrupted run of this node may still hold the lock: let it go now rather than
		// wait for its lease to expire.
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		switch revoked, err := cli.RevokeLockLease(rctx, j.EtcdLockLease); {
		case err == nil && revoked:
			e.Logf("etcd-join", "released the etcd join lock lease %x of an interrupted run", j.EtcdLockLease)
		case err == nil:
			e.Debugf("etcd-join", "the journal's lease %x holds no etcd join lock (expired, or not the lock's): left alone", j.EtcdLockLease)
		}
		rcancel()
		j.EtcdLockLease = 0
	}
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	lock, err := cli.NewLock(lctx, 30)
	lcancel()
	if err != nil {
		return operr.Wrap(operr.Other, err, "cannot open an etcd session at "+strings.Join(endpoints, ",")+" ("+etcdHealth(ctx, cli, endpoints)+")",
			"etcd needs a majority of its voting members up (quorum): check etcd on the existing control planes, then run the same command again")
	}
	if j := s.Journal; j != nil {
		j.EtcdLockLease = lock.Lease()
		if err := j.Save(e); err != nil {
			return err
		}
		defer func() { j.EtcdLockLease = 0 }()
	}
	// control-plane-prepare (which fetched s.Cluster) checked the data directory is etcd's own.
	dataDir := path.Clean(s.Cluster.Etcd.Local.DataDir)
	fresh, err := etcdDataDirEmpty(e, dataDir)
	if err != nil {
		return fmt.Errorf("read the etcd data directory %s: %w", dataDir, err)
	}
	ownsData, err := claimEtcdDataDir(e, s, dataDir)
	if err != nil {
		return err
	}
	j := &etcd.Join{
		Cluster: cli, Lock: lock, Name: s.Opts.NodeName, PeerURL: peerURL,
		Timeout: s.Opts.Timeouts.EtcdAPICall, Clock: e.Clock, Status: cli.Status, At: e.At,
		FreshData: fresh, OwnMember: journalMember(s), Replace: s.Opts.Replace, RemoveDeadLearners: s.Opts.RemoveDeadLearners, Peer: e.EtcdPeer,
		RemoveManifest: func(wipeData bool) error {
			if err := e.Fx().Remove(path.Join(host.ManifestsDir, "etcd.yaml")); err != nil {
				return err
			}
			if !wipeData {
				return nil
			}
			if !ownsData {
				e.Logf("etcd-join", "kept %s: this join did not find it empty, so its data is not the removed learner's alone", dataDir)
				return nil
			}
			// Only what the removed learner wrote: etcd keeps all of a member's data in member/.
			return e.Fx().Remove(path.Join(dataDir, etcdMemberData))
		},
		Logf:    func(f string, a ...any) { e.Logf("etcd-join", f, a...) },
		OnTurn:  s.startKubelet, // kubelet-start left it to this turn (nil: it has started)
		Restart: func() error { return restartEtcd(e, s.Opts.NodeName, peerURL) },
		Local:   etcdLocalState(e, manifests.EtcdMetricsURL(s.Cluster, manifestNode(e, s))),
		WriteManifest: func(members []etcd.Member) error {
			var ms []manifests.Member
			for _, m := range members {
				ms = append(ms, manifests.Member{Name: m.Name, PeerURL: m.PeerURL})
			}
			b, err := manifests.Etcd(s.Cluster, manifestNode(e, s), ms)
			if err != nil {
				return err
			}
			return writeManifest(e, s, "etcd", b)
		},
	}
	waited := e.Waiting("etcd-join", "this node's etcd member to be added, started and promoted to voter", s.Opts.Timeouts.EtcdAPICall)
	res, err := j.Run(ctx)
	waited()
	if res != nil {
		recordEtcdRepairs(e, s, res, "removed")
	}
	if err != nil {
		return err
	}
	s.EtcdMemberID = res.ID
	if j := s.Journal; j != nil {
		j.EtcdMemberID, j.EtcdPeerURL = res.ID, peerURL
	}
	if res.Added {
		e.Fx().API(fmt.Sprintf("add etcd member %x (%s) as a learner and promote it", res.ID, peerURL))
	}
	e.Logf("etcd-join", "etcd member %x (%s) votes", res.ID, s.Opts.NodeName)
	return nil
}

// journalMember is the etcd member the journal records for this node (zero: none).
func journalMember(s *State) uint64 {
	if s.Journal == nil {
		return 0
	}
	return s.Journal.EtcdMemberID
}

// recordEtcdRepairs reports the former member and the dead learners a join removed (or, in a
// dry run, would remove: action).
func recordEtcdRepairs(e *host.Env, s *State, res *etcd.Result, action string) {
	if m := res.Replaced; m != nil {
		e.Fx().API(fmt.Sprintf("remove etcd member %x (%s), the voter of the machine this node replaces", m.ID, m.Name))
		s.Repairs = append(s.Repairs, Repair{Kind: "etcd-member", Name: m.Name, ID: fmt.Sprintf("%x", m.ID), Action: action,
			Detail: fmt.Sprintf("the voter of the machine this node replaces (%s, %s); this node joined as a new member", m.PeerURL, m.Kind())})
	}
	for _, m := range res.RemovedLearners {
		e.Fx().API(fmt.Sprintf("remove etcd learner %x (%s), left by a join that did not finish", m.ID, m.Name))
		s.Repairs = append(s.Repairs, Repair{Kind: "etcd-learner", Name: m.Name, ID: fmt.Sprintf("%x", m.ID), Action: action,
			Detail: fmt.Sprintf("a learner left by a join that did not finish (%s, %s)", m.PeerURL, m.Kind())})
	}
}

// claimEtcdDataDir creates the etcd data directory and reports whether the learner's data in
// it is this join's to remove on failure: only when this join (this run, or the interrupted
// run the journal records) found it absent or empty.
func claimEtcdDataDir(e *host.Env, s *State, dir string) (bool, error) {
	j := s.Journal
	owned := j != nil && j.EtcdDataDir == dir
	if !owned {
		empty, err := etcdDataDirEmpty(e, dir)
		if err != nil {
			return false, fmt.Errorf("read the etcd data directory %s: %w", dir, err)
		}
		owned = empty
		if empty && j != nil {
			j.EtcdDataDir = dir
			if err := j.Save(e); err != nil {
				return false, err
			}
		}
	}
	if err := e.Fx().MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("create the etcd data directory %s: %w", dir, err)
	}
	return owned, nil
}

// etcdLocalState reads this node's etcd member's own state from its metrics URL (nil: the
// member's metrics are not served over plain HTTP, or there is no HTTP client).
func etcdLocalState(e *host.Env, metricsURL string) func(context.Context) (etcd.LocalState, error) {
	if metricsURL == "" || e.HTTPClient == nil {
		return nil
	}
	c := e.HTTPClient(nil)
	read := etcd.MetricsState(c, metricsURL)
	return func(ctx context.Context) (etcd.LocalState, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return read(cctx)
	}
}

// restartEtcd stops this node's etcd (SIGTERM) so the kubelet starts it again: the one etcd
// process whose command line names this node and its peer URL, as the manifest does.
func restartEtcd(e *host.Env, node, peerURL string) error {
	if e.Processes == nil || e.Signal == nil {
		return errors.New("no access to the host's processes")
	}
	ps, err := e.Processes()
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, p := range ps {
		if len(p.Args) > 0 && path.Base(p.Args[0]) == "etcd" &&
			slices.Contains(p.Args, "--name="+node) && slices.Contains(p.Args, "--initial-advertise-peer-urls="+peerURL) {
			pids = append(pids, p.PID)
		}
	}
	if len(pids) != 1 {
		return fmt.Errorf("found %d etcd processes named %s with peer URL %s, want exactly 1", len(pids), node, peerURL)
	}
	return e.Signal(pids[0], syscall.SIGTERM)
}

// etcdHealth says, for an error message, which etcd members have a leader.
func etcdHealth(ctx context.Context, cli etcd.Conn, endpoints []string) string {
	var parts []string
	for _, ep := range endpoints {
		switch h := etcd.Probe(ctx, cli.Status, ep); {
		case h.Err != nil:
			parts = append(parts, ep+" unreachable")
		case h.Leader == 0:
			parts = append(parts, ep+" has no leader: quorum lost")
		default:
			parts = append(parts, fmt.Sprintf("%s has leader %x", ep, h.Leader))
		}
	}
	return strings.Join(parts, "; ")
}

// etcdEndpoints lists the client URLs the existing etcd pods advertise (kubeadm's annotation).
func etcdEndpoints(ctx context.Context, e *host.Env, s *State) ([]string, error) {
	var eps []string
	err := e.Poll(ctx, 500*time.Millisecond, s.Opts.Timeouts.KubernetesAPICall, func(ctx context.Context) (bool, error) {
		pods, err := s.AdminClient.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "component=etcd,tier=control-plane"})
		if err != nil {
			return false, nil
		}
		eps = nil
		for _, p := range pods.Items {
			if u := p.Annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"]; u != "" && p.Spec.NodeName != s.Opts.NodeName {
				eps = append(eps, u)
			}
		}
		return len(eps) > 0, nil
	})
	if err != nil {
		return nil, operr.Wrap(operr.Other, err, "found no etcd pods with kubeadm's advertise-client-urls annotation in kube-system", "check that the existing control planes run a stacked etcd")
	}
	return eps, nil
}

func etcdTLS(e *host.Env, s *State) (*tls.Config, error) {
	return host.EtcdClientTLS(e, s.Cluster.CertificatesDir)
}

// planEtcdRepairs is a dry run's look at etcd (read-only, with an admin identity and an etcd
// client certificate issued in memory from the downloaded CAs): the former member and the dead
// learners a real run would remove, as repairs, or the refusal a real run would meet.
func planEtcdRepairs(ctx context.Context, e *host.Env, s *State, peerURL string) error {
	cas := s.dryRunCAs
	if cas == nil || s.Cluster.Etcd.Local == nil {
		e.Fx().API("etcd's members not looked at: this dry run has no certificate key (or shared CAs on the node)")
		return nil
	}
	node := certs.Node{Name: s.Opts.NodeName, AdvertiseAddress: s.Opts.AdvertiseAddress, BindPort: s.Opts.BindPort}
	now := e.Clock.Now()
	kcs, err := certs.Kubeconfigs(s.Cluster, node, cas["ca"], now)
	if err != nil {
		return fmt.Errorf("dry run: admin kubeconfig: %w", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kcs["admin.conf"])
	if err != nil {
		return fmt.Errorf("dry run: admin kubeconfig: %w", err)
	}
	if s.AdminClient, err = e.Client(cfg); err != nil {
		return fmt.Errorf("dry run: admin client: %w", err)
	}
	key, err := pki.NewECKey()
	if err != nil {
		return err
	}
	hc, err := pki.NewSignedCert(pki.CertConfig{CommonName: "kube-etcd-healthcheck-client", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour)}, key.Public(), cas["etcd/ca"].Cert, cas["etcd/ca"].Key)
	if err != nil {
		return fmt.Errorf("dry run: etcd client certificate: %w", err)
	}
	pair := tls.Certificate{Certificate: [][]byte{hc.Raw}, PrivateKey: key}
	endpoints, err := etcdEndpoints(ctx, e, s)
	if err != nil {
		return err
	}
	cli, err := e.DialEtcd(endpoints, &tls.Config{RootCAs: pki.Pool([]*x509.Certificate{cas["etcd/ca"].Cert}), Certificates: []tls.Certificate{pair}})
	if err != nil {
		return operr.Wrap(operr.Other, err, "connect to etcd at "+strings.Join(endpoints, ","), "")
	}
	defer cli.Close()
	dataDir := path.Clean(s.Cluster.Etcd.Local.DataDir)
	fresh, err := etcdDataDirEmpty(e, dataDir)
	if err != nil {
		return fmt.Errorf("read the etcd data directory %s: %w", dataDir, err)
	}
	j := &etcd.Join{Cluster: cli, Name: s.Opts.NodeName, PeerURL: peerURL, Clock: e.Clock, Status: cli.Status, Peer: e.EtcdPeer,
		FreshData: fresh, OwnMember: journalMember(s), Replace: s.Opts.Replace, RemoveDeadLearners: s.Opts.RemoveDeadLearners,
		Logf: func(f string, a ...any) { e.Debugf("etcd-join", f, a...) }}
	res, err := j.Plan(ctx)
	if res != nil {
		recordEtcdRepairs(e, s, res, "would remove")
	}
	return err
}
