package host

import (
	"strings"

	"sigs.k8s.io/yaml"
)

// DefaultRuntimeEndpoint is the runtime a node uses when nothing names one (kubeadm's first
// choice, and the kubelet's default).
const DefaultRuntimeEndpoint = "unix:///run/containerd/containerd.sock"

// RuntimeEndpoint is the CRI endpoint this node's kubelet uses, as the kubelet would take it:
// --container-runtime-endpoint in kubeadm-flags.env, else containerRuntimeEndpoint in
// config.yaml, else in instance-config.yaml, else the default.
func RuntimeEndpoint(e *Env) string {
	if b, err := e.ReadFile(KubeletFlagsPath); err == nil {
		for _, f := range strings.Fields(strings.NewReplacer(`"`, " ", "'", " ").Replace(string(b))) {
			if v, ok := strings.CutPrefix(f, "--container-runtime-endpoint="); ok && v != "" {
				return v
			}
		}
	}
	for _, p := range []string{KubeletConfigPath, KubeletInstancePath} {
		var cfg struct {
			ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint"`
		}
		if b, err := e.ReadFile(p); err == nil && yaml.Unmarshal(b, &cfg) == nil && cfg.ContainerRuntimeEndpoint != "" {
			return cfg.ContainerRuntimeEndpoint
		}
	}
	return DefaultRuntimeEndpoint
}
