package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// stepClock is a clock whose time moves only by the waits asked of it, each over at once.
type stepClock struct {
	clock.RealClock
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	c.mu.Unlock()
	return ch
}

// refusing answers status to its first n reads of cluster-info (all of them with n < 0), then
// serves it; every read is counted and none may carry a credential.
func refusing(t *testing.T, status, n int) (string, *atomic.Int32, *stepClock, Request) {
	t.Helper()
	ca, issue := newCA(t)
	full, _ := json.Marshal(clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok))
	var calls atomic.Int32
	endpoint := serveTLS(t, issue(nil, localhost, time.Now().Add(-time.Minute)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("a read of cluster-info carried a credential")
		}
		if c := calls.Add(1); n < 0 || int(c) <= n {
			http.Error(w, `{"kind":"Status","reason":"Forbidden"}`, status)
			return
		}
		_, _ = w.Write(full)
	}))
	clk := &stepClock{now: time.Now()} // certificates are checked at its time
	req := request(t, endpoint, Pin(ca))
	req.Clock = clk
	req.Timeout = 15 * time.Second // on the real clock: the step clock's waits take no time
	return endpoint, &calls, clk, req
}

// An API server that has just started refuses anonymous reads until its authorizer has synced
// the cluster's RBAC (measured in the lab: about 4 s after a restart): discovery reads again,
// and the join goes on once the server lets it read.
func TestRefusedReadIsReadAgainWhileTheAuthorizerSyncs(t *testing.T) {
	for _, status := range []int{http.StatusForbidden, http.StatusUnauthorized} {
		_, calls, clk, req := refusing(t, status, 4)
		start := clk.Now()
		var logged []string
		req.Logf = func(f string, a ...any) { logged = append(logged, strings.TrimSpace(fmt.Sprintf(f, a...))) }
		if _, err := Token(context.Background(), req); err != nil {
			t.Fatalf("HTTP %d four times, then served: %v", status, err)
		}
		if n := calls.Load(); n != 6 {
			t.Errorf("HTTP %d: %d reads, want 6: four refused, the read, its pinned re-read", status, n)
		}
		if d := clk.Since(start); d != 3*time.Second {
			t.Errorf("HTTP %d: waited %s in all, want 3s (0.2 + 0.4 + 0.8 + 1.6)", status, d)
		}
		if len(logged) == 0 || !strings.Contains(logged[0], fmt.Sprintf("HTTP %d", status)) || !strings.Contains(logged[0], "refused") {
			t.Errorf("HTTP %d: log %q does not say the read was refused", status, logged)
		}
	}
}

// A refusal that outlasts the grace is final: exit 5 (auth) naming the status and the grace,
// not the discovery timeout's exit 6 minutes later.
func TestRefusalIsFinalAfterTheGrace(t *testing.T) {
	_, calls, clk, req := refusing(t, http.StatusForbidden, -1)
	start := clk.Now()
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Auth, "refused an anonymous read of cluster-info (HTTP 403), still after 20s")
	if !strings.Contains(operr.HintOf(err), "kubeadm:bootstrap-signer-clusterinfo") {
		t.Errorf("hint %q does not name the Role that allows the read", operr.HintOf(err))
	}
	if d := clk.Since(start); d < 20*time.Second || d >= 22*time.Second {
		t.Errorf("final after %s of refusals, want from 20s to the next read (2s steps)", d)
	}
	// 0.2 + 0.4 + 0.8 + 1.6 + 2 × 8 = 19 s: the 14th read, at 21 s, is the one past the grace.
	if n := calls.Load(); n != 14 {
		t.Errorf("%d reads, want 14", n)
	}

	// The grace is over at its very end: with 19s, the 13th read (at 19 s) is final.
	_, calls, _, req = refusing(t, http.StatusForbidden, -1)
	req.RefusalGrace = 19 * time.Second
	_, err = Token(context.Background(), req)
	wantCode(t, err, operr.Auth, "still after 19s")
	if n := calls.Load(); n != 13 {
		t.Errorf("a grace of 19s: %d reads, want 13", n)
	}
}

// With several endpoints, a refusing one is left for the next (which may have synced), and
// the refusal is final only once the grace is over.
func TestRefusingEndpointFailsOver(t *testing.T) {
	refuser, refused, _, req := refusing(t, http.StatusForbidden, -1)
	ca, issue := newCA(t)
	good := serve(t, issue(nil, localhost, time.Now().Add(-time.Minute)), func() *corev1.ConfigMap {
		return clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok)
	})
	p, _ := ParsePins([]string{Pin(ca)})
	req.Pins = p
	req.MoreEndpoints = []string{endpointOf(good)}
	res, err := Token(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Endpoint != endpointOf(good) || len(res.Tried) != 2 || res.Tried[0].Endpoint != refuser || !strings.Contains(res.Tried[0].Error, "HTTP 403") {
		t.Errorf("served by %q after %+v, want the second endpoint after the refusing one", res.Endpoint, res.Tried)
	}
	if refused.Load() != 1 {
		t.Errorf("the refusing endpoint was read %d times, want once (the pinned re-read starts at the one that served)", refused.Load())
	}

	// Both refuse: final after the grace, across the rounds.
	a, _, clk, req := refusing(t, http.StatusForbidden, -1)
	b, _, _, _ := refusing(t, http.StatusForbidden, -1)
	req.MoreEndpoints = []string{b}
	start := clk.Now()
	_, err = Token(context.Background(), req)
	wantCode(t, err, operr.Auth, "HTTP 403", "still after 20s")
	if d := clk.Since(start); d < 20*time.Second || d >= 22*time.Second {
		t.Errorf("%s and %s refusing: final after %s, want from 20s to the next round", a, b, d)
	}
}
