package verify

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kjoin.dev/kjoin/kubelet"
)

// NodeInfo is one row of the node map.
type NodeInfo struct {
	Name string
	Role string
	// Roles are the node-role.kubernetes.io/* labels (sorted; [] for none).
	Roles []string
	// Ready is the Ready condition's status (True, False, Unknown).
	Ready string
	// LeaseAge is how long ago the node's Lease was renewed (HasLease: it has one).
	LeaseAge time.Duration
	HasLease bool
	// InternalIPs are all of them (a dual-stack node has one per family).
	InternalIPs    []string
	Zone           string
	InstanceType   string
	KubeletVersion string
	Runtime        string
	OSImage        string
	KernelVersion  string
	JoinedAt       time.Time
	// JoinedBy is the tool the Node shows joined it: kjoin (its node label), kubeadm (no
	// kjoin label in a kubeadm-made cluster) or "" when the Node does not tell.
	JoinedBy string
	PodCIDR  string
	Taints   []string
}

// NoNodeError names the selected nodes that do not exist.
type NoNodeError struct {
	Names    []string
	Selector string
}

func (e *NoNodeError) Error() string {
	if e.Selector != "" {
		return fmt.Sprintf("no node %s matching %s", strings.Join(e.Names, ", "), e.Selector)
	}
	return "no node " + strings.Join(e.Names, ", ")
}

// Selection chooses nodes: by name (every one must exist) and by label selector (-l).
type Selection struct {
	Names    []string
	Selector string
}

// NodeMap lists the cluster's selected nodes with what an operator looks at first: control
// planes first, then by name.
func NodeMap(ctx context.Context, c kubernetes.Interface, clk Clock, sel Selection) ([]NodeInfo, error) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.Selector})
	if err != nil {
		return nil, err // the caller names the call (list nodes)
	}
	if len(sel.Names) > 0 {
		want := map[string]bool{}
		for _, n := range sel.Names {
			want[n] = true
		}
		kept := nodes.Items[:0]
		for _, n := range nodes.Items {
			if want[n.Name] {
				kept = append(kept, n)
				delete(want, n.Name)
			}
		}
		if len(want) > 0 {
			missing := make([]string, 0, len(want))
			for n := range want {
				missing = append(missing, n)
			}
			sort.Strings(missing)
			return nil, &NoNodeError{Names: missing, Selector: sel.Selector}
		}
		nodes.Items = kept
	}
	leases := map[string]time.Time{}
	if ls, err := c.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{}); err == nil {
		for _, l := range ls.Items {
			if l.Spec.RenewTime != nil {
				leases[l.Name] = l.Spec.RenewTime.Time
			}
		}
	}
	// Nothing on a Node marks kubeadm's joins: in a cluster kubeadm made (its kubeadm-config is
	// there), a Node without kjoin's label was joined by kubeadm (or by a kjoin before v0.5).
	// Asked once, and only when a Node lacks the label.
	var kubeadmCluster *bool
	isKubeadmCluster := func() bool {
		if kubeadmCluster == nil {
			_, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
			kubeadmCluster = ptr.To(err == nil)
		}
		return *kubeadmCluster
	}
	out := []NodeInfo{}
	for _, n := range nodes.Items {
		info := NodeInfo{Name: n.Name, Role: "worker", Ready: "Unknown", KubeletVersion: n.Status.NodeInfo.KubeletVersion,
			Runtime: n.Status.NodeInfo.ContainerRuntimeVersion, JoinedAt: n.CreationTimestamp.UTC(), PodCIDR: n.Spec.PodCIDR, Taints: []string{},
			Zone: n.Labels[corev1.LabelTopologyZone], InstanceType: n.Labels[corev1.LabelInstanceTypeStable],
			OSImage: n.Status.NodeInfo.OSImage, KernelVersion: n.Status.NodeInfo.KernelVersion, Roles: []string{}, InternalIPs: []string{}}
		for l := range n.Labels {
			if r, ok := strings.CutPrefix(l, "node-role.kubernetes.io/"); ok && r != "" {
				info.Roles = append(info.Roles, r)
			}
		}
		sort.Strings(info.Roles)
		switch {
		case n.Labels[kubelet.JoinedByLabel] != "":
			info.JoinedBy = n.Labels[kubelet.JoinedByLabel]
		case isKubeadmCluster():
			info.JoinedBy = "kubeadm"
		}
		if _, ok := n.Labels[labelControlPlane]; ok {
			info.Role = "control-plane"
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				info.Ready = string(cond.Status)
			}
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				info.InternalIPs = append(info.InternalIPs, a.Address)
			}
		}
		if t, ok := leases[n.Name]; ok {
			info.LeaseAge, info.HasLease = clk.Since(t), true
		}
		for _, t := range n.Spec.Taints {
			s := t.Key
			if t.Value != "" {
				s += "=" + t.Value
			}
			info.Taints = append(info.Taints, s+":"+string(t.Effect))
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role == "control-plane"
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
