package kubelet

import (
	"strings"
	"testing"

	"kjoin.dev/kjoin/clusterconfig"
)

const cluster = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\nmaxPods: 110\n"

func TestConfigAppliesPatchBeforeRuntime(t *testing.T) {
	patch := func(doc []byte) ([]byte, error) {
		if !strings.Contains(string(doc), "resolvConf: /run/systemd/resolve/resolv.conf") {
			t.Errorf("patch saw the document before the resolv.conf default:\n%s", doc)
		}
		return []byte(strings.Replace(string(doc), "maxPods: 110", "maxPods: 42\ncontainerRuntimeEndpoint: unix:///patched", 1)), nil
	}
	out, err := Config([]byte(cluster), "unix:///run/containerd/containerd.sock", true, patch)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"maxPods: 42", "containerRuntimeEndpoint: unix:///run/containerd/containerd.sock", "resolvConf: /run/systemd/resolve/resolv.conf", "cgroupDriver: systemd"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
}

func TestConfigRejectsOtherKinds(t *testing.T) {
	if _, err := Config([]byte("kind: Pod\n"), "unix:///x", false, nil); err == nil {
		t.Error("accepted a Pod as kubelet configuration")
	}
}

func TestFlagsEnvOverridesAndAppends(t *testing.T) {
	got := string(FlagsEnv([]clusterconfig.Arg{{Name: "register-with-taints", Value: "a=b:NoSchedule"}, {Name: "hostname-override", Value: "n1"}}, []clusterconfig.Arg{{Name: "hostname-override", Value: "n2"}, {Name: "node-ip", Value: "10.0.0.1"}}))
	want := `KUBELET_KUBEADM_ARGS="--hostname-override=n2 --node-ip=10.0.0.1 --register-with-taints=a=b:NoSchedule"` + "\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestJoinedByLabelMergesWithTheOperatorsNodeLabels(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []clusterconfig.Arg
		want  string
	}{
		{"alone", nil, `--node-labels=kjoin.dev/joined-by=kjoin`},
		{"beside other flags", []clusterconfig.Arg{{Name: "node-ip", Value: "10.0.0.1"}}, `--node-ip=10.0.0.1 --node-labels=kjoin.dev/joined-by=kjoin`},
		{"merged", []clusterconfig.Arg{{Name: "node-labels", Value: "tier=gpu"}}, `--node-labels=tier=gpu,kjoin.dev/joined-by=kjoin`},
		{"the operator's value wins", []clusterconfig.Arg{{Name: "node-labels", Value: "kjoin.dev/joined-by=ansible,tier=gpu"}}, `--node-labels=kjoin.dev/joined-by=ansible,tier=gpu`},
	} {
		extra := append([]clusterconfig.Arg{}, tc.extra...)
		env := FlagsEnv(nil, WithJoinedByLabel(extra))
		if got := string(env); got != `KUBELET_KUBEADM_ARGS="`+tc.want+`"`+"\n" {
			t.Errorf("%s: got %q, want %s", tc.name, got, tc.want)
		}
		if !HasJoinedByLabel(env) {
			t.Errorf("%s: HasJoinedByLabel(%q) = false", tc.name, env)
		}
		if len(tc.extra) > 0 && extra[0] != tc.extra[0] {
			t.Errorf("%s: the caller's arguments were modified: %v", tc.name, extra)
		}
	}
	if HasJoinedByLabel([]byte(`KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.1"` + "\n")) {
		t.Error("HasJoinedByLabel on kubeadm's flags")
	}
}
