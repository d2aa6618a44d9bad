package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kjoin.dev/kjoin/clusterconfig"
)

const cluster = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\nmaxPods: 110\n"

func TestConfigMergesRuntimeAndPatches(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubeletconfiguration+merge.yaml"), []byte("maxPods: 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeletconfiguration1+json.yaml"), []byte(`[{"op":"add","path":"/serializeImagePulls","value":false}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd+merge.yaml"), []byte("x: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	patches, err := Patches(dir, "kubeletconfiguration")
	if err != nil || len(patches) != 2 {
		t.Fatalf("patches %d, %v", len(patches), err)
	}
	out, err := Config([]byte(cluster), "unix:///run/containerd/containerd.sock", true, patches)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"maxPods: 42", "serializeImagePulls: false", "containerRuntimeEndpoint: unix:///run/containerd/containerd.sock", "resolvConf: /run/systemd/resolve/resolv.conf", "cgroupDriver: systemd"} {
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
