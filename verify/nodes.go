package verify

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeInfo is one row of the node map.
type NodeInfo struct {
	Name           string    `json:"name"`
	Role           string    `json:"role"`
	Ready          string    `json:"ready"`
	LeaseAge       string    `json:"leaseAge"`
	InternalIP     string    `json:"internalIP"`
	Zone           string    `json:"zone,omitempty"`
	InstanceType   string    `json:"instanceType,omitempty"`
	KubeletVersion string    `json:"kubeletVersion"`
	Runtime        string    `json:"containerRuntime"`
	JoinedAt       time.Time `json:"joinedAt"`
	PodCIDR        string    `json:"podCIDR,omitempty"`
	Taints         []string  `json:"taints"`
}

// NodeMap lists the cluster's nodes with what an operator looks at first.
func NodeMap(ctx context.Context, c kubernetes.Interface, clk Clock) ([]NodeInfo, error) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	leases := map[string]time.Time{}
	if ls, err := c.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{}); err == nil {
		for _, l := range ls.Items {
			if l.Spec.RenewTime != nil {
				leases[l.Name] = l.Spec.RenewTime.Time
			}
		}
	}
	out := []NodeInfo{}
	for _, n := range nodes.Items {
		info := NodeInfo{Name: n.Name, Role: "worker", Ready: "Unknown", LeaseAge: "none", KubeletVersion: n.Status.NodeInfo.KubeletVersion,
			Runtime: n.Status.NodeInfo.ContainerRuntimeVersion, JoinedAt: n.CreationTimestamp.UTC(), PodCIDR: n.Spec.PodCIDR, Taints: []string{},
			Zone: n.Labels[corev1.LabelTopologyZone], InstanceType: n.Labels[corev1.LabelInstanceTypeStable]}
		if _, ok := n.Labels[labelControlPlane]; ok {
			info.Role = "control-plane"
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				info.Ready = string(cond.Status)
			}
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && info.InternalIP == "" {
				info.InternalIP = a.Address
			}
		}
		if t, ok := leases[n.Name]; ok {
			info.LeaseAge = clk.Since(t).Round(time.Second).String()
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
