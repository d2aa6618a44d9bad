package phases

import (
	"context"
	"fmt"
	"path"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/kubelet"
	"kjoin.dev/kjoin/operr"
)

// KubeletConfig writes the kubelet's configuration in kubeadm's layout: config.yaml from the
// cluster's kube-system/kubelet-config ConfigMap (read with the bootstrap identity),
// instance-config.yaml and kubeadm-flags.env.
//
//	Reads:  s.BootstrapClient, s.Opts (CRISocket, NodeName, ControlPlane, Taints, KubeletExtraArgs, PatchesDir,
//	        KubeletServingCertificates, Timeouts)
//	Writes: /var/lib/kubelet/{config.yaml,instance-config.yaml,kubeadm-flags.env} (with kjoin's
//	        node label, kubelet.JoinedByLabel, on a first join), and beside
//	        them the static-pod directory (staticPodPath, /etc/kubernetes/manifests) where it is missing
var KubeletConfig = Phase{Name: "kubelet-config", Short: "Write the kubelet configuration from the cluster's kubelet-config", Needs: []string{"discovery"}, Run: runKubeletConfig}

func runKubeletConfig(ctx context.Context, e *host.Env, s *State) error {
	var raw string
	err := e.PollFor(ctx, "kubelet-config", "the cluster's kube-system/kubelet-config", 250*time.Millisecond, s.Opts.Timeouts.KubernetesAPICall, func(ctx context.Context) (bool, error) {
		cm, err := s.BootstrapClient.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubelet-config", metav1.GetOptions{})
		switch {
		case err == nil:
			raw = cm.Data["kubelet"]
			return true, nil
		case apierrors.IsNotFound(err):
			return false, operr.New(operr.Other, "the cluster has no kube-system/kubelet-config ConfigMap", "kubeadm init creates it (phase upload-config kubelet); re-run that phase on a control plane")
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return false, operr.Wrap(operr.Auth, err, "the bootstrap token may not read kube-system/kubelet-config", "kubeadm grants it with Role/RoleBinding kubeadm:kubelet-config; re-run kubeadm init phase upload-config kubelet")
		}
		e.Debugf("kubelet-config", "reading kubelet-config: %v (retrying)", err)
		return false, nil
	})
	if err != nil {
		if _, ok := operr.As(err); ok {
			return err
		}
		return operr.Wrap(operr.Timeout, err, "could not read kube-system/kubelet-config", "check that the API server is reachable")
	}
	if raw == "" {
		return operr.New(operr.Other, "kube-system/kubelet-config has no \"kubelet\" key", "re-run kubeadm init phase upload-config kubelet on a control plane")
	}
	set, err := loadPatches(s)
	if err != nil {
		return err
	}
	_, resolvedErr := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "systemd-resolved")
	cfg, err := kubelet.Config([]byte(raw), s.Opts.CRISocket, resolvedErr == nil, func(doc []byte) ([]byte, error) {
		doc, err := set.Apply("kubeletconfiguration", doc)
		if err != nil || !s.Opts.KubeletServingCertificates {
			return doc, err
		}
		return kubelet.WithServingCertificates(doc)
	})
	if err != nil {
		return operr.Wrap(operr.Other, err, "cannot render the kubelet configuration", "")
	}

	var defaults []clusterconfig.Arg
	if !s.Opts.ControlPlane && len(s.Opts.Taints) > 0 {
		var ts string
		for i, t := range s.Opts.Taints {
			if i > 0 {
				ts += ","
			}
			ts += t.Key
			if t.Value != "" {
				ts += "=" + t.Value
			}
			ts += ":" + t.Effect
		}
		defaults = append(defaults, clusterconfig.Arg{Name: "register-with-taints", Value: ts})
	}
	if h, err := e.Hostname(); err == nil && h != s.Opts.NodeName {
		defaults = append(defaults, clusterconfig.Arg{Name: "hostname-override", Value: s.Opts.NodeName})
	}
	extra := s.Opts.KubeletExtraArgs
	// kjoin's label rides on the Node's first registration only: a flags file already here
	// without it (kubeadm's, or an older kjoin's) belongs to a Node that registered, whose
	// labels the kubelet does not change again; rewriting it would restart the kubelet for
	// nothing.
	if old, err := e.ReadFile(host.KubeletFlagsPath); err != nil || kubelet.HasJoinedByLabel(old) {
		extra = kubelet.WithJoinedByLabel(extra)
	}
	// config.yaml last: an enabled kubelet unit restarts the kubelet every few seconds until
	// a join configures it (the kubelet package's), and config.yaml is what lets it start, so
	// it starts with its flags (the node labels it registers with) already in place.
	files := []struct {
		path string
		data []byte
	}{
		{host.KubeletFlagsPath, kubelet.FlagsEnv(defaults, extra)},
		{host.KubeletInstancePath, kubelet.InstanceConfig(s.Opts.CRISocket)},
		{host.KubeletConfigPath, cfg},
	}
	before := s.changeCount()
	for _, f := range files {
		if f.path == host.KubeletConfigPath && sameYAML(e, f.path, f.data) {
			continue // e.g. written by kubeadm with other formatting: same settings, leave it
		}
		if err := e.Fx().WriteFile(f.path, f.data, 0o644); err != nil {
			return fmt.Errorf("write kubelet configuration: %w", err)
		}
	}
	// Only beside a configuration this run wrote: a node another tool joined and left without
	// the directory stays as it was (re-running kjoin there changes nothing).
	if s.changeCount() > before {
		if err := staticPodDir(e, s, cfg); err != nil {
			return err
		}
	}
	switch {
	case s.Opts.DryRun:
		e.Logf("kubelet-config", "would write %s from the cluster's kubelet-config, %s and %s", host.KubeletConfigPath, host.KubeletInstancePath, host.KubeletFlagsPath)
	case s.changeCount() == before:
		e.Logf("kubelet-config", "%s, %s and %s already hold this configuration", host.KubeletConfigPath, host.KubeletInstancePath, host.KubeletFlagsPath)
	default:
		e.Logf("kubelet-config", "wrote %s from the cluster's kubelet-config, %s and %s", host.KubeletConfigPath, host.KubeletInstancePath, host.KubeletFlagsPath)
	}
	return nil
}

// staticPodDir makes the kubelet's static-pod directory (staticPodPath, kubeadm's
// /etc/kubernetes/manifests) where it is missing, as kubeadm's package does on every node:
// without it a worker's kubelet logs "Unable to read config path" every second. It is a
// directory the node's packages own, so reset leaves it (as kubeadm reset does).
func staticPodDir(e *host.Env, s *State, kubeletConfig []byte) error {
	var c struct {
		StaticPodPath string `json:"staticPodPath"`
	}
	_ = yaml.Unmarshal(kubeletConfig, &c) // kubelet.Config rendered it from parsed YAML
	dir := c.StaticPodPath
	if dir == "" || !path.IsAbs(dir) {
		return nil // no static pods configured: nothing to make
	}
	if err := e.Fx().MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create the kubelet's static-pod directory %s: %w", dir, err)
	}
	return nil
}

// sameYAML reports whether the host file holds the same YAML settings as data.
func sameYAML(e *host.Env, hostPath string, data []byte) bool {
	cur, err := e.ReadFile(hostPath)
	if err != nil {
		return false
	}
	var a, b any
	if yaml.Unmarshal(cur, &a) != nil || yaml.Unmarshal(data, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}
