package diagnose

import (
	"slices"
	"testing"

	"kjoin.dev/kjoin/verify"
)

// The verdict walks the reporting path from the kubelet inward: the first failed check in
// this order names the cause. The order is the diagnosis; pin it.
func TestVerdictOrder(t *testing.T) {
	want := []string{
		"node.joined", "kubelet.crashloop", "kubelet.flags", "kubelet.service", "cert.validity", "cert.node", "api.config", "api.dns", "api.tcp", "api.tls", "api.clock", "api.auth",
		"cri.reachable", "cri.runtime", "cni.config", "cri.network", "kubelet.healthz",
		"res.nodefs", "res.imagefs", "res.memory", "res.pids", "node.pressure", "node.lease", "node.registered", "node.conditions",
	}
	var got []string
	for _, c := range causes {
		got = append(got, c.id)
	}
	if !slices.Equal(got, want) {
		t.Errorf("verdict order\n got %v\nwant %v", got, want)
	}
	// A kubelet between two restarts of a crash loop is not running because of its cause (an
	// expired certificate); one stopped by hand is not running, whatever else fails.
	exited := &diagnosis{status: map[string]verify.Status{"kubelet.service": verify.Fail, "cert.validity": verify.Fail}, kubeletExited: true}
	if v := exited.verdict(); v.CheckID != "cert.validity" {
		t.Errorf("a kubelet exiting on an expired certificate: verdict %s, want cert.validity", v.CheckID)
	}
	stopped := &diagnosis{status: map[string]verify.Status{"kubelet.service": verify.Fail, "cert.validity": verify.Fail}}
	if v := stopped.verdict(); v.CheckID != "kubelet.service" {
		t.Errorf("a kubelet stopped by hand: verdict %s, want kubelet.service", v.CheckID)
	}
	// Two failures at once: the earlier on the path wins.
	for _, pair := range [][2]string{{"kubelet.service", "kubelet.healthz"}, {"cert.validity", "api.auth"}, {"cri.reachable", "node.lease"}, {"api.tcp", "node.conditions"}} {
		g := &diagnosis{status: map[string]verify.Status{pair[0]: verify.Fail, pair[1]: verify.Fail}}
		if v := g.verdict(); v.CheckID != pair[0] {
			t.Errorf("%s and %s failed: verdict %s, want %s", pair[0], pair[1], v.CheckID, pair[0])
		}
	}
}
