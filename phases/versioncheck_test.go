package phases

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"

	"kjoin.dev/kjoin/operr"
)

// The support window and the kubelet skew are enforced before anything is written: a cluster
// outside v1.35-v1.37, a kubelet newer than the API server or more than three minors older,
// a control plane whose kubelet is newer than kubeadm-config's kubernetesVersion.
func TestVersionPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, api, kubelet string
		controlPlane       bool
		cpVersion          string
		says               []string
	}{
		{name: "cluster too old", api: "v1.34.4", kubelet: "v1.34.4", says: []string{"[ERROR KubernetesVersion]", "v1.34.4", "v1.35-v1.37"}},
		{name: "cluster too new", api: "v1.38.0", kubelet: "v1.37.2", says: []string{"[ERROR KubernetesVersion]", "v1.38.0"}},
		{name: "kubelet newer than the API server", api: "v1.36.3", kubelet: "v1.37.2", says: []string{"[ERROR KubeletVersion]", "v1.37.2", "v1.36.3", "newer"}},
		{name: "kubelet four minors older", api: "v1.37.2", kubelet: "v1.33.7", says: []string{"[ERROR KubeletVersion]", "v1.33.7", "v1.37.2", "older"}},
		{name: "control plane kubelet newer than kubernetesVersion", api: "v1.37.2", kubelet: "v1.37.2", controlPlane: true, cpVersion: "v1.36.3",
			says: []string{"[ERROR KubeletVersion]", "kubernetesVersion", "v1.36.3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var h *testHost
			var o Options
			if c.controlPlane {
				cp := newCPHost(t)
				h = cp.testHost
				editClusterConfiguration(t, cp, "kubernetesVersion: v1.37.2", "kubernetesVersion: "+c.cpVersion)
				o = cp.options(t)
			} else {
				h = newTestHost(t)
				o = h.options(t)
			}
			h.client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: c.api}
			h.runner.kubeletVersion = c.kubelet
			_, err := Run(context.Background(), h.env, &State{Opts: o}, Join, RunOptions{})
			if operr.CodeOf(err) != operr.Preflight {
				t.Fatalf("got %v, want exit 3", err)
			}
			for _, w := range c.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not say %q", err, w)
				}
			}
			for _, dir := range []string{KubernetesDir, KubeletDir, "/var/lib/kjoin"} {
				if h.env.Exists(dir) {
					t.Errorf("the refused join wrote %s", dir)
				}
			}
		})
	}
	// Three minors older joins (the skew kubeadm allows), and the checks can be ignored.
	h := newTestHost(t)
	h.runner.kubeletVersion = "v1.34.4"
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Errorf("a v1.34 kubelet on a v1.37 cluster: %v", err)
	}
	h = newTestHost(t)
	h.runner.kubeletVersion = "v1.38.0"
	o := h.options(t)
	o.IgnorePreflight = map[string]bool{"kubeletversion": true}
	s := &State{Opts: o}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil || !strings.Contains(strings.Join(s.Warnings, "\n"), "[KubeletVersion]") {
		t.Errorf("ignored KubeletVersion: %v, warnings %v", err, s.Warnings)
	}
}
