// Package versions is kjoin's support window and the version rules that follow from it: which
// Kubernetes minors kjoin joins, the kubelet skew it accepts (kubeadm's rules), and what a
// given minor's kubeadm renders differently (the etcd image it defaults to, the
// controller-manager's flexvolume mount). It knows nothing of hosts or clients.
package versions

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// The support window: clusters at Kubernetes v1.MinMinor to v1.MaxMinor.
const (
	MinMinor = 35
	MaxMinor = 37
	// KubeletSkew is how many minors a kubelet may be older than the API server (kubeadm's
	// MinimumKubeletVersion, the Kubernetes skew policy).
	KubeletSkew = 3
)

// Window names the support window for messages ("v1.35-v1.37").
func Window() string { return fmt.Sprintf("v1.%d-v1.%d", MinMinor, MaxMinor) }

// Minor parses a Kubernetes version ("v1.36.3", "1.36.3", "v1.36.3-rc.0") and returns its minor.
func Minor(v string) (int, error) {
	pv, err := version.ParseGeneric(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%q is not a Kubernetes version: %w", v, err)
	}
	if pv.Major() != 1 {
		return 0, fmt.Errorf("%q is not a Kubernetes 1.x version", v)
	}
	return int(pv.Minor()), nil
}

// CheckCluster refuses a cluster outside the support window.
func CheckCluster(apiServer string) error {
	m, err := Minor(apiServer)
	if err != nil {
		return err
	}
	if m < MinMinor || m > MaxMinor {
		return fmt.Errorf("the cluster runs Kubernetes %s, outside kjoin's support window %s", apiServer, Window())
	}
	return nil
}

// CheckKubelet applies the kubelet skew rules: never newer than the API server, at most
// KubeletSkew minors older; for a control plane (kubeadm's rule) never newer than the
// cluster's kubernetesVersion either (controlPlaneVersion, "" for a worker).
func CheckKubelet(kubelet, apiServer, controlPlaneVersion string) error {
	k, err := Minor(kubelet)
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	a, err := Minor(apiServer)
	if err != nil {
		return fmt.Errorf("API server: %w", err)
	}
	switch {
	case k > a:
		return fmt.Errorf("the kubelet %s is newer than the API server %s: not a supported version skew", kubelet, apiServer)
	case k < a-KubeletSkew:
		return fmt.Errorf("the kubelet %s is more than %d minors older than the API server %s: not a supported version skew", kubelet, KubeletSkew, apiServer)
	}
	if controlPlaneVersion != "" {
		c, err := Minor(controlPlaneVersion)
		if err != nil {
			return fmt.Errorf("kubernetesVersion: %w", err)
		}
		if k > c {
			return fmt.Errorf("the kubelet %s is newer than the control plane version %s (kubeadm-config kubernetesVersion): not a supported version skew", kubelet, controlPlaneVersion)
		}
	}
	return nil
}

// clamp maps a minor outside the window to the nearest one inside it (what an ignored
// version check renders with).
func clamp(minor int) int { return max(MinMinor, min(MaxMinor, minor)) }

// etcdImageTags are the etcd images each minor's kubeadm defaults to (its constants'
// SupportedEtcdVersion for its own minor).
var etcdImageTags = map[int]string{35: "3.6.6-0", 36: "3.6.8-0", 37: "3.7.0-0"}

// EtcdImageTag is the etcd image tag the kubeadm of this cluster minor uses by default.
func EtcdImageTag(minor int) string { return etcdImageTags[clamp(minor)] }

// FlexVolumeMount reports whether this minor's kubeadm mounts the flexvolume plugin directory
// into the controller-manager (until v1.35).
func FlexVolumeMount(minor int) bool { return clamp(minor) <= 35 }

// pauseTags are the pause images each minor's kubeadm expects the runtime's sandbox image to be
// (its constants' PauseVersion).
var pauseTags = map[int]string{35: "3.10.1", 36: "3.10.2", 37: "3.10.2"}

// PauseImage is the sandbox image this minor's kubeadm expects (kubeadm's default registry;
// cri.SandboxMatches accepts the same tag from a mirror).
func PauseImage(minor int) string { return "registry.k8s.io/pause:" + pauseTags[clamp(minor)] }

// RuntimeConfigRequired is the first kubelet minor that requires the container runtime to
// implement the CRI RuntimeConfig call (it takes the cgroup driver from the runtime; KEP 4033).
const RuntimeConfigRequired = 38
