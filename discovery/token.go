// Package discovery establishes trust in a cluster before joining it: token discovery
// (anonymous cluster-info, detached JWS checked with the token, CA pinned by SPKI sha256,
// pinned re-fetch) and file/https discovery, as kubeadm does, with precise errors. It never
// sends a credential and knows nothing of the host: it writes no file.
package discovery

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/operr"
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
		CAData: EncodeCerts(first.trust.cas), CAPin: Pin(first.trust.cas[0])}
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

// trusted is what a vetted cluster-info answer establishes.
type trusted struct {
	server string
	// cas are the CAs to trust: exactly the pinned ones (all of them with unsafe skip).
	cas []*x509.Certificate
}

// vet checks one cluster-info answer before its signature is looked at: the kubeconfig names
// an https server and carries CAs, every CA is pinned, and the server that answered holds a
// certificate issued by a pinned CA for the endpoint's host. Any failure is final.
func (r *Request) vet(kubeconfig []byte, peers []*x509.Certificate) (*trusted, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, operr.Newf(operr.Trust, "cluster-info holds an unreadable kubeconfig: %s", Quote(err.Error()))
	}
	cluster, err := SelectCluster(cfg)
	if err != nil {
		return nil, operr.Newf(operr.Trust, "cluster-info names no usable cluster: %v", err).WithHint("check the kube-public/cluster-info ConfigMap on the control plane")
	}
	if err := CheckServerURL(cluster.Server); err != nil {
		return nil, operr.Newf(operr.Trust, "cluster-info names an unusable API server: %v", err).WithHint("check the kube-public/cluster-info ConfigMap on the control plane")
	}
	certs, err := ParseCerts(cluster.CertificateAuthorityData)
	if err != nil {
		return nil, operr.Newf(operr.Trust, "cluster-info carries no usable CA certificate: %s", Quote(err.Error()))
	}
	if len(r.Pins) == 0 {
		return &trusted{server: cluster.Server, cas: certs}, nil
	}
	pinned, unpinned := r.Pins.Select(certs)
	switch {
	case len(pinned) == 0:
		return nil, operr.Newf(operr.Trust,
			"the cluster CA does not match any --discovery-token-ca-cert-hash: the server presented %s", PinsOf(certs)).
			WithHint("check that you are joining the intended cluster; on its control plane print the right pin with kjoin token create --print-join-command")
	case len(unpinned) > 0:
		return nil, operr.Newf(operr.Trust,
			"cluster-info carries CA(s) no --discovery-token-ca-cert-hash pins: %s (subject %s)", PinsOf(unpinned), Quote(unpinned[0].Subject.String())).
			WithHint("a CA bundle is trusted only when every CA in it is pinned: during a CA rotation pass one --discovery-token-ca-cert-hash per CA; otherwise someone added a CA to cluster-info")
	}
	if err := r.verifyPeer(peers, pinned); err != nil {
		return nil, err
	}
	return &trusted{server: cluster.Server, cas: pinned}, nil
}

