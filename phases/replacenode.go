package phases

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/kubelet"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/tlsbootstrap"
)

// ReplaceNode handles a Node of this name left by an earlier machine (a reinstall): before
// the kubelet starts it says since when that Node is NotReady, when its Lease was last
// renewed and what the new kubelet would inherit from it (labels, taints, annotations that
// neither kubeadm nor kjoin sets, a cordon). With --replace it deletes the Lease and the Node
// (that very Node: a UID precondition), so the kubelet registers afresh with only what this
// join sets: the Lease with the node's own new credentials, the Node with them too on a
// worker (which needs tlsbootstrap.ReplaceSelf: the Node authorizer never lets a node delete
// its Node by itself) and with the admin credentials on a control plane. A Ready Node was
// refused by tls-bootstrap.
//
//	Reads:  s.StaleNode (tls-bootstrap), s.AdminClient (control planes), s.Opts (NodeName, Replace, DryRun, ControlPlane, Taints, KubeletExtraArgs), s.Discovery, s.BootstrapClient
//	Writes: s.NodeClient, s.Repairs, s.Warnings; deletes the Node and its Lease (--replace)
var ReplaceNode = Phase{
	Name: "replace-node", Short: "Report (and with --replace delete) a NotReady Node of this name",
	Needs: []string{"discovery"},
	Run:   runReplaceNode,
}

func runReplaceNode(ctx context.Context, e *host.Env, s *State) error {
	if s.StaleNode == nil {
		return nil // tls-bootstrap found no earlier Node of this name (or this node's own)
	}
	name := s.Opts.NodeName
	client := s.BootstrapClient // a dry run has no identity of its own: read what the token may
	if !s.Opts.DryRun {
		c, err := nodeClient(e, s)
		if err != nil {
			return err
		}
		client = c
	}
	node := s.StaleNode
	if n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
		node = n
	} else if apierrors.IsNotFound(err) {
		e.Logf("replace-node", "the earlier Node %q (uid %s) is gone already", name, s.StaleNode.UID)
		return nil
	}
	if isReady(node) {
		return operr.Newf(operr.Preflight, "the Node named %q became Ready during this join (uid %s): another machine runs under this name", name, node.UID).
			WithHint("stop that machine or join this one with another --node-name; then run kjoin reset here and join again")
	}
	var lease string
	if l, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil {
		lease = "its Lease was last renewed " + ago(e, l.Spec.RenewTime.Time)
	} else if err == nil || apierrors.IsNotFound(err) {
		lease = "it has no Lease"
	} else {
		lease = "its Lease could not be read (" + shortErr(err) + ")"
	}
	desc := fmt.Sprintf("a Node named %q exists (uid %s, created %s): %s; %s", name, node.UID, ago(e, node.CreationTimestamp.Time), notReadySince(e, node), lease)
	inherited := inheritedFrom(node, s.Opts)
	if !s.Opts.Replace {
		what := "nothing beyond what kubeadm and kjoin set"
		if len(inherited) > 0 {
			what = strings.Join(inherited, "; ")
		}
		s.Warn(e, "replace-node", "%s. This node takes it over (as kubeadm does) and inherits %s. If this machine replaces a gone one, run with --replace to register afresh", desc, what)
		return nil
	}
	detail := "NotReady: " + desc
	if len(inherited) > 0 {
		detail += "; not inherited: " + strings.Join(inherited, "; ")
	}
	if s.Opts.DryRun {
		e.Fx().API(fmt.Sprintf("delete the Lease kube-node-lease/%s and the Node %s (uid %s), so this node registers afresh", name, name, node.UID))
		s.Repairs = append(s.Repairs, Repair{Kind: "node", Name: name, ID: string(node.UID), Action: "would delete", Detail: detail})
		return nil
	}
	if err := client.CoordinationV1().Leases("kube-node-lease").Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return operr.Wrap(operr.Auth, err, fmt.Sprintf("could not delete the Lease kube-node-lease/%s of the earlier Node", name), "delete it on a control plane (kubectl -n kube-node-lease delete lease "+name+"), then run the same command again")
	}
	uid := node.UID
	deleter, with := client, "this node's new credentials"
	if s.AdminClient != nil {
		deleter, with = s.AdminClient, "the control plane's admin credentials"
	}
	err := deleter.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsForbidden(err) {
		return operr.Wrap(operr.Auth, err, fmt.Sprintf("could not delete the earlier Node %q (uid %s) with %s: a node may not delete its own Node unless the cluster allows it", name, uid, with),
			fmt.Sprintf("allow it once on a control plane (kjoin token create --allow-node-replace binds ClusterRole %s to system:nodes; NodeRestriction limits each node to its own Node), or delete the Node there (kubectl delete node %s); then run the same command again", tlsbootstrap.ReplaceSelf, name))
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return operr.Wrap(operr.Auth, err, fmt.Sprintf("could not delete the earlier Node %q (uid %s)", name, uid), "delete it on a control plane (kubectl delete node "+name+"), then run the same command again")
	}
	e.Fx().API(fmt.Sprintf("delete the Lease kube-node-lease/%s and the Node %s (uid %s), so this node registers afresh", name, name, uid))
	s.Repairs = append(s.Repairs, Repair{Kind: "node", Name: name, ID: string(uid), Action: "deleted", Detail: detail})
	e.Logf("replace-node", "deleted the earlier Node %q (uid %s) and its Lease: %s; this node registers afresh", name, uid, notReadySince(e, node))
	return nil
}

