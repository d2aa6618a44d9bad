package phases

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// LeaveOptions configure kjoin leave: the drain (kubectl drain's options) and the credentials.
type LeaveOptions struct {
	// Kubeconfig holds the credentials leave uses: given, else admin.conf when the node has
	// one (a control plane), else the node's own kubelet.conf (NodeRestriction lets it cordon,
	// evict its own pods and delete its Lease, not delete its Node or CSRs).
	Kubeconfig string
	// DrainTimeout bounds the drain (0: no bound, as kubectl drain); GracePeriod is each pod's
	// termination grace in seconds (-1: the pod's own).
	DrainTimeout       time.Duration
	GracePeriod        int
	IgnoreDaemonSets   bool
	DeleteEmptyDirData bool
	// Force also deletes pods no controller manages (they are not recreated elsewhere).
	Force bool
	// DisableEviction deletes pods instead of evicting them: PodDisruptionBudgets are not
	// respected.
	DisableEviction bool
	// EvictRetry is the pause before an eviction a PodDisruptionBudget refused is asked again
	// (0: 5 s, as kubectl drain).
	EvictRetry time.Duration
}

// LeaveWorkflow takes a node out of the cluster gracefully, then undoes its join: the Node
// is cordoned and drained (PodDisruptionBudgets respected); a control plane stops its API
// server, controller-manager and scheduler, then removes its etcd member (quorum-checked)
// and stops etcd; the kubelet is stopped and its pods removed; then the Node, its Lease and
// its CSRs are deleted and the join's files removed. The cluster objects go after the
// kubelet stops: a running kubelet would recreate its Lease.
var LeaveWorkflow = []ResetPhase{LeaveCordon, LeaveDrain, LeaveStopControlPlane, ResetEtcdMember, ResetStaticPods, ResetApprover, ResetKubelet, ResetContainers, LeaveDeleteObjects, ResetFiles}

// leaveState is what only leave's phases read and write.
type leaveState struct {
	Opts LeaveOptions
	// client talks to the cluster as Credentials says (set by Leave before the phases run).
	client kubernetes.Interface
	// nodeGone: the Node is not in the cluster (nothing to cordon or drain).
	nodeGone bool
}

// LeaveReport is what leave adds to the reset's report.
type LeaveReport struct {
	// Credentials are whose credentials leave used: "admin (PATH)" or "node (PATH)".
	Credentials string
	Cordoned    bool
	// EvictedPods are the pods the drain evicted (or deleted), namespace/name.
	EvictedPods []string
	// EvictionRefusals counts the evictions the API server refused for a while (a
	// PodDisruptionBudget's 429) and the drain retried.
	EvictionRefusals int
	LeaseDeleted     bool
	// DeletedCSRs are the node's certificate signing requests leave deleted.
	DeletedCSRs []string
	// Left are the cluster objects leave could not remove, each with the command that does.
	Left []string
}

// Leave runs the leave workflow on this node (skipping the named phases): the same report as
// reset with leave's part filled. It is idempotent: a run after an interruption continues,
// and a run on a node that has left changes nothing.
func Leave(ctx context.Context, e *host.Env, ro ResetOptions, lo LeaveOptions, skip []string) (*ResetReport, error) {
	ro.DeleteNode = false // leave deletes the Node itself, after the kubelet stops
	return runReset(ctx, e, ro, skip, LeaveWorkflow, func(e *host.Env, rs *ResetState) error {
		rs.Report.Leave = &LeaveReport{EvictedPods: []string{}, DeletedCSRs: []string{}, Left: []string{}}
		rs.leave = &leaveState{Opts: lo}
		if rs.Report.Node == "" {
			return nil // nothing joined: the phases skip
		}
		c, who, err := leaveClient(e, lo.Kubeconfig, clusterServer(e, rs.Journal))
		if err != nil {
			return err
		}
		rs.leave.client, rs.Report.Leave.Credentials = c, who
		return nil
	})
}

// leaveClient picks leave's credentials: the given kubeconfig, else admin.conf, else the
// node's own kubelet.conf (pointed at the cluster endpoint: a control plane's names its own
// API server, which leave stops).
func leaveClient(e *host.Env, kubeconfig, server string) (kubernetes.Interface, string, error) {
	if kubeconfig == "" && e.Exists(host.AdminKubeconfig) {
		kubeconfig = host.AdminKubeconfig
	}
	if kubeconfig != "" {
		c, _, err := e.ClientFromKubeconfig(kubeconfig)
		if err != nil {
			return nil, "", operr.Wrap(operr.Usage, err, "cannot use the credentials in "+kubeconfig, "pass --kubeconfig with a kubeconfig that may drain and delete nodes")
		}
		return c, "admin (" + kubeconfig + ")", nil
	}
	c, err := kubeletConfClient(e, server)
	if err != nil {
		return nil, "", operr.Wrap(operr.Usage, err, "no credentials to leave with: this node has neither admin.conf nor a usable kubelet.conf",
			"pass --kubeconfig with a kubeconfig that may drain and delete nodes, or run kjoin reset to clean up this node only")
	}
	return nodePods{c}, "node (" + host.KubeletKubeconfig + ")", nil
}

// nodePods is a clientset with the node's own credentials whose pod reads answer "not found"
// where the Node authorizer says "forbidden": a node may read only the pods bound to it, so
// once an evicted pod is gone (or replaced under its name elsewhere) the drain's wait for it
// is refused, not told it is gone. For a pod that was bound to this node the two mean the
// same: it is no longer here.
type nodePods struct{ kubernetes.Interface }

func (c nodePods) CoreV1() corev1client.CoreV1Interface { return nodeCore{c.Interface.CoreV1()} }

type nodeCore struct{ corev1client.CoreV1Interface }

func (c nodeCore) Pods(namespace string) corev1client.PodInterface {
	return nodePodReads{c.CoreV1Interface.Pods(namespace)}
}

type nodePodReads struct{ corev1client.PodInterface }

func (p nodePodReads) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	pod, err := p.PodInterface.Get(ctx, name, opts)
	if apierrors.IsForbidden(err) {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return pod, err
}

// leaveSkip skips a leave phase when there is no Node to act on.
func leaveSkip(s *ResetState) string {
	if s.Report.Node == "" || s.leave == nil || s.leave.client == nil {
		return "no node name known"
	}
	return ""
}
