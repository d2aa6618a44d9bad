package patches

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const apiserver = `apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
spec:
  containers:
  - name: kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.37.2
    resources:
      requests:
        cpu: 250m
  - name: sidecar
    image: busybox
`

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseName(t *testing.T) {
	cases := map[string][2]string{
		"etcd.yaml":                          {"etcd", Strategic},
		"kube-apiserver0+merge.yaml":         {"kube-apiserver", Merge},
		"kube-controller-manager+json.json":  {"kube-controller-manager", JSON},
		"kube-scheduler-extra+strategic.yml": {"kube-scheduler", Strategic},
		"kubeletconfiguration+merge.yaml":    {"kubeletconfiguration", Merge},
		"corednsdeployment.yaml":             {"corednsdeployment", Strategic},
	}
	for name, want := range cases {
		target, typ, err := ParseName(name)
		if err != nil || target != want[0] || typ != want[1] {
			t.Errorf("ParseName(%q) = %q, %q, %v; want %v", name, target, typ, err, want)
		}
	}
	for _, bad := range []string{"kube-proxy.yaml", "etcd+foo.yaml", "etcd.txt", "README", "etcd+merge+json.yaml", ".yaml"} {
		if _, _, err := ParseName(bad); err == nil {
			t.Errorf("ParseName(%q) accepted it", bad)
		}
	}
}

func TestStaticPodPatchesStrategicMergeJSON(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "kube-apiserver0.yaml", "spec:\n  containers:\n  - name: kube-apiserver\n    resources:\n      requests:\n        cpu: 500m\n")
	write(t, dir, "kube-apiserver1+merge.yaml", "metadata:\n  labels:\n    patched: \"yes\"\n")
	write(t, dir, "kube-apiserver2+json.yaml", `[{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}]`)
	write(t, dir, "etcd.yaml", "metadata:\n  labels:\n    etcd: \"patched\"\n")
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := set.Apply("kube-apiserver", []byte(apiserver))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"cpu: 500m", "name: sidecar", "patched: \"yes\"", "a: b"} {
		if !strings.Contains(s, want) {
			t.Errorf("patched manifest lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "etcd: patched") {
		t.Error("an etcd patch was applied to kube-apiserver")
	}
	// Strategic merge keeps the sidecar; a plain merge patch would have replaced the list.
	if strings.Count(s, "- image:")+strings.Count(s, "- name:") < 2 {
		t.Errorf("containers list lost an entry:\n%s", s)
	}
}

func TestNoPatchLeavesDocumentByteForByte(t *testing.T) {
	set, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	out, err := set.Apply("etcd", []byte("weird:   formatting\n"))
	if err != nil || string(out) != "weird:   formatting\n" {
		t.Errorf("got %q, %v", out, err)
	}
}

func TestUnknownFilesAreRefusedByName(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "kube-proxy.yaml", "a: 1\n")
	write(t, dir, "etcd+nope.yaml", "a: 1\n")
	write(t, dir, "etcd.yaml", "a: [\n")
	_, err := Load(dir)
	if err == nil {
		t.Fatal("unknown patch files were accepted")
	}
	for _, name := range []string{"kube-proxy.yaml", "etcd+nope.yaml", "etcd.yaml"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestInitOnlyTargetIsReported(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "corednsdeployment.yaml", "a: 1\n")
	set, err := Load(dir)
	if err != nil || len(set.Ignored) != 1 || len(set.Files) != 0 {
		t.Errorf("set %+v, %v; want corednsdeployment reported as ignored", set, err)
	}
}

func FuzzParseName(f *testing.F) {
	for _, s := range []string{"etcd.yaml", "kube-apiserver0+merge.yaml", "x+json.json", "+.yaml", "kube-scheduler++.yml", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		target, typ, err := ParseName(name)
		if err != nil {
			return
		}
		if !strings.HasPrefix(name, target) || (typ != Strategic && typ != Merge && typ != JSON) {
			t.Errorf("ParseName(%q) = %q, %q", name, target, typ)
		}
	})
}
