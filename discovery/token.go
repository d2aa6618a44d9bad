// Package discovery establishes trust in a cluster before joining it: token discovery
// (anonymous cluster-info, detached JWS checked with the token, CA pinned by SPKI sha256,
// pinned re-fetch) and file/https discovery, as kubeadm does, with precise errors. It never
// sends a credential and knows nothing of the host: it writes no file.
package discovery

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/token"
)

// Request describes a token discovery.
type Request struct {
	// Endpoint is host:port of an API server of the cluster.
	Endpoint string
	// MoreEndpoints are further API servers of the same cluster, tried in order when one
	// before them is down, refuses the connection or times out. Each must prove the same
	// pinned identity: a failure of trust at any of them ends the discovery.
	MoreEndpoints []string
	Token         token.Token
	// Pins are the accepted CA pins; empty only with UnsafeSkipCAVerification.
	Pins                     Pins
	UnsafeSkipCAVerification bool
	// Timeout bounds the whole discovery (kubeadm: timeouts.discovery, 5m).
	Timeout time.Duration
	// CallTimeout bounds one HTTP request (kubeadm: 10s).
	CallTimeout time.Duration
	// SignatureGrace is how long to wait for the controller-manager to sign cluster-info
	// for a token it does not list yet, before calling the token unknown.
	SignatureGrace time.Duration
	// RefusalGrace is how long an API server may refuse the anonymous read of cluster-info
	// (HTTP 401 or 403) before the refusal is final: one that has just started refuses for a
	// few seconds, until its authorizer has synced the cluster's RBAC.
	RefusalGrace time.Duration
	Clock        clock.Clock
	// Logf receives progress at debug level; may be nil.
	Logf func(format string, args ...any)

	// offset is the last seen server time minus local time.
	offset time.Duration
}

// Result is verified cluster information.
type Result struct {
	// Server is the API server URL recorded in cluster-info (the cluster's endpoint).
	Server string
	// CAData holds the verified CA certificate(s), PEM.
	CAData []byte
	// CAPin is the pin of the CA that matched (or of the first CA with unsafe skip).
	CAPin string
	// ClusterInfo is the signed kubeconfig content of cluster-info.
	ClusterInfo []byte
	// ClockOffset is server time minus local time, from the HTTP Date header.
	ClockOffset time.Duration
	// Endpoint is the given endpoint that served the verified read.
	Endpoint string
	// Tried lists each given endpoint that was read, in order, with its last failure (empty
	// for the one that served).
	Tried []Attempt
}

// Attempt is one endpoint's part in a discovery.
type Attempt struct {
	Endpoint string
	// Error is the last failure reading from it; empty when it served.
	Error string
}

