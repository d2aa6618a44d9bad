package phases

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kjoin.dev/kjoin/discovery/discoverytest"
	"kjoin.dev/kjoin/host"
)

type apiServer struct {
	*httptest.Server
	hits   atomic.Int32
	bodies chan string
}

func newAPIServer(t *testing.T) *apiServer {
	s := &apiServer{bodies: make(chan string, 8)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		s.bodies <- string(b)
		_, _ = io.WriteString(w, "served by "+r.Host)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) addr() string { return strings.TrimPrefix(s.URL, "http://") }

func TestFailoverMovesPastADownServerAndStays(t *testing.T) {
	down, up := discoverytest.DownEndpoint(t), newAPIServer(t)
	var logs []string
	api := newAPIHosts([]string{down, up.addr(), down}, func(f string, a ...any) { logs = append(logs, f) })
	if len(api.hosts) != 2 {
		t.Fatalf("hosts %v: a repeated address is listed once", api.hosts)
	}
	c := &http.Client{Transport: &failover{next: http.DefaultTransport.(*http.Transport).Clone(), api: api}}
	// A POST whose first connection was never made is sent whole to the next server.
	resp, err := c.Post("http://"+down+"/apis/certificates.k8s.io/v1/certificatesigningrequests", "application/json", strings.NewReader(`{"csr":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "served by "+up.addr() || <-up.bodies != `{"csr":1}` {
		t.Errorf("answer %q: want the second server, with the whole body", b)
	}
	if api.current() != up.addr() {
		t.Errorf("current %q, want %q", api.current(), up.addr())
	}
	// The next request goes straight to the server that answered: no dial of the down one.
	logs = nil
	resp, err = c.Get("http://" + down + "/api/v1/nodes/w1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(logs) != 0 || up.hits.Load() != 2 {
		t.Errorf("second request: logs %v, hits %d; want no failover, 2 hits", logs, up.hits.Load())
	}
}

// A server that was reached and failed is an answer, not a reason to send the request
// elsewhere: only connections never made fail over, so nothing is sent twice.
func TestFailoverNeverResendsAfterAConnection(t *testing.T) {
	var hangups atomic.Int32
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hangups.Add(1)
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer broken.Close()
	other := newAPIServer(t)
	api := newAPIHosts([]string{strings.TrimPrefix(broken.URL, "http://"), other.addr()}, func(string, ...any) {})
	c := &http.Client{Transport: &failover{next: http.DefaultTransport.(*http.Transport).Clone(), api: api}}
	_, err := c.Post(broken.URL+"/x", "application/json", strings.NewReader("{}"))
	if err == nil {
		t.Fatal("a hang-up after the request was sent gave no error")
	}
	if hangups.Load() == 0 {
		t.Fatal("the broken server was never reached: the test proves nothing")
	}
	if other.hits.Load() != 0 {
		t.Errorf("the request was sent again to %s after %s had taken it", other.addr(), broken.URL)
	}
}

func TestFailoverAllDownReturnsTheLastError(t *testing.T) {
	a, b := discoverytest.DownEndpoint(t), discoverytest.DownEndpoint(t)
	var tried []string
	api := newAPIHosts([]string{a, b}, func(f string, args ...any) { tried = append(tried, args[0].(string)) })
	c := &http.Client{Transport: &failover{next: http.DefaultTransport.(*http.Transport).Clone(), api: api}}
	_, err := c.Get("http://" + a + "/")
	if err == nil || !strings.Contains(err.Error(), b) {
		t.Errorf("error %v, want the last address's", err)
	}
	if strings.Join(tried, ",") != a+","+b {
		t.Errorf("tried %v, want %s then %s", tried, a, b)
	}
}

// The clients the join builds fail over too: rest.Config carries the transport wrapper.
func TestFailoverWrapsRestConfig(t *testing.T) {
	down, up := discoverytest.DownEndpoint(t), newAPIServer(t)
	api := newAPIHosts([]string{down, up.addr()}, func(string, ...any) {})
	cfg := &rest.Config{Host: "http://" + down}
	api.wrap(cfg)
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+down+"/version", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if up.hits.Load() != 1 {
		t.Errorf("hits %d on the server that is up, want 1", up.hits.Load())
	}
}

// A worker joined through several endpoints: discovery passes the one that is down, and
// kubelet.conf names the cluster's controlPlaneEndpoint.
func TestJoinSeveralEndpointsKubeletUsesControlPlaneEndpoint(t *testing.T) {
	h := newTestHost(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system"},
		Data: map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: lb.example:6443\n"}})
	o := h.options(t)
	down := discoverytest.DownEndpoint(t)
	o.Endpoint, o.MoreEndpoints = down, []string{h.server.Endpoint()}
	node := nodeClients(h)
	s := &State{Opts: o}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	if s.Discovery.Endpoint != h.server.Endpoint() || len(s.Discovery.Tried) != 2 || s.Discovery.Tried[0].Error == "" {
		t.Errorf("discovery served by %q, tried %+v: want the second endpoint after the first failed", s.Discovery.Endpoint, s.Discovery.Tried)
	}
	if got := kubeletConfServer(t, h); got != "https://lb.example:6443" || s.KubeletServer != got {
		t.Errorf("kubelet.conf server %q (state %q), want the controlPlaneEndpoint", got, s.KubeletServer)
	}
	if s.api == nil || s.api.hosts[0] != h.server.Endpoint() {
		t.Errorf("the join's clients do not start at the endpoint that served: %+v", s.api)
	}
	if len(*node) == 0 || (*node)[0].WrapTransport == nil {
		t.Errorf("the node's own client (wait-ready) does not fail over: %d clients", len(*node))
	}
}

// nodeClients records the clients the join makes with the node's own identity.
func nodeClients(h *testHost) *[]*rest.Config {
	var cfgs []*rest.Config
	next := h.env.NewClient
	h.env.NewClient = func(cfg *rest.Config) (kubernetes.Interface, error) {
		if cfg.CertFile == h.env.Paths.Of(host.KubeletClientCurrent) {
			cfgs = append(cfgs, cfg)
		}
		return next(cfg)
	}
	return &cfgs
}

// Without a controlPlaneEndpoint the kubelet keeps the endpoint that served, and says why:
// kubeadm-config names none, or it could not be read.
func TestJoinSeveralEndpointsWithoutControlPlaneEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{"kubeadm-config without one", []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system"},
			Data: map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"}}},
			"the cluster has no controlPlaneEndpoint: the kubelet will use"},
		{"no kubeadm-config", nil, "the cluster's controlPlaneEndpoint is unknown ("},
	} {
		h := newTestHost(t, tc.objs...)
		o := h.options(t)
		o.Endpoint, o.MoreEndpoints = discoverytest.DownEndpoint(t), []string{h.server.Endpoint()}
		s := &State{Opts: o}
		if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, h.out)
		}
		if got := kubeletConfServer(t, h); got != "https://"+h.server.Endpoint() {
			t.Errorf("%s: kubelet.conf server %q, want the endpoint that served", tc.name, got)
		}
		if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, tc.want) || !strings.Contains(w, "the API server that served this join, and only it") {
			t.Errorf("%s: warnings %q, want %q", tc.name, w, tc.want)
		}
	}
}

// One endpoint: kubelet.conf names cluster-info's server, as kubeadm's join does.
func TestJoinOneEndpointKubeletUsesClusterInfoServer(t *testing.T) {
	h := newTestHost(t)
	node := nodeClients(h)
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	if len(*node) == 0 || (*node)[0].WrapTransport != nil {
		t.Errorf("one endpoint: the node's own client is wrapped (%d clients)", len(*node))
	}
	if got := kubeletConfServer(t, h); got != "https://cp.example:6443" || s.api != nil {
		t.Errorf("kubelet.conf server %q (failover %v), want cluster-info's, no failover", got, s.api != nil)
	}
}

func kubeletConfServer(t *testing.T, h *testHost) string {
	t.Helper()
	b, err := os.ReadFile(h.env.Paths.Of(host.KubeletKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server
}
