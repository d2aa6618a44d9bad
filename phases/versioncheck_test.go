package phases

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
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
			var o joinrequest.Options
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
			for _, dir := range []string{host.KubernetesDir, host.KubeletDir, "/var/lib/kjoin"} {
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

// The runtime is asked what it is: no RuntimeConfig call is a warning naming the runtime (an
// error for a kubelet that requires it), a sandbox image other than this minor's kubeadm's is a
// warning naming both, and the answer is recorded for the JSON output.
func TestRuntimeCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, api string
		info      cri.Info
		err       error
		want      []string // in the warnings
		notWant   string
	}{
		{name: "containerd 1.6", api: "v1.37.2", info: cri.Info{Name: "containerd", Version: "1.6.20", SandboxImage: "registry.k8s.io/pause:3.10.2"},
			want: []string{"[ContainerRuntimeVersion]", "containerd 1.6.20", "RuntimeConfig", "v1.38"}, notWant: "sandbox image"},
		{name: "old sandbox image", api: "v1.37.2", info: cri.Info{Name: "containerd", Version: "v2.4.2", RuntimeConfig: true, SandboxImage: "registry.k8s.io/pause:3.8", SandboxImageFrom: "x"},
			want: []string{"[ContainerRuntimeVersion]", "registry.k8s.io/pause:3.8", "registry.k8s.io/pause:3.10.2"}, notWant: "RuntimeConfig"},
		{name: "v1.35's pause", api: "v1.35.4", info: cri.Info{Name: "containerd", Version: "v2.4.2", RuntimeConfig: true, SandboxImage: "registry.k8s.io/pause:3.10.2"},
			want: []string{"registry.k8s.io/pause:3.10.1"}},
		{name: "all good", api: "v1.36.3", info: cri.Info{Name: "containerd", Version: "v2.4.2", RuntimeConfig: true, SandboxImage: "registry.k8s.io/pause:3.10.2"},
			notWant: "ContainerRuntimeVersion"},
		{name: "no sandbox image reported", api: "v1.37.2", info: cri.Info{Name: "containerd", Version: "v2.4.2", RuntimeConfig: true},
			notWant: "ContainerRuntimeVersion"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newTestHost(t)
			h.client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: c.api}
			h.runner.kubeletVersion = c.api
			var asked string
			h.env.DescribeRuntime = func(_ context.Context, endpoint string) (cri.Info, error) { asked = endpoint; return c.info, nil }
			s := &State{Opts: h.options(t)}
			if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
				t.Fatal(err)
			}
			if asked != s.Opts.CRISocket || s.Runtime == nil || *s.Runtime != c.info {
				t.Errorf("asked %q (want %q), recorded %+v", asked, s.Opts.CRISocket, s.Runtime)
			}
			got := strings.Join(s.Warnings, "\n")
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("warnings %q lack %q", got, w)
				}
			}
			if c.notWant != "" && strings.Contains(got, c.notWant) {
				t.Errorf("warnings %q say %q", got, c.notWant)
			}
		})
	}
	// A runtime that cannot say what it is fails the check (exit 3), before anything is written.
	h := newTestHost(t)
	h.env.DescribeRuntime = func(context.Context, string) (cri.Info, error) { return cri.Info{}, errors.New("connection refused") }
	_, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "[ERROR ContainerRuntimeVersion]") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("got %v", err)
	}
	if h.env.Exists(host.KubernetesDir) {
		t.Errorf("the refused join wrote %s", host.KubernetesDir)
	}
	// A kubelet that requires RuntimeConfig makes its absence an error.
	err = nil
	s := &State{ClusterVersion: "v1.38.0", KubeletVersion: "v1.38.0", Opts: joinrequest.Options{CRISocket: "unix:///run/containerd/containerd.sock"}}
	e := &host.Env{DescribeRuntime: func(context.Context, string) (cri.Info, error) {
		return cri.Info{Name: "containerd", Version: "1.6.20"}, nil
	}}
	rt, _ := describeRuntime(context.Background(), e, s.Opts.CRISocket)
	if _, err = checkRuntime(e, s, rt); err == nil || !strings.Contains(err.Error(), "RuntimeConfig") {
		t.Errorf("a v1.38 kubelet on a runtime without RuntimeConfig: %v", err)
	}
}

// version-check's local questions start with preflight and run while discovery does: by the
// end of discovery kubelet --version has been asked, and the join asks it once.
func TestKubeletVersionIsAskedWhileDiscoveryRuns(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t)}
	asked := func() int {
		h.runner.mu.Lock()
		defer h.runner.mu.Unlock()
		n := 0
		for _, c := range h.runner.calls {
			if c == "kubelet --version" {
				n++
			}
		}
		return n
	}
	seenByDiscovery := false
	after := func(name string) {
		if name != "discovery" {
			return
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if asked() > 0 {
				seenByDiscovery = true
				return
			}
		}
	}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{AfterPhase: after}); err != nil {
		t.Fatal(err)
	}
	if !seenByDiscovery {
		t.Error("kubelet --version was not asked before version-check")
	}
	if n := asked(); n != 1 || s.KubeletVersion != "v1.37.2" {
		t.Errorf("kubelet --version asked %d times (want 1), version %q", n, s.KubeletVersion)
	}
}
