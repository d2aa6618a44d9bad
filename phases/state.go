package phases

import (
	"bytes"
	"crypto"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"kjoin.dev/kjoin/atomicfile"
	"kjoin.dev/kjoin/certs"
	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/token"
)

// Timeouts are kubeadm's JoinConfiguration timeouts (same defaults).
type Timeouts struct {
	Discovery         time.Duration
	KubernetesAPICall time.Duration
	TLSBootstrap      time.Duration
	KubeletHealth     time.Duration
	EtcdAPICall       time.Duration
	ControlPlane      time.Duration
}

// DefaultTimeouts returns kubeadm's defaults.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Discovery:         5 * time.Minute,
		KubernetesAPICall: time.Minute,
		TLSBootstrap:      5 * time.Minute,
		KubeletHealth:     4 * time.Minute,
		EtcdAPICall:       2 * time.Minute,
		ControlPlane:      4 * time.Minute,
	}
}

// Taint is a node taint as in nodeRegistration.taints.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Options are the resolved inputs of a join (flags and JoinConfiguration merged).
type Options struct {
	// Endpoint is the API server host:port for token discovery.
	Endpoint string
	// MoreEndpoints are further API servers of the same cluster: discovery and the join's
	// clients fail over to them when one is down (each must prove the pinned identity).
	MoreEndpoints []string
	// DiscoveryToken verifies cluster-info; TLSBootstrapToken authenticates the CSR.
	DiscoveryToken           *token.Token
	TLSBootstrapToken        *token.Token
	Pins                     discovery.Pins
	UnsafeSkipCAVerification bool
	// DiscoveryFile is a kubeconfig path or https URL (file discovery).
	DiscoveryFile string

	NodeName         string
	CRISocket        string
	Taints           []Taint
	TaintsSet        bool
	KubeletExtraArgs []clusterconfig.Arg
	IgnorePreflight  map[string]bool
	PatchesDir       string
	DryRun           bool
	Timeouts         Timeouts

	// Replace takes over the name of a NotReady Node (and, for a control plane, removes the
	// dead etcd member of the machine this one replaces): --replace.
	Replace bool
	// RemoveDeadLearners removes etcd learners left by joins that did not finish.
	RemoveDeadLearners bool

	ControlPlane     bool
	CertificateKey   string
	AdvertiseAddress string
	BindPort         int

	// Wait for registration (and report Ready); WaitReady requires Ready=True.
	// WaitKubeletOnly waits just for the kubelet's /healthz instead (--wait=kubelet).
	Wait             bool
	WaitKubeletOnly  bool
	WaitReady        bool
	WaitReadyTimeout time.Duration
	// ReadyGrace is how long to wait for Ready before reporting the blocking condition.
	ReadyGrace time.Duration
	// KubeletServingCertificates turns on the kubelet's serverTLSBootstrap: it asks the cluster
	// for a serving certificate (kubelet-serving signer), which kjoin's approver approves
	// for the Node's own names and addresses.
	KubeletServingCertificates bool
}

// PlannedWrite is a file a dry run would have written.
type PlannedWrite struct {
	Path string      `json:"path"`
	Mode os.FileMode `json:"mode"`
}

// State is what the phases read and write. Each phase's doc comment names its fields.
type State struct {
	Opts Options

	// Discovery.
	Discovery       *discovery.Result
	BootstrapClient kubernetes.Interface
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

	// Dry run.
	PlannedWrites []PlannedWrite
	PlannedAPI    []string

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
	// changes counts the changes made to the host or the cluster: the one record of change
	// (a phase that made none reports "unchanged").
	changes int
}

// MarkChanged records a change to the host or the cluster.
func (r *Record) MarkChanged() { r.changes++ }

// Changed reports whether anything on the host or in the cluster was changed.
func (r *Record) Changed() bool { return r.changes > 0 }

// Warn records a warning (printed and reported in JSON).
func (r *Record) Warn(e *host.Env, phase, format string, args ...any) {
	e.Logf(phase, "WARNING: "+format, args...)
	r.Warnings = append(r.Warnings, "["+phase+"] "+sprintf(format, args...))
}

// WriteFile writes a host file atomically (recording it in the journal), or records it in a
// dry run. A file that already has this content and mode is left alone, mtime included.
func (s *State) WriteFile(e *host.Env, hostPath string, data []byte, mode os.FileMode) error {
	if s.Opts.DryRun {
		s.PlannedWrites = append(s.PlannedWrites, PlannedWrite{Path: hostPath, Mode: mode})
		return nil
	}
	if st, err := os.Lstat(e.Paths.Of(hostPath)); err == nil && st.Mode().Perm() == mode.Perm() {
		if cur, err := os.ReadFile(e.Paths.Of(hostPath)); err == nil && bytes.Equal(cur, data) {
			return nil
		}
	}
	if s.Journal != nil {
		s.Journal.Wrote(hostPath)
		if err := s.Journal.Save(e); err != nil {
			return fmt.Errorf("save journal: %w", err)
		}
	}
	s.MarkChanged()
	return atomicfile.Write(e.Paths.Of(hostPath), data, mode, 0o755)
}
