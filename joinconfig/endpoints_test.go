package joinconfig

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSeveralEndpointsResolve(t *testing.T) {
	f := base()
	f.MoreEndpoints = []string{"10.0.0.2:6443", "[fd00::3]:6443"}
	res, err := resolve(t, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Options.Endpoint != "10.0.0.1:6443" || !slices.Equal(res.Options.MoreEndpoints, f.MoreEndpoints) {
		t.Errorf("endpoints %q %q, want the first and then the rest in order", res.Options.Endpoint, res.Options.MoreEndpoints)
	}
}

func TestSeveralEndpointsBadOnesAllNamed(t *testing.T) {
	f := base()
	f.MoreEndpoints = []string{"10.0.0.2", "10.0.0.3:6443", "fd00::4:6443"}
	_, err := resolve(t, f, nil)
	if err == nil {
		t.Fatal("bad endpoints accepted")
	}
	for _, want := range []string{`"10.0.0.2"`, `"fd00::4:6443"`, "in brackets"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `"10.0.0.3:6443"`) {
		t.Errorf("a good endpoint is named as bad:\n%v", err)
	}
}

func TestSeveralEndpointsNotWithDiscoveryFileOrConfig(t *testing.T) {
	f := base()
	f.Endpoint, f.Token, f.CACertHashes = "", "", nil
	f.MoreEndpoints = []string{"10.0.0.2:6443"}
	f.DiscoveryFile = writeFile(t, t.TempDir(), "d.conf", "x", 0o600)
	f.TLSBootstrapToken = goodToken
	if _, err := resolve(t, f, nil); err == nil || !strings.Contains(err.Error(), "either --discovery-file or API server endpoints") {
		t.Errorf("endpoints with --discovery-file: %v", err)
	}

	dir := t.TempDir()
	cfg := filepath.Join(dir, "join.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: "+goodToken+"\n    caCertHashes: ["+goodPin+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := Flags{ConfigPath: cfg, Endpoint: "10.0.0.1:6443", MoreEndpoints: []string{"10.0.0.2:6443"}, Output: "text", Wait: "true", WaitReadyTimeout: base().WaitReadyTimeout, BindPort: 6443}
	if _, err := resolve(t, g, nil); err == nil || !strings.Contains(err.Error(), "no endpoint arguments with --config") {
		t.Errorf("endpoints with --config: %v", err)
	}
	g.MoreEndpoints = nil
	if _, err := resolve(t, g, nil); err != nil {
		t.Errorf("one endpoint argument with --config (kubeadm allows it): %v", err)
	}
}
