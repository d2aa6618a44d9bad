package host

import (
	"os"
	"path/filepath"
	"testing"
)

// The endpoint is the one the kubelet would use: the flag, then config.yaml, then the
// instance config, then the default.
func TestRuntimeEndpoint(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"nothing", nil, DefaultRuntimeEndpoint},
		{"instance config", map[string]string{KubeletInstancePath: "containerRuntimeEndpoint: \"unix:///run/crio/crio.sock\"\n"}, "unix:///run/crio/crio.sock"},
		{"config over instance", map[string]string{
			KubeletInstancePath: "containerRuntimeEndpoint: unix:///run/crio/crio.sock\n",
			KubeletConfigPath:   "kind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///run/k3s/containerd.sock\n"}, "unix:///run/k3s/containerd.sock"},
		{"flag over all", map[string]string{
			KubeletConfigPath: "containerRuntimeEndpoint: unix:///run/k3s/containerd.sock\n",
			KubeletFlagsPath:  `KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.2 --container-runtime-endpoint=unix:///var/run/cri-dockerd.sock --pod-infra-container-image=x"` + "\n"}, "unix:///var/run/cri-dockerd.sock"},
		{"flags without it", map[string]string{
			KubeletConfigPath: "containerRuntimeEndpoint: unix:///run/k3s/containerd.sock\n",
			KubeletFlagsPath:  `KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.2"` + "\n"}, "unix:///run/k3s/containerd.sock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for p, body := range c.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := RuntimeEndpoint(&Env{Paths: Paths{Root: root}}); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