// verifyPeer checks that the server which answered proved a certificate issued by a pinned CA
// for the endpoint's host (the TLS handshake proved it holds the matching key). The chain is
// checked first, at a time inside the certificate's own validity: only a certificate the
// pinned CA issued is then asked for its dates and names, so an impostor's never become a
// message or a hint.
func (r *Request) verifyPeer(peers []*x509.Certificate, cas []*x509.Certificate) error {
	if len(peers) == 0 {
		return operr.New(operr.Trust, "the API server presented no certificate", "check that "+r.Endpoint+" is an API server of the cluster you mean to join")
	}
	leaf := peers[0]
	inter := x509.NewCertPool()
	for _, c := range peers[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: Pool(cas), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	chained := false
	for _, ca := range cas {
		// A time at which both the leaf and this CA claim to be valid.
		from, to := later(leaf.NotBefore, ca.NotBefore), earlier(leaf.NotAfter, ca.NotAfter)
		if !from.Before(to) {
			continue
		}
		opts.CurrentTime = from.Add(to.Sub(from) / 2)
		if _, err := leaf.Verify(opts); err == nil {
			chained = true
			break
		}
	}
	if !chained {
		return operr.New(operr.Trust, "the API server presented a certificate not signed by the pinned CA",
			"check that "+r.Endpoint+" is an API server of the cluster you mean to join")
	}
	opts.CurrentTime, opts.DNSName = r.Clock.Now(), r.host()
	if _, err := leaf.Verify(opts); err != nil {
		if e := r.identityError(err); e != nil {
			return e
		}
		return operr.Wrap(operr.Trust, err, "the API server certificate is not usable", "check that "+r.Endpoint+" is an API server of the cluster you mean to join")
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// verifyConnection checks a TLS connection's peer as verifyPeer does (chain first), for the
// pinned re-read: crypto/tls's own check would look at the names and dates first.
func (r *Request) verifyConnection(cas []*x509.Certificate) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error { return r.verifyPeer(cs.PeerCertificates, cas) }
}

// SelectCluster picks the cluster of a kubeconfig: the current context's, else the one named
// "" (kubeadm's cluster-info), else the only one. It never picks at random.
func SelectCluster(cfg *clientcmdapi.Config) (*clientcmdapi.Cluster, error) {
	if c := cfg.Contexts[cfg.CurrentContext]; c != nil {
		if cl := cfg.Clusters[c.Cluster]; cl != nil {
			return cl, nil
		}
		return nil, fmt.Errorf("the current context %s names cluster %s, which is not defined", Quote(cfg.CurrentContext), Quote(c.Cluster))
	}
	if cl := cfg.Clusters[""]; cl != nil {
		return cl, nil
	}
	if len(cfg.Clusters) == 1 {
		for _, cl := range cfg.Clusters {
			if cl != nil {
				return cl, nil
			}
		}
	}
	if len(cfg.Clusters) == 0 {
		return nil, errors.New("the kubeconfig defines no cluster")
	}
	return nil, fmt.Errorf("the kubeconfig defines %d clusters and no current context to choose one", len(cfg.Clusters))
}

// CheckServerURL requires an https URL with a host.
func CheckServerURL(server string) error {
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("server %s is not a URL", Quote(server))
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("server %s is not an https:// URL", Quote(server))
	}
	return nil
}

type fetched struct {
	kubeconfig  []byte
	clockOffset time.Duration
	trust       *trusted
}

// fetchSigned reads cluster-info until it carries a valid signature for the token. Every
// answer is vetted first; only a vetted server is waited on.
func (r *Request) fetchSigned(ctx context.Context, tlsCfg *tls.Config) (*fetched, error) {
	client := &http.Client{
		// Each call is bounded by its own context (r.get), which also tells a body cut short
		// by that deadline from a malformed one.
		Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment},
		// A redirect is answered, not followed: r.get refuses it at once.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	url := "https://" + r.Endpoint + "/api/v1/namespaces/" + metaPublic + "/configmaps/" + bootstrapapi.ConfigMapClusterInfo
	sigKey := bootstrapapi.JWSSignatureKeyPrefix + r.Token.ID
	var unsignedSince time.Time
	noSignatures := false
	// Retry every 200 ms at first, doubling to at most 2 s.
	bo := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: math.MaxInt32}
	var lastErr error
	vetted := false // some answer of this server passed vet: its identity is known
	for {
		ans, err := r.get(ctx, client, url)
		switch {
		case err != nil && !isTransient(err):
			return nil, err
		case err != nil:
			lastErr = err
			r.Logf("cluster-info not readable yet (%v); retrying", err)
		default:
			kc := ans.cm.Data[bootstrapapi.KubeConfigKey]
			if kc == "" {
				return nil, operr.New(operr.Trust, "cluster-info has no kubeconfig: this API server is not set up for token bootstrapping", "run kubeadm init phase bootstrap-token on the control plane")
			}
			tr, err := r.vet([]byte(kc), ans.peers)
			if err != nil {
				return nil, err
			}
			vetted = true
			sig, signed := ans.cm.Data[sigKey]
			if signed {
				if !jws.DetachedTokenIsValid(sig, kc, r.Token.ID, r.Token.Secret) {
					return nil, operr.Newf(operr.Auth,
						"the token secret does not match token id %q: cluster-info's signature for it does not verify", r.Token.ID).
						WithHint("check the token for typos, or create a new one on the control plane with kjoin token create")
				}
				return &fetched{kubeconfig: []byte(kc), clockOffset: ans.offset, trust: tr}, nil
			}
			others := signedTokenIDs(ans.cm.Data)
			noSignatures = len(others) == 0
			if !noSignatures && unsignedSince.IsZero() {
				unsignedSince = r.Clock.Now()
			}
			if noSignatures {
				// Nothing is signed yet: the controller-manager's bootstrapsigner has not run
				// (a cluster that just came up). Keep waiting, within the discovery timeout.
				unsignedSince = time.Time{}
			} else if r.Clock.Since(unsignedSince) >= r.SignatureGrace {
				// The signer is active and signs new tokens within a second or two: this
				// token is not one it knows.
				return nil, operr.Newf(operr.Auth,
					"token id %q is unknown to this cluster or has expired (cluster-info is signed for %d other token(s))", r.Token.ID, len(others)).
					WithHint("create a new token on the control plane with kjoin token create --print-join-command")
			}
			lastErr = fmt.Errorf("cluster-info is not signed for token id %q yet", r.Token.ID)
			r.Logf("%v; waiting for the controller-manager to sign it", lastErr)
		}
		select {
		case <-ctx.Done():
			if noSignatures {
				return nil, operr.Newf(operr.Timeout,
					"cluster-info carried no token signatures at all until the discovery timeout, so token id %q cannot be verified", r.Token.ID).
					WithHint("the controller-manager signs cluster-info (controllers bootstrapsigner): check that it runs, and that the token has usage-bootstrap-signing")
			}
			what := "discovery timed out reading cluster-info from " + r.Endpoint
			if !vetted {
				what += " (no answer from it was ever verified: its identity as the cluster's API server is unknown)"
			}
			return nil, operr.Wrap(operr.Timeout, lastErr, what, "check that the API server is up and reachable from this node, or raise timeouts.discovery")
		case <-r.Clock.After(bo.Step()):
		}
	}
}

