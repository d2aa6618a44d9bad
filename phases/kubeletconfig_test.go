package phases

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/operr"
)

func TestKubeletConfigAppliesOnlyKubeletPatches(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	dir := t.TempDir()
	for name, body := range map[string]string{
		"kubeletconfiguration+merge.yaml": "maxPods: 42\n",
		"kube-apiserver.yaml":             "metadata:\n  labels: {x: y}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := h.options(t)
	o.PatchesDir = dir
	o.Taints, o.TaintsSet = []joinrequest.Taint{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}}, true
	s := &State{Opts: o, BootstrapClient: h.client}
	if err := runPhase(KubeletConfig, h.env, s); err != nil {
		t.Fatal(err)
	}
	cfg, _ := h.env.ReadFile(host.KubeletConfigPath)
	if !strings.Contains(string(cfg), "maxPods: 42") || strings.Contains(string(cfg), "labels") {
		t.Errorf("config.yaml:\n%s", cfg)
	}
	flags, _ := h.env.ReadFile(host.KubeletFlagsPath)
	if !strings.Contains(string(flags), "--register-with-taints=dedicated=gpu:NoSchedule") {
		t.Errorf("kubeadm-flags.env: %s", flags)
	}
}

// --kubelet-serving-certificates turns on serverTLSBootstrap, after the operator's patches (a
// patch saying otherwise loses); without it config.yaml holds the cluster's choice.
func TestKubeletConfigServingCertificates(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		h := newTestHost(t)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "kubeletconfiguration+merge.yaml"), []byte("serverTLSBootstrap: false\nmaxPods: 42\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		o := h.options(t)
		o.PatchesDir, o.KubeletServingCertificates = dir, on
		s := &State{Opts: o, BootstrapClient: h.client}
		if err := runPhase(KubeletConfig, h.env, s); err != nil {
			t.Fatal(err)
		}
		cfg, _ := h.env.ReadFile(host.KubeletConfigPath)
		if want := fmt.Sprintf("serverTLSBootstrap: %v", on); !strings.Contains(string(cfg), want) || !strings.Contains(string(cfg), "maxPods: 42") {
			t.Errorf("on=%v: config.yaml lacks %q:\n%s", on, want, cfg)
		}
	}
}

func TestKubeletConfigNeedsTheClustersConfigMap(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	_ = h.client.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "kubelet-config", metav1.DeleteOptions{})
	s := &State{Opts: h.options(t), BootstrapClient: h.client}
	err := runPhase(KubeletConfig, h.env, s)
	if operr.CodeOf(err) != operr.Other || !strings.Contains(err.Error(), "no kube-system/kubelet-config") || !strings.Contains(operr.HintOf(err), "upload-config kubelet") {
		t.Fatalf("got %v", err)
	}
	assertNothingWritten(t, h)
}

// A worker gets the kubelet's static-pod directory (staticPodPath) when it lacks one, as
// kubeadm's package makes it, so its kubelet does not log a missing config path every second;
// a dry run makes nothing.
func TestKubeletConfigMakesTheStaticPodDirectory(t *testing.T) {
	t.Parallel()
	for _, dry := range []bool{true, false} {
		h := newTestHost(t)
		_ = os.RemoveAll(h.env.Paths.Of(host.ManifestsDir))
		o := h.options(t)
		o.DryRun = dry
		s := &State{Opts: o, BootstrapClient: h.client}
		if err := runPhase(KubeletConfig, h.env, s); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(h.env.Paths.Of(host.ManifestsDir))
		if dry && err == nil {
			t.Error("a dry run made the static-pod directory")
		}
		if !dry && (err != nil || !st.IsDir() || st.Mode().Perm() != 0o755) {
			t.Errorf("no static-pod directory 0755 after kubelet-config: %v %v", st, err)
		}
	}
}

// A node whose kubelet configuration is already in place (another tool joined it without a
// static-pod directory) is left as it is: re-running kjoin there changes nothing.
func TestKubeletConfigLeavesAJoinedNodeAlone(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t), BootstrapClient: h.client}
	if err := runPhase(KubeletConfig, h.env, s); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(h.env.Paths.Of(host.ManifestsDir))
	again := &State{Opts: h.options(t), BootstrapClient: h.client}
	if err := runPhase(KubeletConfig, h.env, again); err != nil {
		t.Fatal(err)
	}
	if again.Changed() || h.env.Exists(host.ManifestsDir) {
		t.Errorf("the second run changed the node (changed %v, directory made %v)", again.Changed(), h.env.Exists(host.ManifestsDir))
	}
}

// kjoin's node label goes into the flags of a first join and stays in flags that carry it; a
// node whose flags another tool wrote (kubeadm, or an older kjoin) gets no label: its Node
// registered already, and the kubelet would not take the label now.
func TestKubeletConfigLabelsOnlyAFirstJoin(t *testing.T) {
	t.Parallel()
	kubeadms := `KUBELET_KUBEADM_ARGS=""` + "\n"
	for _, tc := range []struct {
		name, before, want string
	}{
		{"first join", "", `KUBELET_KUBEADM_ARGS="--node-labels=kjoin.dev/joined-by=kjoin"` + "\n"},
		{"flags kjoin wrote", `KUBELET_KUBEADM_ARGS="--node-labels=kjoin.dev/joined-by=kjoin"` + "\n", `KUBELET_KUBEADM_ARGS="--node-labels=kjoin.dev/joined-by=kjoin"` + "\n"},
		{"flags kubeadm wrote", kubeadms, kubeadms},
	} {
		h := newTestHost(t)
		p := filepath.Join(h.root, host.KubeletFlagsPath)
		if tc.before != "" {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s := &State{Opts: h.options(t), BootstrapClient: h.client}
		if err := runPhase(KubeletConfig, h.env, s); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		if string(got) != tc.want {
			t.Errorf("%s: kubeadm-flags.env %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The joined-by label costs the cluster nothing: a worker's whole join writes it only into the
// kubelet's flags (the kubelet sends it when it registers) and never patches or updates a Node.
func TestJoinedByLabelCostsNoRequest(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	flags, _ := h.env.ReadFile(host.KubeletFlagsPath)
	if !strings.Contains(string(flags), "--node-labels=kjoin.dev/joined-by=kjoin") {
		t.Errorf("kubeadm-flags.env lacks the label: %s", flags)
	}
	for _, a := range h.client.Actions() {
		// (the create is the fake kubelet's registration, played by the fake runner)
		if a.GetResource().Resource == "nodes" && (a.GetVerb() == "patch" || a.GetVerb() == "update") {
			t.Errorf("the join made %s on nodes", a.GetVerb())
		}
	}
}

// An enabled kubelet unit restarts the kubelet until config.yaml appears: config.yaml must be
// the last file the join writes for it, after the flags (the labels it registers with).
func TestKubeletConfigWritesConfigYAMLLast(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t), BootstrapClient: h.client, Journal: &Journal{Node: "w1"}}
	if err := runPhase(KubeletConfig, h.env, s); err != nil {
		t.Fatal(err)
	}
	files := s.Journal.Files
	last := -1
	for i, f := range files {
		if f == host.KubeletFlagsPath || f == host.KubeletInstancePath || f == host.KubeletConfigPath {
			last = i
		}
	}
	if last < 0 || files[last] != host.KubeletConfigPath || !slices.Contains(files, host.KubeletFlagsPath) {
		t.Errorf("the kubelet's files in the order written: %v; config.yaml must come last", files)
	}
}
