// Package kubelet renders the kubelet's files the way kubeadm does (config.yaml from the
// cluster's kubelet-config ConfigMap, instance-config.yaml, kubeadm-flags.env), so kubeadm
// upgrade and reset keep working on a node joined by kjoin. It renders bytes only: it writes
// no file and runs no command.
package kubelet

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/clusterconfig"
)

// Config renders /var/lib/kubelet/config.yaml in kubeadm's order: the cluster's
// KubeletConfiguration, the resolv.conf of systemd-resolved when that is active and none is
// set, the operator's patches (patch may be nil), then the node's container runtime endpoint
// (as kubeadm merges instance-config.yaml).
func Config(clusterConfig []byte, criSocket string, resolvedActive bool, patch func([]byte) ([]byte, error)) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(clusterConfig, &m); err != nil {
		return nil, fmt.Errorf("parse the cluster's KubeletConfiguration: %w", err)
	}
	if m == nil || m["kind"] != "KubeletConfiguration" {
		return nil, fmt.Errorf("the cluster's kubelet-config is not a KubeletConfiguration (kind %v)", m["kind"])
	}
	if resolvedActive {
		if _, set := m["resolvConf"]; !set {
			m["resolvConf"] = "/run/systemd/resolve/resolv.conf"
		}
	}
	if patch != nil {
		doc, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		if doc, err = patch(doc); err != nil {
			return nil, err
		}
		m = nil
		if err := yaml.Unmarshal(doc, &m); err != nil || m == nil {
			return nil, fmt.Errorf("the patched KubeletConfiguration does not parse: %v", err)
		}
	}
	m["containerRuntimeEndpoint"] = criSocket
	return yaml.Marshal(m)
}

// WithServingCertificates sets serverTLSBootstrap in a KubeletConfiguration document: the
// kubelet then asks the cluster for its serving certificate (kubelet-serving signer) instead
// of signing one itself.
func WithServingCertificates(doc []byte) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(doc, &m); err != nil || m == nil {
		return nil, fmt.Errorf("the KubeletConfiguration does not parse: %v", err)
	}
	m["serverTLSBootstrap"] = true
	return yaml.Marshal(m)
}

// InstanceConfig renders /var/lib/kubelet/instance-config.yaml, byte for byte as kubeadm.
func InstanceConfig(criSocket string) []byte {
	return fmt.Appendf(nil, "containerRuntimeEndpoint: %q\n", criSocket)
}

// FlagsEnv renders /var/lib/kubelet/kubeadm-flags.env: defaults with extra flags overriding
// or added, sorted by name, as kubeadm's ArgumentsToCommand.
func FlagsEnv(defaults, extra []clusterconfig.Arg) []byte {
	return fmt.Appendf(nil, "KUBELET_KUBEADM_ARGS=%q\n", strings.Join(clusterconfig.Command(defaults, extra), " "))
}

// JoinedByLabel is the label a kjoin-joined node registers with (value JoinedByValue), so
// `kjoin nodes` can tell which tool joined a node from the Node alone. It rides on the
// kubelet's --node-labels, which the kubelet applies when it registers the Node: it costs no
// API request, and NodeRestriction lets a kubelet set labels outside kubernetes.io.
const (
	JoinedByLabel = "kjoin.dev/joined-by"
	JoinedByValue = "kjoin"
)

// WithJoinedByLabel returns extra with kjoin's label added to --node-labels (merged into the
// operator's own node-labels; an operator's value for the same key wins).
func WithJoinedByLabel(extra []clusterconfig.Arg) []clusterconfig.Arg {
	label := JoinedByLabel + "=" + JoinedByValue
	out := append([]clusterconfig.Arg{}, extra...)
	for i, a := range out {
		if a.Name != "node-labels" {
			continue
		}
		for _, kv := range strings.Split(a.Value, ",") {
			if k, _, _ := strings.Cut(kv, "="); strings.TrimSpace(k) == JoinedByLabel {
				return out
			}
		}
		if strings.TrimSpace(a.Value) == "" {
			out[i].Value = label
		} else {
			out[i].Value = a.Value + "," + label
		}
		return out
	}
	return append(out, clusterconfig.Arg{Name: "node-labels", Value: label})
}

// HasJoinedByLabel reports whether a kubeadm-flags.env passes kjoin's label.
func HasJoinedByLabel(flagsEnv []byte) bool {
	return strings.Contains(string(flagsEnv), JoinedByLabel+"=")
}
