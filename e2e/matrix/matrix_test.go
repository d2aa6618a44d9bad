package matrix

import (
	"strings"
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	out := Render([]Result{
		{Cell: "v1.36.3:upgrade-v1.37.2", Command: "make matrix MATRIX_CELLS='v1.36.3:upgrade-v1.37.2'", Date: time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC),
			KubeadmVersion: "v1.36.3", APIServer: "v1.36.3", UpgradedTo: "v1.37.2", EtcdImage: "registry.k8s.io/etcd:3.6.8-0", EtcdVersion: "3.6.8", Pass: true},
		{Cell: "v1.37.2:kubelet-v1.33.0", Command: "make matrix", Failures: []string{"worker join: exit 3 | skew"}},
	})
	for _, want := range []string{"| `v1.36.3:upgrade-v1.37.2` | pass | v1.36.3 / v1.36.3 → v1.37.2 |", "etcd:3.6.8-0 (3.6.8)", "| 2026-12-01 |", "| FAIL |", `exit 3 \| skew`,
		"1 of 2 cells pass.", "`make matrix MATRIX_CELLS='v1.36.3:upgrade-v1.37.2'`, `make matrix`"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// A run of some cells replaces exactly those rows and appends new cells; the others stay.
func TestMerge(t *testing.T) {
	old := []Result{{Cell: "a", Pass: true}, {Cell: "b", Pass: false}, {Cell: "c", Pass: true}}
	got := Merge(old, []Result{{Cell: "b", Pass: true}, {Cell: "d", Pass: true}})
	var cells []string
	for _, r := range got {
		cells = append(cells, r.Cell)
		if !r.Pass {
			t.Errorf("%s: the old row stayed", r.Cell)
		}
	}
	if strings.Join(cells, ",") != "a,b,c,d" {
		t.Errorf("cells %v", cells)
	}
	if old[1].Pass {
		t.Error("Merge changed its input")
	}
}
