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
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/token"
)

// Request describes a token discovery.
type Request struct {
	// Endpoint is host:port of an API server of the cluster.
	Endpoint string
	Token    token.Token
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
	Clock          clock.Clock
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
	if err := CheckEndpoint(req.Endpoint); err != nil {
		return nil, operr.Wrap(operr.Usage, err, fmt.Sprintf("API server endpoint %q is unusable", req.Endpoint), "give the endpoint as host:port, e.g. 10.0.0.1:6443")
	}
	if len(req.Pins) == 0 && !req.UnsafeSkipCAVerification {
		return nil, operr.New(operr.Usage, "token discovery without --discovery-token-ca-cert-hash would trust any server",
			"pass --discovery-token-ca-cert-hash sha256:<hash> (print it with kjoin token create --print-join-command), or accept the risk with --discovery-token-unsafe-skip-ca-verification")
	}
	ctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()

	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the peer is verified against the pinned CA in vet
	first, err := req.fetchSigned(ctx, insecure)
	if err != nil {
		return nil, err
	}
	res := &Result{ClusterInfo: first.kubeconfig, ClockOffset: first.clockOffset, Server: first.trust.server,
		CAData: pki.EncodeCerts(first.trust.cas), CAPin: Pin(first.trust.cas[0])}
	if len(req.Pins) == 0 {
		req.Logf("CA verification skipped (unsafe): trusting CA %s from the signed cluster-info alone", res.CAPin)
		return res, nil
	}
	req.Logf("CA %s matches a given pin; re-reading cluster-info over TLS verified by it", res.CAPin)
	// Verified by verifyConnection: the pinned CA's chain first, then dates and host name.
	secure := &tls.Config{InsecureSkipVerify: true, VerifyConnection: req.verifyConnection(first.trust.cas), ServerName: req.host()} //nolint:gosec // verified in VerifyConnection
	second, err := req.fetchSigned(ctx, secure)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(second.kubeconfig, first.kubeconfig) {
		return nil, operr.New(operr.Trust, "cluster-info read over verified TLS differs from the first read",
			"someone may be intercepting the connection; retry, and check the network path to the API server")
	}
	return res, nil
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
