package phases

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kjoin.dev/kjoin/host"
)

// ResetMarkNode tells the cluster at once, with the node's own identity, that its kubelet
// stopped (Ready=Unknown), rather than after the node monitor's grace period: a Ready Node
// would block re-joining under the same name.
//
//	Reads:  s.Report (Node, NodeDeleted), s.kubeletStopping, s.Journal.Endpoint, s.Opts.DryRun; kubelet.conf
//	Writes: the Node's Ready condition
var ResetMarkNode = ResetPhase{
	Name: "mark-node", Short: "Mark the Node not ready", Run: runResetMarkNode,
	Skip: func(s *ResetState) string {
		r := s.Report
		switch {
		case r.NodeDeleted || (s.Opts.DryRun && s.Opts.DeleteNode):
			return "Node deleted"
		case r.Node == "":
			return "no node name known"
		case !s.kubeletStopping:
			return "the kubelet was not running"
		}
		return ""
	},
}

func runResetMarkNode(ctx context.Context, e *host.Env, s *ResetState) error {
	r := s.Report
	if !s.Opts.DryRun {
		if err := markNodeGone(ctx, e, r.Node, clusterServer(e, s.Journal)); err != nil {
			s.Warn(e, "mark-node", "could not mark Node %q not ready (%v); it turns NotReady after the node monitor grace period", r.Node, err)
			return nil
		}
	}
	s.Change(e, "mark-node", host.EffectAPI, "mark Node %q not ready (Ready=Unknown) with its own credentials", r.Node)
	return nil
}

// markNodeGone sets the Node's Ready condition to Unknown, as the node lifecycle controller
// would once the kubelet stops reporting.
func markNodeGone(ctx context.Context, e *host.Env, name, server string) error {
	c, err := kubeletConfClient(e, server)
	if err != nil {
		return err
	}
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.NewTime(e.Clock.Now())
	for i, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			node.Status.Conditions[i].Status = corev1.ConditionUnknown
			node.Status.Conditions[i].Reason = "KjoinReset"
			node.Status.Conditions[i].Message = "kjoin reset stopped this node's kubelet"
			node.Status.Conditions[i].LastTransitionTime = now
			node.Status.Conditions[i].LastHeartbeatTime = now
		}
	}
	_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// kubeletConfClient is a client with the node's own credentials (kubelet.conf), talking to server
// (empty: the one kubelet.conf names).
func kubeletConfClient(e *host.Env, server string) (kubernetes.Interface, error) {
	b, err := e.ReadFile(host.KubeletKubeconfig)
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.Load(b)
	if err != nil {
		return nil, err
	}
	kctx := kc.Contexts[kc.CurrentContext]
	if kctx == nil || kc.Clusters[kctx.Cluster] == nil || kc.AuthInfos[kctx.AuthInfo] == nil {
		return nil, fmt.Errorf("%s has no usable current context", host.KubeletKubeconfig)
	}
	cluster, auth := kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo]
	if server == "" {
		server = cluster.Server
	}
	cfg := &rest.Config{Host: server, Timeout: 10 * time.Second, TLSClientConfig: rest.TLSClientConfig{
		CAData: cluster.CertificateAuthorityData, CertFile: e.Paths.Of(auth.ClientCertificate), KeyFile: e.Paths.Of(auth.ClientKey),
		CertData: auth.ClientCertificateData, KeyData: auth.ClientKeyData,
	}}
	if auth.ClientCertificate == "" {
		cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = "", ""
	}
	return e.Client(cfg)
}

// clusterServer is the cluster's endpoint (a control plane's kubelet.conf points at its own,
// now stopped, API server): from the journal, else from admin.conf.
func clusterServer(e *host.Env, j *Journal) string {
	if j.Endpoint != "" {
		return j.Endpoint
	}
	if b, err := e.ReadFile(host.AdminKubeconfig); err == nil {
		if cfg, err := clientcmd.RESTConfigFromKubeConfig(b); err == nil {
			return cfg.Host
		}
	}
	return ""
}
