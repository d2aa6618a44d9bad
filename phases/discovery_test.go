package phases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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

// The bootstrap token's clients: one with a per-request timeout for calls, and one without
// for the CSR's watch (its timeout would end every watch after 10 s), both for the API
// server discovery verified, with the token and the pinned CA.
func TestDiscoveryMakesAWatcherWithoutTheRequestTimeout(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	var cfgs []*rest.Config
	next := h.env.NewClient
	h.env.NewClient = func(cfg *rest.Config) (kubernetes.Interface, error) {
		cfgs = append(cfgs, rest.CopyConfig(cfg))
		return next(cfg)
	}
	s := &State{Opts: h.options(t)}
	if err := runPhase(Discovery, h.env, s); err != nil {
		t.Fatal(err)
	}
	if s.BootstrapClient == nil || s.BootstrapWatcher == nil || len(cfgs) != 2 {
		t.Fatalf("client %v, watcher %v, %d clients made: want both, two", s.BootstrapClient, s.BootstrapWatcher, len(cfgs))
	}
	for i, want := range []time.Duration{10 * time.Second, 0} {
		c := cfgs[i]
		if c.Timeout != want || c.Host != s.Discovery.Server || c.BearerToken != h.options(t).TLSBootstrapToken.Full() || string(c.CAData) != string(s.Discovery.CAData) {
			t.Errorf("client %d: timeout %s host %s token set %v CA pinned %v; want timeout %s, the discovered server, the token and the CA",
				i, c.Timeout, c.Host, c.BearerToken != "", string(c.CAData) == string(s.Discovery.CAData), want)
		}
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
