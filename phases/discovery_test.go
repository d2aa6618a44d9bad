package phases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kjoin.dev/kjoin/operr"
)

func TestDiscoveryByTokenRecordsTheCluster(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t), Journal: &Journal{}}
	if err := runPhase(Discovery, h.env, s); err != nil {
		t.Fatal(err)
	}
	if s.BootstrapClient == nil || s.Discovery.CAPin != h.server.Pin || s.Journal.CAPin != h.server.Pin || s.Journal.Endpoint != "https://cp.example:6443" {
		t.Errorf("discovery %+v journal %+v", s.Discovery, s.Journal)
	}
	if h.server.CredentialSeen.Load() {
		t.Error("discovery sent a credential")
	}
}

func TestDiscoveryFileWithoutCredentials(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://cp.example:6443", CertificateAuthorityData: h.server.CAPEM}
	b, _ := clientcmd.Write(*cfg)
	p := filepath.Join(t.TempDir(), "discovery.conf")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	o := h.options(t)
	o.DiscoveryFile, o.DiscoveryToken, o.TLSBootstrapToken = p, nil, nil
	err := runPhase(Discovery, h.env, &State{Opts: o})
	if operr.CodeOf(err) != operr.Usage || !strings.Contains(err.Error(), "no credentials") {
		t.Fatalf("got %v", err)
	}
}
