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

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

var localhost = []net.IP{net.ParseIP("127.0.0.1")}

// A bundle of the real CA and an attacker's CA, signed with the token the attacker
// knows, served over TLS from the attacker's CA. The pin matches the real CA; before the fix
// every CA in the bundle was trusted and the token went to the attacker.
func TestBundleWithUnpinnedCAIsRefused(t *testing.T) {
	realCA, _ := newCA(t)
	attackerCA, attackerIssue := newCA(t)
	bundle := append(pki.EncodeCert(realCA), pki.EncodeCert(attackerCA)...)
	s := serve(t, attackerIssue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, bundle, "https://x:6443", tok)
	})
	start := time.Now()
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(realCA)))
	wantCode(t, err, operr.Trust, "no --discovery-token-ca-cert-hash pins", Pin(attackerCA))
	if s.authSeen.Load() {
		t.Error("the token reached the attacker")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal took %s: it must not wait", d)
	}
}

// The same bundle served by the real cluster is also refused: an unpinned CA is never trusted.
func TestBundleServedByRealCAStillRefused(t *testing.T) {
	realCA, realIssue := newCA(t)
	attackerCA, _ := newCA(t)
	bundle := append(pki.EncodeCert(realCA), pki.EncodeCert(attackerCA)...)
	s := serve(t, realIssue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, bundle, "https://x:6443", tok)
	})
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(realCA)))
	wantCode(t, err, operr.Trust, Pin(attackerCA))
}

// A rotation bundle works when both CAs are pinned, and the result trusts exactly them.
func TestRotationBundleWithBothPinned(t *testing.T) {
	oldCA, oldIssue := newCA(t)
	newCA2, _ := newCA(t)
	bundle := append(pki.EncodeCert(oldCA), pki.EncodeCert(newCA2)...)
	s := serve(t, oldIssue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, bundle, "https://x:6443", tok)
	})
	res, err := Token(context.Background(), request(t, endpointOf(s), Pin(oldCA), Pin(newCA2)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := pki.ParseCerts(res.CAData)
	if len(got) != 2 || PinsOf(got) != Pin(oldCA)+", "+Pin(newCA2) {
		t.Errorf("trusted CAs %s, want both pinned ones", PinsOf(got))
	}
}

// The trusted CA data holds only the pinned certificate, never extra PEM from cluster-info.
func TestCADataIsExactlyThePinnedCA(t *testing.T) {
	ca, issue := newCA(t)
	data := append([]byte("junk before\n"), pki.EncodeCert(ca)...)
	data = append(data, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")...)
	s := serve(t, issue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, data, "https://x:6443", tok)
	})
	res, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.CAData) != string(pki.EncodeCert(ca)) {
		t.Errorf("CAData = %q, want exactly the pinned CA", res.CAData)
	}
}

// An impostor with a foreign CA and no signatures is refused at once, not waited on.
func TestUnsignedImpostorRefusedAtOnce(t *testing.T) {
	realCA, _ := newCA(t)
	foreignCA, foreignIssue := newCA(t)
	s := serve(t, foreignIssue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(foreignCA), "https://x:6443")
	})
	req := request(t, endpointOf(s), Pin(realCA))
	req.Timeout = time.Minute
	start := time.Now()
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Trust, Pin(foreignCA))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("an impostor was waited on for %s", d)
	}
	if n := s.requests.Load(); n != 1 {
		t.Errorf("%d requests to the impostor, want 1", n)
	}
}

// An impostor that copies the real CA into unsigned cluster-info but cannot present a
// certificate from it is refused at once too (the real CA with the attacker's TLS).
func TestUnsignedRealCAWithForeignTLSRefusedAtOnce(t *testing.T) {
	realCA, _ := newCA(t)
	_, foreignIssue := newCA(t)
	s := serve(t, foreignIssue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(realCA), "https://x:6443")
	})
	req := request(t, endpointOf(s), Pin(realCA))
	req.Timeout = time.Minute
	start := time.Now()
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Trust, "not signed by the pinned CA")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("an impostor was waited on for %s", d)
	}
}

// Only a server proven to be the cluster's is waited on for its first signature.
func TestProvenServerIsWaitedOnForSignature(t *testing.T) {
	ca, issue := newCA(t)
	var calls atomic.Int32
	s := serve(t, issue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		if calls.Add(1) < 3 {
			return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443")
		}
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	if _, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca))); err != nil {
		t.Fatal(err)
	}
	if calls.Load() < 4 {
		t.Errorf("%d reads; want the unsigned answers waited out, then the pinned re-read", calls.Load())
	}
}

// A single slow call is retried within the discovery timeout.
func TestSlowCallIsRetried(t *testing.T) {
	ca, issue := newCA(t)
	var calls atomic.Int32
	s := serve(t, issue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		if calls.Add(1) == 1 {
			time.Sleep(400 * time.Millisecond) // longer than the per-call timeout
		}
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	req := request(t, endpointOf(s), Pin(ca))
	req.CallTimeout = 150 * time.Millisecond
	req.Timeout = 5 * time.Second
	if _, err := Token(context.Background(), req); err != nil {
		t.Fatalf("a slow first call ended discovery: %v", err)
	}
	if calls.Load() < 3 {
		t.Errorf("%d calls: the slow call was not retried", calls.Load())
	}
}

func TestClusterInfoServerMustBeHTTPS(t *testing.T) {
	ca, issue := newCA(t)
	s := serve(t, issue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "http://x:6443", tok)
	})
	_, err := Token(context.Background(), request(t, endpointOf(s), Pin(ca)))
	wantCode(t, err, operr.Trust, "not an https:// URL")
}

// An unauthenticated body is quoted briefly in messages, never whole.
func TestLongBodyIsNotEchoed(t *testing.T) {
	ca, issue := newCA(t)
	endpoint := serveTLS(t, issue(nil, localhost, time.Now().Add(-time.Minute)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte(strings.Repeat("A", 1<<20)))
	}))
	_, err := Token(context.Background(), request(t, endpoint, Pin(ca)))
	wantCode(t, err, operr.Trust, "HTTP 418")
	if len(err.Error()) > 1000 {
		t.Errorf("error message is %d bytes long", len(err.Error()))
	}
}

func TestCheckEndpoint(t *testing.T) {
	for _, bad := range []string{"10.0.0.1", "10.0.0.1:99999", ":6443", "10.0.0.1:0", "10.0.0.1:x", "a b:6443", "[::1]", "host:-1"} {
		if CheckEndpoint(bad) == nil {
			t.Errorf("CheckEndpoint(%q) accepted it", bad)
		}
	}
	for _, good := range []string{"10.0.0.1:6443", "[fd00::1]:443", "cp.example:6443"} {
		if err := CheckEndpoint(good); err != nil {
			t.Errorf("CheckEndpoint(%q) = %v", good, err)
		}
	}
}
