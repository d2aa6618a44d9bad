package phases

import (
	"context"
	"crypto"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"kjoin.dev/kjoin/certs"
	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
)

// PlannedWrite is a file a dry run would have written.
type PlannedWrite struct {
	Path string
	Mode os.FileMode
}

// State is what the phases read and write. Each phase's doc comment names its fields.
type State struct {
	Opts joinrequest.Options

	// Discovery.
	Discovery       *discovery.Result
	BootstrapClient kubernetes.Interface
	// BootstrapWatcher is BootstrapClient without its per-request timeout, for watches (the
	// CSR's): a watch lasts as long as the server is asked to keep it, not 10 s.
	BootstrapWatcher kubernetes.Interface
	// etcdJoinFollows: this run's options let etcd-join run (the runner sets it); with it a
	// stacked control plane's kubelet starts in etcd-join's turn (startKubelet, set by
	// kubelet-start), not before.
	etcdJoinFollows bool
	startKubelet    func(context.Context) error
	// KubeletServer is the API server kubelet.conf names (set when it is written).
	KubeletServer string
	// api is set when several endpoints were given: the addresses the join's clients fail
	// over between.
	api *apiHosts

	// Versions: the API server's and the local kubelet's (version-check).
	ClusterVersion string
	KubeletVersion string
	// probes are version-check's local questions, started by preflight (nil until then).
	probes *hostProbes
	// Runtime is what the container runtime says it is (version-check).
	Runtime *cri.Info

	// Cluster configuration fetched with the bootstrap identity.
	Cluster *clusterconfig.ClusterConfiguration

	// Control plane.
	AdminClient  kubernetes.Interface
	EtcdMemberID uint64
	// dryRunCAs are the cluster and etcd CAs a dry run holds in memory (control-plane-prepare).
	dryRunCAs map[string]*certs.CA
	// ControlPlanePods are the rendered, patched static pod manifests of kube-apiserver,
	// kube-controller-manager and kube-scheduler, by component name.
	ControlPlanePods map[string][]byte

	// TLS bootstrap.
	NodeKey        crypto.Signer
	CSRName        string
	ClientCertPath string

	// Wait.
	NodeClient      kubernetes.Interface
	RegisteredAfter time.Duration
	ReadyAfter      time.Duration
	Ready           bool
	LeaseFound      bool

	// Repairs: what the join removed or renewed of the node's earlier life (or would, in a
	// dry run). StaleNode is a NotReady Node of this name found before the TLS bootstrap.
	Repairs   []Repair
	StaleNode *corev1.Node

	// Journal is the on-node record of this (or an interrupted earlier) join.
	Journal *Journal
	// Own is true when this node's existing files belong to this same join (journal or a
	// node already joined to this cluster), so re-runs converge instead of failing preflight.
	Own bool

	Started time.Time
	Record
}

// Repair is one thing a join removed or renewed.
type Repair struct {
	Kind, Name, ID, Action, Detail string
}

// Record is what every workflow's state keeps of its run: the changes it made and its
// warnings.
type Record struct {
	Warnings []string
	// fx are the run's effects (set by the runner): the one record of what changed on the
	// node, and in a dry run of what would.
	fx host.Effects
}

// changeCount counts the changes made (planned, in a dry run) so far: a phase that made none
// reports "unchanged".
func (r *Record) changeCount() int {
	if r.fx == nil {
		return 0
	}
	return host.Changes(r.fx.Log())
}

// Changed reports whether anything on the host or in the cluster was changed (in a dry run,
// nothing was).
func (r *Record) Changed() bool {
	return r.fx != nil && !r.fx.Planning() && host.Changes(r.fx.Log()) > 0
}

// effects gives the run its effects (planned in a dry run; applied with before as the hook
// otherwise), unless the caller's environment brings its own (a test's recorder), and
// returns the environment the phases get.
func (r *Record) effects(e *host.Env, dryRun bool, before func(*host.Env) func(host.Effect) error) *host.Env {
	if e.Effects != nil {
		r.fx = e.Effects
		return e
	}
	run := *e
	switch {
	case r.fx != nil: // this state's run goes on (a phase run again on it)
		run.Effects = r.fx
	case dryRun:
		run.Effects = host.Plan()
	default:
		var hook func(host.Effect) error
		if before != nil {
			hook = before(&run)
		}
		run.Effects = host.Apply(&run, hook)
	}
	r.fx = run.Effects
	return &run
}

// PlannedWrites are the files a dry run would write (a symlink as mode 0777), in order.
func (s *State) PlannedWrites() []PlannedWrite {
	var out []PlannedWrite
	for _, f := range s.log() {
		switch f.Kind {
		case host.EffectWrite:
			out = append(out, PlannedWrite{Path: f.Path, Mode: f.Mode})
		case host.EffectSymlink:
			out = append(out, PlannedWrite{Path: f.Path, Mode: 0o777})
		}
	}
	return out
}

// PlannedActions are the cluster changes and service actions a dry run would make, in order.
func (s *State) PlannedActions() []string {
	var out []string
	for _, f := range s.log() {
		if f.Kind == host.EffectAPI || f.Kind == host.EffectService {
			out = append(out, f.String())
		}
	}
	return out
}

func (r *Record) log() []host.Effect {
	if r.fx == nil {
		return nil
	}
	return r.fx.Log()
}

// Warn records a warning (printed and reported in JSON).
func (r *Record) Warn(e *host.Env, phase, format string, args ...any) {
	e.Logf(phase, "WARNING: "+format, args...)
	r.Warnings = append(r.Warnings, "["+phase+"] "+sprintf(format, args...))
}

// journalFirst is the join's effect hook: a file (or symlink) is recorded in the journal, and
// the journal saved, before it is written, so an interrupted join's reset finds it.
func (s *State) journalFirst(e *host.Env) func(host.Effect) error {
	return func(f host.Effect) error {
		if s.Journal == nil || (f.Kind != host.EffectWrite && f.Kind != host.EffectSymlink) || s.Journal.Owns(f.Path) {
			return nil
		}
		s.Journal.Wrote(f.Path)
		if err := s.Journal.Save(e); err != nil {
			return fmt.Errorf("save journal: %w", err)
		}
		return nil
	}
}
