// Package joinrequest is what a join is asked to do: the resolved inputs (flags and a
// JoinConfiguration merged), kubeadm's timeouts and the checks on them that need no host.
// joinconfig fills it; the join's phases read it.
package joinrequest

import (
	"fmt"
	"net"
	"time"

	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/discovery"
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

// CheckAdvertiseAddress requires a global unicast or loopback IP, as kubeadm does.
func CheckAdvertiseAddress(s string) error {
	if ip := net.ParseIP(s); ip == nil || !(ip.IsGlobalUnicast() || ip.IsLoopback()) {
		return fmt.Errorf("%q is not a usable unicast IP address", s)
	}
	return nil
}
