package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kjoin.dev/kjoin/discovery/discoverytest"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/token"
)

func newCA(t *testing.T) (*x509.Certificate, func(dns []string, ips []net.IP, notBefore time.Time) tls.Certificate) {
	t.Helper()
	key, err := pki.NewECKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "kubernetes", NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, key)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(dns []string, ips []net.IP, notBefore time.Time) tls.Certificate {
		k, _ := pki.NewECKey()
		c, err := pki.NewSignedCert(pki.CertConfig{CommonName: "kube-apiserver", DNSNames: dns, IPs: ips, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			NotBefore: notBefore, NotAfter: notBefore.Add(time.Hour)}, k.Public(), ca, key)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: k}
	}
	return ca, issue
}

const tok = "abcdef.0123456789abcdef"

func clusterInfo(t *testing.T, caPEM []byte, server string, tokens ...string) *corev1.ConfigMap {
	return discoverytest.ClusterInfo(t, caPEM, server, tokens...)
}

type server struct {
	*httptest.Server
	authSeen atomic.Bool
	requests atomic.Int32
}

func serve(t *testing.T, cert tls.Certificate, cm func() *corev1.ConfigMap) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			s.authSeen.Store(true)
		}
		if r.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" {
			http.NotFound(w, r)
			return
		}
		c := cm()
		if c == nil {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(c)
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func request(t *testing.T, endpoint string, pins ...string) Request {
	t.Helper()
	p, err := ParsePins(pins)
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := token.Parse(tok)
	return Request{Endpoint: endpoint, Token: tk, Pins: p, Timeout: 3 * time.Second, CallTimeout: time.Second, SignatureGrace: 100 * time.Millisecond}
}

func endpointOf(s *server) string { return strings.TrimPrefix(s.URL, "https://") }

func wantCode(t *testing.T, err error, code operr.Code, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error with code %d, got nil", code)
	}
	if got := operr.CodeOf(err); got != code {
		t.Errorf("code = %d (%s), want %d; error: %v", got, got.Reason(), code, err)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not mention %q", err, c)
		}
	}
	if strings.Contains(err.Error(), "0123456789abcdef") {
		t.Errorf("error leaks the token secret: %v", err)
	}
}

func TestTokenDiscoverySucceeds(t *testing.T) {
	ca, issue := newCA(t)
	caPEM := pki.EncodeCert(ca)
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, caPEM, "https://cp.example:6443", tok, "zzzzzz.zzzzzzzzzzzzzzzz")
	})
	res, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Server != "https://cp.example:6443" || string(res.CAData) != string(caPEM) || res.CAPin != Pin(ca) {
		t.Errorf("unexpected result %+v", res)
	}
	if s.requests.Load() != 2 {
		t.Errorf("want 2 reads of cluster-info (insecure, then pinned), got %d", s.requests.Load())
	}
	if s.authSeen.Load() {
		t.Error("a credential was sent during discovery")
	}
}

func TestTokenDiscoveryPinMismatchNamesPresentedPin(t *testing.T) {
	ca, issue := newCA(t)
	other, _ := newCA(t)
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(other)))
	wantCode(t, err, operr.Trust, Pin(ca))
	if s.authSeen.Load() {
		t.Error("token reached a server whose CA did not match")
	}
}

func TestTokenDiscoveryHostileEndpointRefusedOnPinnedRead(t *testing.T) {
	// The hostile endpoint replays the real, signed cluster-info but serves TLS with another CA.
	realCA, _ := newCA(t)
	_, hostileIssue := newCA(t)
	s := serve(t, hostileIssue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(realCA), "https://x:6443", tok)
	})
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(realCA)))
	wantCode(t, err, operr.Trust, "not signed by the pinned CA")
	if s.authSeen.Load() {
		t.Error("token reached the hostile endpoint")
	}
}

func TestTokenDiscoveryNameMismatchListsValidNames(t *testing.T) {
	ca, issue := newCA(t)
	s := serve(t, issue([]string{"cp.example", "kubernetes"}, []net.IP{net.ParseIP("10.0.0.9")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Trust, "cp.example", "kubernetes", "10.0.0.9", `"127.0.0.1"`)
}

func TestTokenDiscoveryClockSkew(t *testing.T) {
	ca, issue := newCA(t)
	// The serving cert starts 30 minutes in this node's future: the node's clock is behind.
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(30*time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Trust, "not valid at this node's time", "clock")
}

func TestTokenDiscoveryUnknownTokenFailsFast(t *testing.T) {
	ca, issue := newCA(t)
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", "zzzzzz.zzzzzzzzzzzzzzzz")
	})
	start := time.Now()
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Auth, `token id "abcdef" is unknown`, "1 other token")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("unknown token took %s, want a fast failure after the signature grace", d)
	}
}

