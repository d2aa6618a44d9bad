package discovery

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// An impostor's certificate (not from the pinned CA), expired and naming thousands of hosts,
// never turns into a message: no names, no "valid for", no clock hint.
func TestImpostorCertificateNamesAndDatesNeverShown(t *testing.T) {
	realCA, _ := newCA(t)
	_, foreignIssue := newCA(t)
	var names []string
	for i := 0; i < 2000; i++ {
		names = append(names, fmt.Sprintf("evil-%04d.example", i))
	}
	// Expired two hours ago, for names that are not the endpoint's.
	cert := foreignIssue(names, nil, time.Now().Add(-3*time.Hour))
	s := serve(t, cert, func() *corev1.ConfigMap { return clusterInfo(t, pki.EncodeCert(realCA), "https://x:6443", tok) })
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(realCA)))
	wantCode(t, err, operr.Trust, "not signed by the pinned CA")
	msg := err.Error() + operr.HintOf(err)
	for _, bad := range []string{"evil-", "valid for", "clock", "join through"} {
		if strings.Contains(msg, bad) {
			t.Errorf("an impostor's certificate reached the message (%q): %s", bad, msg)
		}
	}
}

// The cluster's own certificate (chain to the pinned CA proven) that is expired, or made for
// other names, is explained with its dates and names: those are authenticated. The names
// are capped.
func TestAuthenticatedCertificateIsExplained(t *testing.T) {
	ca, issue := newCA(t)
	var names []string
	for i := 0; i < 50; i++ {
		names = append(names, fmt.Sprintf("cp-%02d.example", i))
	}
	s := serve(t, issue(names, nil, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap { return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok) })
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Trust, "valid for", `"cp-00.example"`, "and 40 more")
	s = serve(t, issue(nil, localhost, time.Now().Add(-90*time.Minute)), func() *corev1.ConfigMap { return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok) })
	_, err = Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Trust, "not valid at this node's time")
	if !strings.Contains(operr.HintOf(err), "clock") {
		t.Errorf("hint %q does not point at the clock", operr.HintOf(err))
	}
}

// Strings of an unauthenticated cluster-info are capped and escaped: a cluster name of
// megabytes with terminal escape codes, a server URL, a CA subject.
func TestUnauthenticatedStringsAreCappedAndEscaped(t *testing.T) {
	ca, issue := newCA(t)
	huge := strings.Repeat("\x1b[31mEVIL\x1b[0m", 100000)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["a"] = &clientcmdapi.Cluster{Server: "https://x:6443", CertificateAuthorityData: pki.EncodeCert(ca)}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: huge}
	kc.CurrentContext = "c"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, issue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return &corev1.ConfigMap{Data: map[string]string{"kubeconfig": string(b)}}
	})
	_, err = Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Trust, "names no usable cluster")
	if len(err.Error()) > 1000 || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("error is %d bytes, escape codes %v", len(err.Error()), strings.Contains(err.Error(), "\x1b"))
	}
	s = serve(t, issue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "ftp://\x1b[2J"+strings.Repeat("x", 100000), tok)
	})
	_, err = Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Trust, "unusable API server")
	if len(err.Error()) > 1000 || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("server URL error is %d bytes, escape codes %v", len(err.Error()), strings.Contains(err.Error(), "\x1b"))
	}
	if q := Quote("a\x1b[0m\nb"); strings.ContainsAny(q, "\x1b\n") || !strings.HasPrefix(q, `"`) {
		t.Errorf("Quote = %s", q)
	}
}

// A redirect is refused at once with exit 4, naming it: never followed, not retried until the
// timeout.
func TestRedirectIsRefusedAtOnce(t *testing.T) {
	ca, issue := newCA(t)
	var hits atomic.Int32
	var followed atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Store(true) }))
	defer target.Close()
	endpoint := serveTLS(t, issue(nil, localhost, time.Now().Add(-time.Minute)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusFound)
	}))
	req := request(t, endpoint, Pin(ca))
	req.Timeout = time.Minute
	start := time.Now()
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Trust, "redirect", "HTTP 302", "/elsewhere")
	if d := time.Since(start); d > 2*time.Second || hits.Load() != 1 {
		t.Errorf("refused after %s and %d requests; want at once", d, hits.Load())
	}
	if followed.Load() {
		t.Error("discovery followed the redirect")
	}
}

// A server that only ever answers 503 is retried, and the final error says its identity was
// never verified.
func TestOnlyErrorsSayIdentityUnknown(t *testing.T) {
	ca, issue := newCA(t)
	endpoint := serveTLS(t, issue(nil, localhost, time.Now().Add(-time.Minute)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	req := request(t, endpoint, Pin(ca))
	req.Timeout = 700 * time.Millisecond
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Timeout, "no answer from it was ever verified")
}

// A body cut short by the per-call deadline is a slow answer: retried, not "not a ConfigMap".
func TestBodyCutShortByTheCallDeadlineIsRetried(t *testing.T) {
	ca, issue := newCA(t)
	full, _ := json.Marshal(clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok))
	var calls atomic.Int32
	endpoint := serveTLS(t, issue(nil, localhost, time.Now().Add(-time.Minute)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Length", fmt.Sprint(len(full)))
			_, _ = w.Write(full[:len(full)/2])
			w.(http.Flusher).Flush()
			time.Sleep(600 * time.Millisecond)
			return
		}
		_, _ = w.Write(full)
	}))
	req := request(t, endpoint, Pin(ca))
	req.CallTimeout = 200 * time.Millisecond
	req.Timeout = 10 * time.Second
	if _, err := Token(context.Background(), req); err != nil {
		t.Fatalf("a body cut short by the call deadline ended discovery: %v", err)
	}
	if calls.Load() < 2 {
		t.Errorf("%d calls", calls.Load())
	}
}

// The pinned re-read must equal the first read byte for byte: a server that answers the
// second read with other (validly signed) cluster-info is refused.
func TestPinnedRereadMustEqualTheFirstRead(t *testing.T) {
	ca, issue := newCA(t)
	var calls atomic.Int32
	s := serve(t, issue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		if calls.Add(1) == 1 {
			return clusterInfo(t, pki.EncodeCert(ca), "https://first:6443", tok)
		}
		return clusterInfo(t, pki.EncodeCert(ca), "https://second:6443", tok)
	})
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Trust, "differs from the first read")
}

// serveTLS serves handler over TLS with cert until the test ends and returns its host:port.
func serveTLS(t *testing.T, cert tls.Certificate, handler http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	srv.TLS = tlsConfig(cert)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://")
}

// A throttled answer (429, as API priority and fairness gives a bootstrap storm) is retried:
// discovery succeeds once the server answers.
func TestThrottledDiscoveryIsRetried(t *testing.T) {
	ca, issue := newCA(t)
	full, _ := json.Marshal(clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok))
	var calls atomic.Int32
	endpoint := serveTLS(t, issue(nil, localhost, time.Now().Add(-time.Minute)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write(full)
	}))
	req := request(t, endpoint, Pin(ca))
	req.Timeout = 20 * time.Second
	req.Clock = &waitClock{} // the asked-for waits are TestRetryAfterIsHonoured's
	if _, err := Token(context.Background(), req); err != nil {
		t.Fatalf("throttled discovery failed: %v", err)
	}
	if calls.Load() != 4 {
		t.Errorf("%d calls, want 2 throttled, then the read and its pinned re-read", calls.Load())
	}
}