const metaPublic = "kube-public"

func signedTokenIDs(data map[string]string) []string {
	var ids []string
	for k := range data {
		if id, ok := strings.CutPrefix(k, bootstrapapi.JWSSignatureKeyPrefix); ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// transientError marks a failure worth retrying.
type transientError struct{ err error }

func (t transientError) Error() string { return t.err.Error() }
func (t transientError) Unwrap() error { return t.err }

func isTransient(err error) bool {
	var t transientError
	return errors.As(err, &t)
}

type answer struct {
	cm     *corev1.ConfigMap
	peers  []*x509.Certificate
	offset time.Duration
}

func (r *Request) get(ctx context.Context, client *http.Client, url string) (*answer, error) {
	cctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(cctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Accept", "application/json")
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, r.classify(ctx, err)
	}
	defer resp.Body.Close()
	ans := &answer{}
	if resp.TLS != nil {
		ans.peers = resp.TLS.PeerCertificates
	}
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		ans.offset = d.Sub(r.Clock.Now())
		r.offset = ans.offset
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		if ctx.Err() != nil {
			return nil, r.classify(ctx, err)
		}
		return nil, transientError{err}
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, operr.Newf(operr.Trust, "the API server answered with a redirect (HTTP %d to %s); cluster-info is never read from elsewhere",
			resp.StatusCode, Quote(resp.Header.Get("Location"))).
			WithHint("give the API server's own host:port (the controlPlaneEndpoint), not a proxy or web server in front of it")
	case resp.StatusCode == http.StatusNotFound:
		return nil, operr.New(operr.Trust, "the cluster has no kube-public/cluster-info ConfigMap: this API server is not set up for token bootstrapping",
			"run kubeadm init phase bootstrap-token on the control plane, or use --discovery-file")
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, operr.Newf(operr.Auth,
			"the API server refused an anonymous read of cluster-info (HTTP %d)", resp.StatusCode).
			WithHint("the API server must allow anonymous reads of kube-public/cluster-info (kubeadm's Role kubeadm:bootstrap-signer-clusterinfo), or use --discovery-file")
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, transientError{fmt.Errorf("HTTP %d from %s", resp.StatusCode, url)}
	default:
		return nil, operr.Newf(operr.Trust, "unexpected HTTP %d reading cluster-info: %s", resp.StatusCode, Snippet(body))
	}
	cm := &corev1.ConfigMap{}
	if err := json.Unmarshal(body, cm); err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			// The call's deadline cut the body short (Go may end such a body without an
			// error): a slow answer, not a malformed one.
			return nil, transientError{fmt.Errorf("cluster-info cut short by the %s call timeout", r.CallTimeout)}
		}
		return nil, operr.Newf(operr.Trust, "cluster-info is not a ConfigMap (%s): %s", Quote(err.Error()), Snippet(body)).
			WithHint("check that the endpoint is a Kubernetes API server")
	}
	ans.cm = cm
	return ans, nil
}

