package phases

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"sync"

	"k8s.io/client-go/rest"
)

// apiHosts are the addresses of one cluster's API servers a join may use, in order of
// preference, and the one that last answered (shared by every client of the join).
type apiHosts struct {
	hosts []string // host:port
	logf  func(format string, args ...any)

	mu  sync.Mutex
	cur int
}

// newAPIHosts lists the addresses (host:port) in order, each once.
func newAPIHosts(hosts []string, logf func(string, ...any)) *apiHosts {
	a := &apiHosts{logf: logf}
	for _, h := range hosts {
		if h != "" && !slices.Contains(a.hosts, h) {
			a.hosts = append(a.hosts, h)
		}
	}
	return a
}

// current is the address that last answered (or the first).
func (h *apiHosts) current() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hosts[h.cur]
}

// wrap makes cfg's client fail over between the addresses.
func (h *apiHosts) wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &failover{next: rt, api: h} })
}

// failover sends each request to the API server address that last answered, and on to the
// next address when that one cannot be reached. Only a connection that was never made is
// failed over (dial errors: refused, unreachable, timed out connecting), so no request is ever
// sent twice; each address is verified by TLS for its own name, against the CA discovery
// pinned. A certificate that does not verify is an error, never a reason to try another.
type failover struct {
	next http.RoundTripper
	api  *apiHosts
}

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	h := f.api
	h.mu.Lock()
	start := h.cur
	h.mu.Unlock()
	var err error
	for i := range h.hosts {
		at := (start + i) % len(h.hosts)
		r := req
		if i > 0 || req.URL.Host != h.hosts[at] {
			if r, err = retarget(req, h.hosts[at]); err != nil {
				return nil, err
			}
		}
		var resp *http.Response
		resp, err = f.next.RoundTrip(r)
		if err == nil || !neverConnected(err) {
			if at != start {
				h.mu.Lock()
				h.cur = at
				h.mu.Unlock()
				h.logf("API server %s answered; using it from now on", h.hosts[at])
			}
			return resp, err
		}
		h.logf("API server %s cannot be reached (%v)", h.hosts[at], err)
	}
	return nil, err
}

// retarget copies req for another address of the same API, with a fresh body.
func retarget(req *http.Request, host string) (*http.Request, error) {
	r := req.Clone(req.Context())
	r.URL.Host, r.Host = host, host
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, errors.New("the request's body cannot be sent again to another API server")
		}
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	}
	return r, nil
}

// neverConnected reports an error of a connection that was never made.
func neverConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
