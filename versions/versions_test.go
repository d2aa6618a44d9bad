package versions

import (
	"strings"
	"testing"
)

func TestCheckCluster(t *testing.T) {
	for v, ok := range map[string]bool{"v1.35.4": true, "v1.36.3": true, "v1.37.2": true, "v1.34.4": false, "v1.38.0": false, "1.36.0-rc.1": true, "nonsense": false} {
		err := CheckCluster(v)
		if (err == nil) != ok {
			t.Errorf("CheckCluster(%s) = %v, want ok=%v", v, err, ok)
		}
		if err != nil && ok == false && !strings.Contains(err.Error(), v) {
			t.Errorf("%v does not name %s", err, v)
		}
	}
	if err := CheckCluster("v1.34.4"); err == nil || !strings.Contains(err.Error(), "v1.35-v1.37") {
		t.Errorf("the window is not named: %v", err)
	}
}

func TestCheckKubelet(t *testing.T) {
	for _, c := range []struct {
		kubelet, api, cp string
		ok               bool
		says             string
	}{
		{"v1.37.2", "v1.37.2", "", true, ""},
		{"v1.34.4", "v1.37.2", "", true, ""},
		{"v1.33.9", "v1.37.2", "", false, "more than 3 minors older"},
		{"v1.38.0", "v1.37.2", "", false, "newer than the API server"},
		{"v1.36.3", "v1.37.2", "v1.37.2", true, ""},
		{"v1.37.2", "v1.37.2", "v1.36.3", false, "newer than the control plane version"},
		{"Kubernetes v1.37.2", "v1.37.2", "", false, "kubelet"},
	} {
		err := CheckKubelet(c.kubelet, c.api, c.cp)
		if (err == nil) != c.ok || (err != nil && (!strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.kubelet))) {
			t.Errorf("CheckKubelet(%s, %s, %s) = %v", c.kubelet, c.api, c.cp, err)
		}
	}
}

func TestPerMinorRules(t *testing.T) {
	for m, tag := range map[int]string{34: "3.6.6-0", 35: "3.6.6-0", 36: "3.6.8-0", 37: "3.7.0-0", 38: "3.7.0-0"} {
		if got := EtcdImageTag(m); got != tag {
			t.Errorf("EtcdImageTag(%d) = %s, want %s", m, got, tag)
		}
	}
	if !FlexVolumeMount(35) || FlexVolumeMount(36) || FlexVolumeMount(37) {
		t.Error("flexvolume: only v1.35's kubeadm mounts it")
	}
}