func TestTokenDiscoveryWaitsForNewTokenSignature(t *testing.T) {
	ca, issue := newCA(t)
	var calls atomic.Int32
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		if calls.Add(1) < 3 {
			return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", "zzzzzz.zzzzzzzzzzzzzzzz")
		}
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	req := request(t, endpointOf(s), Pin(ca))
	req.SignatureGrace = 2 * time.Second
	if _, err := Token(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

func TestTokenDiscoveryWrongSecret(t *testing.T) {
	ca, issue := newCA(t)
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", "abcdef.ffffffffffffffff")
	})
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Auth, "does not match token id")
}

func TestTokenDiscoveryNoClusterInfo(t *testing.T) {
	ca, issue := newCA(t)
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap { return nil })
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Trust, "cluster-info")
}

func TestTokenDiscoveryUnreachableTimesOut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ca, _ := newCA(t)
	req := request(t, addr, Pin(ca))
	req.Timeout = 700 * time.Millisecond
	_, err = Token(context.Background(), req)
	wantCode(t, err, operr.Timeout, addr, "connection refused")
}

func TestTokenDiscoveryBadInput(t *testing.T) {
	ca, _ := newCA(t)
	_, err := Token(context.Background(), request(t, "10.0.0.1", Pin(ca)))
	wantCode(t, err, operr.Usage, "host:port")
	_, err = Token(context.Background(), request(t, "10.0.0.1:6443"))
	wantCode(t, err, operr.Usage, "--discovery-token-ca-cert-hash")
}

func TestParsePins(t *testing.T) {
	good := "sha256:" + strings.Repeat("ab", 32)
	if p, err := ParsePins([]string{strings.ToUpper(good[:6]) + good[6:]}); err != nil || !p[good] {
		t.Errorf("ParsePins(upper-case format) = %v, %v", p, err)
	}
	for _, bad := range []string{"ab", "md5:" + strings.Repeat("ab", 32), "sha256:abc", "sha256:" + strings.Repeat("zz", 32), "sha256:a:b"} {
		if _, err := ParsePins([]string{bad}); err == nil {
			t.Errorf("ParsePins(%q) accepted a malformed pin", bad)
		}
	}
}

func TestTokenDiscoveryWaitsForASignerThatHasNotRunYet(t *testing.T) {
	ca, issue := newCA(t)
	var calls atomic.Int32
	s := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		if calls.Add(1) < 4 {
			return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443") // freshly initialised: nothing signed
		}
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	req := request(t, endpointOf(s), Pin(ca))
	req.SignatureGrace = 10 * time.Millisecond
	if _, err := Token(context.Background(), req); err != nil {
		t.Fatalf("a signer that starts late must be waited for: %v", err)
	}

	never := serve(t, issue(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443")
	})
	req = request(t, endpointOf(never), Pin(ca))
	req.Timeout = 800 * time.Millisecond
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Timeout, "no token signatures at all")
}

func tlsConfig(c tls.Certificate) *tls.Config { return &tls.Config{Certificates: []tls.Certificate{c}} }

// Over IPv6 the endpoint is bracketed ("[::1]:port"): discovery reaches it, verifies the
// chain against an IPv6 SAN, and keeps cluster-info's bracketed server URL as it is.
func TestTokenDiscoveryOverIPv6(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	ca, issue := newCA(t)
	caPEM := pki.EncodeCert(ca)
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		_ = json.NewEncoder(w).Encode(clusterInfo(t, caPEM, "https://[fd77::11]:6443", tok))
	}))
	s.Listener.Close()
	s.Listener = l
	s.TLS = &tls.Config{Certificates: []tls.Certificate{issue(nil, []net.IP{net.IPv6loopback}, time.Now().Add(-time.Minute))}}
	s.StartTLS()
	t.Cleanup(s.Close)
	ep := endpointOf(s)
	if !strings.HasPrefix(ep, "[::1]:") {
		t.Fatalf("endpoint %q is not a bracketed IPv6 address", ep)
	}
	if err := CheckEndpoint(ep); err != nil {
		t.Fatal(err)
	}
	res, err := Token(context.Background(), request(t, ep, Pin(ca)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Server != "https://[fd77::11]:6443" || s.requests.Load() != 2 {
		t.Errorf("server %q after %d reads", res.Server, s.requests.Load())
	}
	// A bare IPv6 address with a port is refused with the bracketed form to use instead.
	if err := CheckEndpoint("fd77::11:6443"); err == nil || !strings.Contains(err.Error(), "[fd77::11]:6443") {
		t.Errorf("unbracketed IPv6: %v", err)
	}
}