func (r *Request) defaults() {
	if r.Timeout == 0 {
		r.Timeout = 5 * time.Minute
	}
	if r.CallTimeout == 0 {
		r.CallTimeout = 10 * time.Second
	}
	if r.SignatureGrace == 0 {
		r.SignatureGrace = 5 * time.Second
	}
	if r.RefusalGrace == 0 {
		r.RefusalGrace = 20 * time.Second
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Logf == nil {
		r.Logf = func(string, ...any) {}
	}
}

// Token runs token discovery. The token secret is never sent anywhere: both reads of
// cluster-info are anonymous, and the token only checks the JWS locally.
//
// Identity comes before patience: every answer is vetted at once (its CA bundle against the
// pins, the answering server's certificate against the pinned CA) and refused on the first
// failure; only a server proven to be the cluster's is waited on for its signature.
func Token(ctx context.Context, req Request) (*Result, error) {
	req.defaults()
	eps := req.endpoints()
	for _, ep := range eps {
		if err := CheckEndpoint(ep); err != nil {
			return nil, operr.Wrap(operr.Usage, err, fmt.Sprintf("API server endpoint %q is unusable", ep), "give the endpoint as host:port, e.g. 10.0.0.1:6443")
		}
	}
	if len(req.Pins) == 0 && !req.UnsafeSkipCAVerification {
		return nil, operr.New(operr.Usage, "token discovery without --discovery-token-ca-cert-hash would trust any server",
			"pass --discovery-token-ca-cert-hash sha256:<hash> (print it with kjoin token create --print-join-command), or accept the risk with --discovery-token-unsafe-skip-ca-verification")
	}
	ctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()

	tried := &attempts{}
	insecure := func(*Request) *tls.Config {
		return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the peer is verified against the pinned CA in vet
	}
	first, err := req.fetchAny(ctx, eps, insecure, tried)
	if err != nil {
		return nil, err
	}
	res := &Result{ClusterInfo: first.kubeconfig, ClockOffset: first.clockOffset, Server: first.trust.server,
		CAData: pki.EncodeCerts(first.trust.cas), CAPin: Pin(first.trust.cas[0]), Endpoint: first.endpoint}
	if len(req.Pins) == 0 {
		req.Logf("CA verification skipped (unsafe): trusting CA %s from the signed cluster-info alone", res.CAPin)
		res.Tried = tried.list
		return res, nil
	}
	req.Logf("CA %s matches a given pin; re-reading cluster-info over TLS verified by it", res.CAPin)
	// Verified by verifyConnection: the pinned CA's chain first, then dates and host name.
	secure := func(r *Request) *tls.Config {
		return &tls.Config{InsecureSkipVerify: true, VerifyConnection: r.verifyConnection(first.trust.cas), ServerName: r.host()} //nolint:gosec // verified in VerifyConnection
	}
	// The endpoint that served first is read again first.
	second, err := req.fetchAny(ctx, append([]string{first.endpoint}, slices.DeleteFunc(slices.Clone(eps), func(e string) bool { return e == first.endpoint })...), secure, tried)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(second.kubeconfig, first.kubeconfig) {
		return nil, operr.New(operr.Trust, "cluster-info read over verified TLS differs from the first read",
			"someone may be intercepting the connection; retry, and check the network path to the API server")
	}
	res.Endpoint, res.Tried = second.endpoint, tried.list
	return res, nil
}

// endpoints lists the given endpoints in order, each once.
func (r *Request) endpoints() []string {
	var out []string
	for _, ep := range append([]string{r.Endpoint}, r.MoreEndpoints...) {
		if !slices.Contains(out, ep) {
			out = append(out, ep)
		}
	}
	return out
}

// attempts keeps each endpoint's last outcome, in the order first tried.
type attempts struct{ list []Attempt }

func (a *attempts) record(ep string, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for i := range a.list {
		if a.list[i].Endpoint == ep {
			a.list[i].Error = msg
			return
		}
	}
	a.list = append(a.list, Attempt{Endpoint: ep, Error: msg})
}

// fetchAny reads signed cluster-info from the first endpoint that answers as the cluster's API
// server. With one endpoint it is fetchSigned. With several, one that is down, refuses the
// connection or times out is left for the next, and a round in which none answered is
// followed by a pause; any other failure (an impostor's certificate, a bad token) ends the
// discovery at once: a list never weakens the pin.
func (r *Request) fetchAny(ctx context.Context, eps []string, tlsFor func(*Request) *tls.Config, tried *attempts) (*fetched, error) {
	bo := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: math.MaxInt32}
	var lastErr error
	var refusedSince time.Time
	for {
		var asked time.Duration // the longest Retry-After of this round
		for _, ep := range eps {
			at := *r
			at.Endpoint = ep
			f, err := at.fetchSigned(ctx, tlsFor(&at), len(eps) > 1)
			r.offset = at.offset
			tried.record(ep, err)
			if err == nil {
				f.endpoint = ep
				return f, nil
			}
			if !isTransient(err) {
				return nil, err
			}
			if final := r.refusal(err, &refusedSince); final != nil {
				return nil, final
			}
			lastErr = fmt.Errorf("%s: %w", ep, err)
			asked = max(asked, pauseAfter(0, err))
			r.Logf("cluster-info not readable from %s (%v); trying the next endpoint", ep, err)
		}
		select {
		case <-ctx.Done():
			return nil, operr.Wrap(operr.Timeout, lastErr, fmt.Sprintf("discovery timed out: none of the %d API server endpoints (%s) answered", len(eps), strings.Join(eps, ", ")),
				"check that at least one API server is up and reachable from this node, or raise timeouts.discovery")
		case <-r.Clock.After(max(bo.Step(), asked)):
		}
	}
}

// CheckEndpoint validates an API server endpoint: host:port with a non-empty host and a port
// in 1-65535.
func CheckEndpoint(endpoint string) error {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		if i := strings.LastIndex(endpoint, ":"); i > 0 && net.ParseIP(endpoint[:i]) != nil && strings.Contains(endpoint[:i], ":") {
			return fmt.Errorf("an IPv6 address with a port goes in brackets: [%s]:%s", endpoint[:i], endpoint[i+1:])
		}
		return fmt.Errorf("not host:port: %w", err)
	}
	if host == "" {
		return errors.New("the host is empty")
	}
	if strings.ContainsAny(host, " /\\?#@") {
		return fmt.Errorf("%q is not a host name or IP address", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number in 1-65535", port)
	}
	return nil
}

func (r *Request) host() string {
	h, _, _ := net.SplitHostPort(r.Endpoint)
	return h
}
