package discovery

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// waitClock is the real clock, except that every wait is recorded and over at once.
type waitClock struct {
	clock.RealClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *waitClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}

// A throttled read waits as long as the server asked, and sends nothing more meanwhile.
func TestRetryAfterIsHonoured(t *testing.T) {
	ca, issue := newCA(t)
	full, _ := json.Marshal(clusterInfo(t, pki.EncodeCert(ca), "https://x:6443", tok))
	var calls atomic.Int32
	endpoint := serveTLS(t, issue(nil, localhost, time.Now().Add(-time.Minute)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.Header().Set("Retry-After", time.Now().Add(30*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			_, _ = w.Write(full)
		}
	}))
	clk := &waitClock{}
	req := request(t, endpoint, Pin(ca))
	req.Clock = clk
	if _, err := Token(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 4 {
		t.Errorf("%d requests, want 4: two throttled, the read and its pinned re-read", calls.Load())
	}
	if len(clk.waits) != 2 || clk.waits[0] != 7*time.Second || clk.waits[1] < 28*time.Second || clk.waits[1] > 30*time.Second {
		t.Errorf("waits %v, want 7s (delay-seconds), then about 30s (an HTTP date)", clk.waits)
	}
}

// A server that keeps throttling is waited on until the discovery's deadline, and no longer:
// the waits it asks for pace the requests.
func TestRetryAfterUntilTheDeadline(t *testing.T) {
	ca, issue := newCA(t)
	var calls atomic.Int32
	endpoint := serveTLS(t, issue(nil, localhost, time.Now().Add(-time.Minute)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	req := request(t, endpoint, Pin(ca))
	req.Timeout = 2500 * time.Millisecond
	start := time.Now()
	_, err := Token(context.Background(), req)
	wantCode(t, err, operr.Timeout, "HTTP 429", "retry after 1s")
	if d := time.Since(start); d < 2400*time.Millisecond {
		t.Errorf("gave up after %s, before the 2.5s deadline", d)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d requests in 2.5s with Retry-After: 1, want 3 (at 0, 1 and 2 s)", n)
	}
}

func TestRetryAfterValues(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false}, {"soon", 0, false}, {"-3", 0, false}, {"0", 0, true}, {" 12 ", 12 * time.Second, true},
		{"86400", maxRetryAfter, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	} {
		got, ok := retryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %s, %v; want %s, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}
