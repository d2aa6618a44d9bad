package clusterconfig

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kjoin.dev/kjoin/operr"
)

// ConfigMap is where kubeadm keeps the ClusterConfiguration (namespace kube-system).
const ConfigMap = "kubeadm-config"

// ErrNotFound is wrapped by Fetch's error when the cluster has no kubeadm-config (not a
// kubeadm cluster, or one whose config was deleted).
var ErrNotFound = errors.New("kube-system/kubeadm-config not found")

// Fetch reads the cluster's ClusterConfiguration from kube-system/kubeadm-config. who names
// the identity for messages ("the bootstrap token", "the kubeconfig's user").
func Fetch(ctx context.Context, c kubernetes.Interface, who string) (*ClusterConfiguration, error) {
	cm, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, ConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, operr.Wrap(operr.Other, ErrNotFound, "the cluster has no kube-system/kubeadm-config ConfigMap", "kubeadm init creates it; re-run kubeadm init phase upload-config kubeadm")
	case apierrors.IsForbidden(err):
		return nil, operr.Wrap(operr.Auth, err, who+" may not read kube-system/kubeadm-config", "kubeadm grants joining nodes that with Role kubeadm:nodes-kubeadm-config; an admin kubeconfig always may")
	case apierrors.IsUnauthorized(err):
		return nil, operr.Wrap(operr.Auth, err, "the API server rejected the credentials of "+who, "")
	case err != nil:
		return nil, fmt.Errorf("read kube-system/kubeadm-config: %w", err)
	}
	cfg, err := Parse([]byte(cm.Data["ClusterConfiguration"]))
	if err != nil {
		return nil, operr.Wrap(operr.Other, err, "cannot read the cluster's ClusterConfiguration", "")
	}
	return cfg, nil
}

// RequireControlPlaneEndpoint refuses a cluster without a controlPlaneEndpoint: it cannot
// have a second control plane.
func (c *ClusterConfiguration) RequireControlPlaneEndpoint() error {
	if c.ControlPlaneEndpoint != "" {
		return nil
	}
	return operr.New(operr.Preflight, "the cluster has no controlPlaneEndpoint, so it cannot have a second control plane",
		"kubeadm clusters need a stable controlPlaneEndpoint (a DNS name or load balancer, shared by all API servers) set at kubeadm init to add control planes; nodes cannot fail over without one")
}
