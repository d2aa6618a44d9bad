package phases

import (
	"io"
	"net/http"
	"time"

	"k8s.io/utils/clock"
)

// unauthorizedWindow is how long the bootstrap client retries HTTP 401 answers.
const unauthorizedWindow = 8 * time.Second

// authRetry retries HTTP 401 answers of the bootstrap client for a short window. An API
// server that has just (re)started answers 401 to bootstrap tokens until its Secret cache has
// synced (seen in the lab: cp1's API server restarted during a worker's TLS bootstrap, and
// after etcd regained quorum). A token that is really revoked still fails, after the window
// (kept below the client's 10 s request timeout, so the caller sees the 401 itself).
type authRetry struct {
	next   http.RoundTripper
	clock  clock.Clock
	window time.Duration
	logf   func(format string, args ...any)
}

func (a *authRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	start, delay := a.clock.Now(), 250*time.Millisecond
	for attempt := 0; ; attempt++ {
		r := req
		if attempt > 0 {
			r = req.Clone(req.Context())
			if req.Body != nil {
				if req.GetBody == nil {
					return nil, errNoRetryBody
				}
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		resp, err := a.next.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || a.clock.Since(start)+delay > a.window {
			return resp, err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if a.logf != nil {
			a.logf("%s %s: 401 Unauthorized; retrying (an API server that just started refuses tokens until its caches sync)", req.Method, req.URL.Path)
		}
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-a.clock.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// WrappedRoundTripper lets client-go reach the transport underneath to cancel a request that
// timed out; without it client-go logs "unable to cancel request" onto the operator's output.
func (a *authRetry) WrappedRoundTripper() http.RoundTripper { return a.next }

type retryError string

func (e retryError) Error() string { return string(e) }

const errNoRetryBody = retryError("cannot retry a request whose body cannot be read again")
