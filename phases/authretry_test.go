package phases

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A just-restarted API server answers 401 for a moment: the request (a POST with a body
// too) is retried and succeeds; a 401 that lasts past the window reaches the caller.
func TestAuthRetryRidesOutAPIServerStart(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	var bodies []string
	refuse := int32(3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		if calls.Add(1) <= refuse {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	rt := &authRetry{next: http.DefaultTransport, clock: newAutoClock(), window: unauthorizedWindow}
	client := &http.Client{Transport: rt}
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("csr"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("resp %v err %v", resp, err)
	}
	resp.Body.Close()
	if calls.Load() != 4 || bodies[3] != "csr" {
		t.Errorf("calls %d bodies %q", calls.Load(), bodies)
	}

	calls.Store(0)
	refuse = 1 << 30
	start := time.Now()
	resp, err = client.Get(srv.URL)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a lasting 401: resp %v err %v", resp, err)
	}
	resp.Body.Close()
	if calls.Load() < 3 || time.Since(start) > 5*time.Second {
		t.Errorf("a lasting 401 was tried %d times in %s (fake clock: should be quick, several tries)", calls.Load(), time.Since(start))
	}
}

// client-go cancels a timed-out request through the wrapped transport (else it logs "unable
// to cancel request" onto the operator's output).
func TestAuthRetryExposesItsTransport(t *testing.T) {
	next := &http.Transport{}
	var rt http.RoundTripper = &authRetry{next: next}
	w, ok := rt.(interface{ WrappedRoundTripper() http.RoundTripper })
	if !ok || w.WrappedRoundTripper() != next {
		t.Error("authRetry does not expose the transport it wraps")
	}
}
