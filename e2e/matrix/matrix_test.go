package matrix

import (
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	out := Render([]Result{
		{Cell: "v1.36.3", KubeadmVersion: "v1.36.3", APIServer: "v1.36.3", EtcdImage: "registry.k8s.io/etcd:3.6.8-0", EtcdVersion: "3.6.8", Pass: true},
		{Cell: "v1.37.2:kubelet-v1.33.0", Failures: []string{"worker join: exit 3 | skew"}},
	}, "make matrix")
	for _, want := range []string{"| `v1.36.3` | pass | v1.36.3 / v1.36.3 |", "etcd:3.6.8-0 (3.6.8)", "| FAIL |", `exit 3 \| skew`, "1 of 2 cells pass."} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
