package discovery

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kjoin.dev/kjoin/discovery/discoverytest"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

func TestSeveralEndpointsFailOverPastADownOne(t *testing.T) {
	ca, issue := newCA(t)
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://cp1.example:6443", tok)
	})
	down := discoverytest.DownEndpoint(t)
	req := request(t, down, Pin(ca))
	req.MoreEndpoints = []string{endpointOf(s)}
	res, err := Token(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Endpoint != endpointOf(s) {
		t.Errorf("served by %q, want %q", res.Endpoint, endpointOf(s))
	}
	if res.Server != "https://cp1.example:6443" {
		t.Errorf("server %q, want cluster-info's", res.Server)
	}
	if len(res.Tried) != 2 || res.Tried[0].Endpoint != down || !strings.Contains(res.Tried[0].Error, "refused") ||
		res.Tried[1].Endpoint != endpointOf(s) || res.Tried[1].Error != "" {
		t.Errorf("tried = %+v, want the down endpoint (refused), then the one that served", res.Tried)
	}
	if s.requests.Load() != 2 || s.authSeen.Load() {
		t.Errorf("the serving endpoint got %d reads (want 2: insecure, pinned), credential sent: %v", s.requests.Load(), s.authSeen.Load())
	}
}

// An endpoint that fails after the first read serves nothing more: the pinned re-read goes to
// the next, verified by the same pinned CA and that endpoint's own name.
func TestSeveralEndpointsPinnedReadFailsOver(t *testing.T) {
	ca, issue := newCA(t)
	var first *server
	first = serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		if first.requests.Load() > 1 {
			return nil // 404 would be final: close instead, below
		}
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	first.Config.Handler = closeAfter(first.Config.Handler, &first.requests, 1)
	second := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	req := request(t, endpointOf(first), Pin(ca))
	req.MoreEndpoints = []string{endpointOf(second)}
	res, err := Token(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Endpoint != endpointOf(second) || second.requests.Load() != 1 {
		t.Errorf("served by %q with %d reads of the second, want the second once (the pinned read)", res.Endpoint, second.requests.Load())
	}
}

// closeAfter hangs up on every request after the first n: a server gone mid-discovery.
func closeAfter(h http.Handler, count *atomic.Int32, n int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if count.Load() >= n {
			count.Add(1)
			hj, ok := w.(http.Hijacker)
			if ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// A list never weakens the pin: an impostor first in the list ends the discovery there, and
// the genuine endpoint after it is never asked.
func TestSeveralEndpointsImpostorFirstIsRefused(t *testing.T) {
	realCA, issue := newCA(t)
	_, impostorIssue := newCA(t)
	impostor := serve(t, impostorIssue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(realCA), "https://x:6443", tok) // the real, signed cluster-info, replayed
	})
	genuine := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(realCA), "https://x:6443", tok)
	})
	req := request(t, endpointOf(impostor), Pin(realCA))
	req.MoreEndpoints = []string{endpointOf(genuine)}
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Trust, "not signed by the pinned CA")
	if h := operr.HintOf(err); !strings.Contains(h, endpointOf(impostor)) {
		t.Errorf("hint %q does not name the impostor's endpoint", h)
	}
	if impostor.requests.Load() == 0 {
		t.Fatal("the impostor was never asked: the refusal proves nothing")
	}
	if genuine.requests.Load() != 0 {
		t.Errorf("the genuine endpoint was read %d times after an impostor: a list must not fail over past a failure of trust", genuine.requests.Load())
	}
	if impostor.authSeen.Load() {
		t.Error("a credential reached the impostor")
	}
}

// An impostor later in the list is met only when the genuine ones are down, and refused then.
func TestSeveralEndpointsImpostorAfterADownOneIsRefused(t *testing.T) {
	realCA, _ := newCA(t)
	other, otherIssue := newCA(t)
	impostor := serve(t, otherIssue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(other), "https://x:6443", tok) // its own CA: not the pinned one
	})
	req := request(t, discoverytest.DownEndpoint(t), Pin(realCA))
	req.MoreEndpoints = []string{endpointOf(impostor)}
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Trust, Pin(other))
	if impostor.requests.Load() != 1 {
		t.Errorf("impostor read %d times, want once (refused at its first answer)", impostor.requests.Load())
	}
}

func TestSeveralEndpointsAllDownTimesOutNamingEach(t *testing.T) {
	ca, _ := newCA(t)
	a, b := discoverytest.DownEndpoint(t), discoverytest.DownEndpoint(t)
	req := request(t, a, Pin(ca))
	req.MoreEndpoints = []string{b, a} // a repeated endpoint is tried once per round
	req.Timeout = 700 * time.Millisecond
	var tries atomic.Int32
	req.Logf = func(f string, args ...any) {
		if strings.Contains(f, "trying the next endpoint") {
			tries.Add(1)
		}
	}
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Timeout, "none of the 2 API server endpoints", a, b)
	if tries.Load() < 4 {
		t.Errorf("only %d failed reads within the timeout: the endpoints were not retried in rounds", tries.Load())
	}
}

func TestSeveralEndpointsEachChecked(t *testing.T) {
	ca, _ := newCA(t)
	req := request(t, "10.0.0.1:6443", Pin(ca))
	req.MoreEndpoints = []string{"10.0.0.2"}
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Usage, `"10.0.0.2"`)
}

// An endpoint that accepts the connection but never answers is left after the call timeout.
func TestSeveralEndpointsFailOverPastAHungOne(t *testing.T) {
	ca, issue := newCA(t)
	release := make(chan struct{})
	defer close(release)
	hung := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		<-release
		return nil
	})
	good := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	req := request(t, endpointOf(hung), Pin(ca))
	req.CallTimeout = 200 * time.Millisecond
	req.MoreEndpoints = []string{endpointOf(good)}
	res, err := Token(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if hung.requests.Load() == 0 || res.Endpoint != endpointOf(good) || res.Tried[0].Error == "" {
		t.Errorf("hung endpoint asked %d times; served by %q, tried %+v", hung.requests.Load(), res.Endpoint, res.Tried)
	}
}

// Each endpoint is verified for its own name: one whose certificate does not name it is
// refused, even though the same pinned CA issued it.
func TestSeveralEndpointsEachVerifiedForItsOwnName(t *testing.T) {
	ca, issue := newCA(t)
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	_, port, _ := net.SplitHostPort(endpointOf(s))
	req := request(t, discoverytest.DownEndpoint(t), Pin(ca))
	req.MoreEndpoints = []string{net.JoinHostPort("localhost", port)} // the certificate names 127.0.0.1 only
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Trust, `not valid for "localhost"`, "127.0.0.1")
}