// isReady reports whether a Node's Ready condition is True.
func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// notReadySince says since when a Node is not Ready, and why, from its Ready condition.
func notReadySince(e *host.Env, n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		s := fmt.Sprintf("NotReady (Ready=%s) since %s", c.Status, ago(e, c.LastTransitionTime.Time))
		if c.Reason != "" {
			s += " (" + c.Reason + ")"
		}
		return s
	}
	return "never Ready (no Ready condition)"
}

func ago(e *host.Env, t time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), e.Clock.Since(t).Round(time.Second))
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// Labels, annotations and taints the kubelet, the cluster's controllers, kubeadm and kjoin
// set on a Node of their own: a new kubelet would set them anyway, so inheriting them says
// nothing. Everything else on an earlier Node came from someone else.
var (
	systemLabels = []string{"kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
		"beta.kubernetes.io/arch", "node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type",
		"topology.kubernetes.io/region", "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
		"failure-domain.beta.kubernetes.io/zone", kubelet.JoinedByLabel}
	controlPlaneLabels = []string{"node-role.kubernetes.io/control-plane", "node.kubernetes.io/exclude-from-external-load-balancers"}
	systemAnnotations  = []string{"kubeadm.alpha.kubernetes.io/cri-socket", "node.alpha.kubernetes.io/ttl",
		"volumes.kubernetes.io/controller-managed-attach-detach", "alpha.kubernetes.io/provided-node-ip", "csi.volume.kubernetes.io/nodeid"}
)

// inheritedFrom lists what a kubelet registering under an existing Node keeps of it that this
// join would not set: labels, taints, annotations and a cordon.
func inheritedFrom(n *corev1.Node, o joinrequest.Options) []string {
	mine := map[string]bool{}
	for _, a := range o.KubeletExtraArgs {
		if a.Name == "node-labels" {
			for _, kv := range strings.Split(a.Value, ",") {
				mine[strings.SplitN(kv, "=", 2)[0]] = true
			}
		}
	}
	var labels, annotations, taints []string
	for k, v := range n.Labels {
		if slices.Contains(systemLabels, k) || mine[k] || (o.ControlPlane && slices.Contains(controlPlaneLabels, k)) {
			continue
		}
		labels = append(labels, k+"="+v)
	}
	for k := range n.Annotations {
		if slices.Contains(systemAnnotations, k) {
			continue
		}
		annotations = append(annotations, k)
	}
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") || slices.ContainsFunc(o.Taints, func(m joinrequest.Taint) bool { return m.Key == t.Key && m.Effect == string(t.Effect) }) ||
			(o.ControlPlane && !o.TaintsSet && t.Key == "node-role.kubernetes.io/control-plane") {
			continue
		}
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		taints = append(taints, s+":"+string(t.Effect))
	}
	var out []string
	for _, part := range []struct {
		what string
		list []string
	}{{"labels", labels}, {"taints", taints}, {"annotations", annotations}} {
		if len(part.list) > 0 {
			sort.Strings(part.list)
			out = append(out, part.what+" "+strings.Join(part.list, ", "))
		}
	}
	if n.Spec.Unschedulable {
		out = append(out, "a cordon (spec.unschedulable)")
	}
	return out
}
