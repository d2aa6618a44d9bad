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
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"

	"kjoin.dev/kjoin/operr"
)

type fetched struct {
	kubeconfig  []byte
	clockOffset time.Duration
	trust       *trusted
	endpoint    string
}

// fetchSigned reads cluster-info from r.Endpoint until it carries a valid signature for the
// token. Every answer is vetted first; only a vetted server is waited on. With failOver, a
// transient failure (down, refused, timed out) is returned at once for the next endpoint.
func (r *Request) fetchSigned(ctx context.Context, tlsCfg *tls.Config, failOver bool) (*fetched, error) {
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
	var unsignedSince, refusedSince time.Time
	noSignatures := false
	// Retry every 200 ms at first, doubling to at most 2 s: a hand loop on the injected clock,
	// since each answer changes what the loop may still wait for (vetted, unsigned since).
	bo := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: math.MaxInt32}
	var lastErr error
	vetted := false // some answer of this server passed vet: its identity is known
	for {
		var pause time.Duration
		ans, err := r.get(ctx, client, url)
		switch {
		case err != nil && (failOver || !isTransient(err)):
			return nil, err
		case err != nil:
			if final := r.refusal(err, &refusedSince); final != nil {
				return nil, final
			}
			lastErr = err
			pause = pauseAfter(bo.Step(), err)
			r.Logf("cluster-info not readable yet (%v); retrying in %s", err, pause.Round(time.Millisecond))
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
			pause = bo.Step()
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
		case <-r.Clock.After(pause):
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

// transientError marks a failure worth retrying; after is how long the server asked the
// client to wait first (Retry-After), if it did.
type transientError struct {
	err   error
	after time.Duration
	// refused is the HTTP status (401 or 403) of a refused anonymous read: worth reading
	// again only within the request's RefusalGrace.
	refused int
}

// refusal is the final error for an API server that refused the anonymous read of
// cluster-info since refusedSince (zero: err is no refusal); nil while that is shorter than
// RefusalGrace, and for other errors. It sets *since at the first refusal.
func (r *Request) refusal(err error, since *time.Time) error {
	var t transientError
	if !errors.As(err, &t) || t.refused == 0 {
		return nil
	}
	if since.IsZero() {
		*since = r.Clock.Now()
	}
	if r.Clock.Since(*since) < r.RefusalGrace {
		return nil
	}
	return operr.Newf(operr.Auth,
		"the API server refused an anonymous read of cluster-info (HTTP %d), still after %s", t.refused, r.RefusalGrace).
		WithHint("the API server must allow anonymous reads of kube-public/cluster-info (kubeadm's Role kubeadm:bootstrap-signer-clusterinfo, and --anonymous-auth), or use --discovery-file")
}

// maxRetryAfter bounds a server's Retry-After: a longer one is the discovery timeout's to end.
const maxRetryAfter = 5 * time.Minute

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date (RFC 9110 10.2.3).
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		d = time.Duration(n) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	return max(0, min(d, maxRetryAfter)), true
}

// pauseAfter is the pause before the next read: the backoff's step, or longer when the
// server asked for longer.
func pauseAfter(step time.Duration, err error) time.Duration {
	var t transientError
	if errors.As(err, &t) && t.after > step {
		return t.after
	}
	return step
}

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
		return nil, transientError{err: err}
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
		// Read again for a while (fetchSigned): final only after r.RefusalGrace.
		return nil, transientError{err: fmt.Errorf("HTTP %d from %s: the anonymous read of cluster-info was refused", resp.StatusCode, url), refused: resp.StatusCode}
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		te := transientError{err: fmt.Errorf("HTTP %d from %s", resp.StatusCode, url)}
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), r.Clock.Now()); ok {
			te.after = d
			te.err = fmt.Errorf("HTTP %d from %s (retry after %s)", resp.StatusCode, url, d)
		}
		return nil, te
	default:
		return nil, operr.Newf(operr.Trust, "unexpected HTTP %d reading cluster-info: %s", resp.StatusCode, Snippet(body))
	}
	cm := &corev1.ConfigMap{}
	if err := json.Unmarshal(body, cm); err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			// The call's deadline cut the body short (Go may end such a body without an
			// error): a slow answer, not a malformed one.
			return nil, transientError{err: fmt.Errorf("cluster-info cut short by the %s call timeout", r.CallTimeout)}
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
	return transientError{err: err}
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