// Snippet quotes at most the first 200 bytes of an unauthenticated response body for a
// message: enough to recognise it, never a flood of a stranger's bytes.
func Snippet(body []byte) string {
	const max = 200
	b := bytes.TrimSpace(body)
	if len(b) > max {
		return fmt.Sprintf("%q (%d more bytes)", b[:max], len(b)-max)
	}
	return fmt.Sprintf("%q", b)
}

// classify turns a transport error into a transient error or a precise operator error. Only
// the end of the whole discovery (ctx) is final; a single call that timed out is retried.
func (r *Request) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return operr.Wrap(operr.Timeout, err, "discovery timed out reading cluster-info from "+r.Endpoint, "check that the API server is up and reachable from this node")
	}
	if e, ok := operr.As(err); ok {
		return e // the pinned re-read's verifyConnection
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return operr.Wrap(operr.Trust, err, "cannot resolve the API server endpoint "+r.Endpoint, "check the name, or use an IP address")
	}
	// Connection refused/reset, unreachable, per-call timeouts, TLS handshakes cut short:
	// an API server that is (re)starting looks like this, so retry within the timeout.
	return transientError{err}
}

// identityError explains a certificate verification failure of a certificate whose chain to a
// pinned CA is proven (so its names and dates can be shown), or returns nil for other errors.
func (r *Request) identityError(err error) error {
	var hostErr x509.HostnameError
	if errors.As(err, &hostErr) && hostErr.Certificate != nil {
		var names []string
		for _, n := range hostErr.Certificate.DNSNames {
			names = append(names, Quote(n))
		}
		for _, ip := range hostErr.Certificate.IPAddresses {
			names = append(names, ip.String())
		}
		if len(names) > 10 {
			names = append(names[:10], fmt.Sprintf("and %d more", len(names)-10))
		}
		return operr.Newf(operr.Trust,
			"the API server certificate is not valid for %q; it is valid for: %s", r.host(), strings.Join(names, ", ")).
			WithHint("join through one of those names, or add this one to the API server certificate (ClusterConfiguration apiServer.certSANs)")
	}
	var invalid x509.CertificateInvalidError
	if errors.As(err, &invalid) && invalid.Reason == x509.Expired {
		c := invalid.Cert
		now := r.Clock.Now()
		skew := ""
		if r.offset != 0 {
			skew = fmt.Sprintf("; the API server's clock is %s ahead of this node's", r.offset.Round(time.Second))
		}
		return operr.Newf(operr.Trust,
			"the API server certificate is not valid at this node's time %s (valid %s to %s)%s",
			now.UTC().Format(time.RFC3339), c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339), skew).
			WithHint("fix this node's clock (e.g. enable NTP) and retry")
	}
	if errors.As(err, &invalid) {
		return operr.Wrap(operr.Trust, err, "the API server certificate is not usable", "check that "+r.Endpoint+" is an API server of the cluster you mean to join")
	}
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return operr.Wrap(operr.Trust, err, "the API server presented a certificate not signed by the pinned CA",
			"check that "+r.Endpoint+" is an API server of the cluster you mean to join")
	}
	return nil
}
