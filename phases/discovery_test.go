package phases

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kjoin.dev/kjoin/discovery/discoverytest"
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
	made := recordClients(h)
	s := &State{Opts: h.options(t)}
	if err := runPhase(Discovery, h.env, s); err != nil {
		t.Fatal(err)
	}
	cfgs := *made
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

// A discovery file's own credentials authenticate the join when no bootstrap token is given:
// a token, or a client certificate alone; a user with neither is refused before any request.
func TestDiscoveryFileCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		user *clientcmdapi.AuthInfo
		ok   bool
	}{
		{"token", &clientcmdapi.AuthInfo{Token: testToken}, true},
		{"client certificate", &clientcmdapi.AuthInfo{ClientCertificateData: []byte("CERT"), ClientKeyData: []byte("KEY")}, true},
		{"username only", &clientcmdapi.AuthInfo{Username: "bob"}, false},
		{"no user", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newTestHost(t)
			cfg := clientcmdapi.NewConfig()
			cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://cp.example:6443", CertificateAuthorityData: h.server.CAPEM}
			cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c"}
			if tc.user != nil {
				cfg.AuthInfos["u"] = tc.user
				cfg.Contexts["x"].AuthInfo = "u"
			}
			cfg.CurrentContext = "x"
			b, _ := clientcmd.Write(*cfg)
			p := filepath.Join(t.TempDir(), "discovery.conf")
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			rec := recordClients(h)
			o := h.options(t)
			o.DiscoveryFile, o.DiscoveryToken, o.TLSBootstrapToken = p, nil, nil
			err := runPhase(Discovery, h.env, &State{Opts: o})
			if !tc.ok {
				if operr.CodeOf(err) != operr.Usage || !strings.Contains(err.Error(), "no credentials") || len(*rec) != 0 {
					t.Fatalf("got %v after %d clients: want the usage error before any client", err, len(*rec))
				}
				return
			}
			if err != nil || len(*rec) != 2 {
				t.Fatalf("got %v, %d clients", err, len(*rec))
			}
			for _, c := range *rec {
				if c.BearerToken != tc.user.Token || string(c.CertData) != string(tc.user.ClientCertificateData) || string(c.KeyData) != string(tc.user.ClientKeyData) {
					t.Errorf("client authenticates with token set %v, cert %q: want the file's credentials", c.BearerToken != "", c.CertData)
				}
			}
		})
	}
}

// The wait line names every endpoint, whether the CA is pinned, and the token's ID only.
func TestDiscoveryAwaited(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	o := h.options(t)
	o.Endpoint = "cp.example:6443"
	if got, want := discoveryAwaited(o), "cluster-info from cp.example:6443, verified by the pinned CA and signed for token abcdef"; got != want {
		t.Errorf("pinned, one endpoint: %q, want %q", got, want)
	}
	o.Pins, o.MoreEndpoints = nil, []string{"cp2.example:6443", "cp3.example:6443"}
	if got, want := discoveryAwaited(o), "cluster-info from cp.example:6443 (or cp2.example:6443, cp3.example:6443), its CA NOT verified (unpinned) and signed for token abcdef"; got != want {
		t.Errorf("unpinned, three endpoints: %q, want %q", got, want)
	}
}

// With several endpoints: the failed ones are named (only they), the clients fail over across
// the endpoint that served, cluster-info's own server and the rest, in that order; with one
// endpoint the clients make no failover.
func TestDiscoveryFailsOverAcrossEndpoints(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	made := recordClients(h)
	o := h.options(t)
	down := discoverytest.DownEndpoint(t)
	o.Endpoint, o.MoreEndpoints = down, []string{h.server.Endpoint()}
	s := &State{Opts: o}
	if err := runPhase(Discovery, h.env, s); err != nil {
		t.Fatal(err)
	}
	out := h.out.String()
	if !strings.Contains(out, "API server "+down+": ") || strings.Contains(out, "API server "+h.server.Endpoint()+": ") {
		t.Errorf("log names the failed endpoint %s (want) or the one that served (must not):\n%s", down, out)
	}
	if s.api == nil || !slices.Equal(s.api.hosts, []string{h.server.Endpoint(), "cp.example:6443", down}) {
		t.Errorf("failover order %+v: want the endpoint that served, cluster-info's server, then the rest", s.api)
	}
	for i, c := range *made {
		if !failsOver(c, s.api) {
			t.Errorf("client %d does not fail over across the endpoints", i)
		}
	}

	one := newTestHost(t)
	made = recordClients(one)
	s = &State{Opts: one.options(t)}
	if err := runPhase(Discovery, one.env, s); err != nil {
		t.Fatal(err)
	}
	if s.api != nil || len(*made) != 2 || failsOver((*made)[0], nil) || failsOver((*made)[1], nil) {
		t.Errorf("one endpoint: api %+v; want no failover in its %d clients", s.api, len(*made))
	}
}

// recordClients keeps a copy of the config of every client the host makes.
func recordClients(h *testHost) *[]*rest.Config {
	var made []*rest.Config
	next := h.env.NewClient
	h.env.NewClient = func(c *rest.Config) (kubernetes.Interface, error) {
		made = append(made, rest.CopyConfig(c))
		return next(c)
	}
	return &made
}

// failsOver reports whether cfg's transport goes through a failover across api's addresses.
func failsOver(cfg *rest.Config, api *apiHosts) bool {
	if cfg.WrapTransport == nil {
		return false
	}
	rt := cfg.WrapTransport(http.DefaultTransport)
	for {
		switch w := rt.(type) {
		case *authRetry:
			rt = w.next
		case *failover:
			return w.api == api
		default:
			return false
		}
	}
}

func TestHostOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"https://cp.example:6443": "cp.example:6443", "https://[fd00::1]:6443": "[fd00::1]:6443", "://bad": ""} {
		if got := hostOf(in); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", in, got, want)
		}
	}
}
