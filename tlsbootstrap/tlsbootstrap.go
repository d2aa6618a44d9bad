// Package tlsbootstrap obtains a kubelet client certificate the way the kubelet would, but
// from the join tool: a local key, a CertificateSigningRequest authenticated with the
// bootstrap token, and a precise account of what happened to it (approved, denied, failed,
// or never signed), and verifies what the cluster issued. It writes no file: the phase
// installs what it returns.
package tlsbootstrap

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	certificatesclient "k8s.io/client-go/kubernetes/typed/certificates/v1"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/token"
)

// WatchFor is how long one watch of the CSR lasts before the server ends it and it is made
// again from the last version seen: a join waiting minutes in a storm makes one a minute.
const WatchFor = time.Minute

// AutoApproveBinding is the ClusterRoleBinding kubeadm creates so that the controller-manager
// approves kubelet client CSRs made with a bootstrap token.
const AutoApproveBinding = "kubeadm:node-autoapprove-bootstrap"

// Request asks for a kubelet client certificate.
type Request struct {
	Client kubernetes.Interface
	// Watcher makes the CSR's watch (nil: Client): a client without the per-request timeout
	// Client has, which would end each watch after it. Each watch asks the server to end it
	// after WatchFor and is cancelled here a little later (a connection gone silent).
	Watcher  kubernetes.Interface
	NodeName string
	Key      crypto.Signer
	Timeout  time.Duration
	// Interval is the first pause after a failed read or watch of the CSR; it doubles (with
	// jitter) up to 5 s while they keep failing, so a throttled control plane is not asked
	// again at a fixed rate.
	Interval time.Duration
	Clock    clock.Clock
	// Logf receives progress lines; may be nil.
	Logf func(format string, args ...any)
	// Announce prints a line the operator must see whatever the verbosity (nil: Logf), such as
	// who decides on the CSR when the token is bound to this node.
	Announce func(format string, a ...any)
}

// Issued is a signed certificate.
type Issued struct {
	CSRName  string
	CertPEM  []byte
	Approved time.Duration // from creation to approval
	Signed   time.Duration // from creation to certificate
}

// NewCSR returns the PEM CSR for a node: CN system:node:<name>, O system:nodes.
func NewCSR(nodeName string, key crypto.Signer) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// Name is the CSR name for a node's key: derived from the key, so that a create whose answer
// was lost (a client timeout under load) is found again, not made twice.
func Name(nodeName string, key crypto.Signer) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	prefix := "kjoin-" + nodeName
	if len(prefix) > 240 {
		prefix = prefix[:240]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:12], nil
}

// Create submits the node's CSR and returns its name. Passing refusals (throttling, timeouts,
// an API server restarting) are retried with back-off until r.Timeout; a create whose answer
// was lost finds its CSR by name and checks that it asks for this key. Not client-go's
// csr.RequestCertificate: it makes one create and returns its first error, where a bootstrap
// storm answers 429 and kjoin must back off and retry (its reuse of an existing CSR, by name,
// subject and key, is what kjoin does too).
func Create(ctx context.Context, r Request) (string, error) {
	csr, err := Submit(ctx, r)
	if err != nil {
		return "", err
	}
	return csr.Name, nil
}

// Submit is Create that returns the CSR as the API server answered it (its groups, its
// resource version), for WaitCreated to watch from without reading it again.
func Submit(ctx context.Context, r Request) (*certificatesv1.CertificateSigningRequest, error) {
	csrPEM, err := NewCSR(r.NodeName, r.Key)
	if err != nil {
		return nil, fmt.Errorf("create CSR: %w", err)
	}
	name, err := Name(r.NodeName, r.Key)
	if err != nil {
		return nil, fmt.Errorf("create CSR: %w", err)
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if _, isRSA := r.Key.Public().(interface{ Size() int }); isRSA {
		usages = append(usages, certificatesv1.UsageKeyEncipherment)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrPEM,
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     usages,
		},
	}
	if r.Logf == nil {
		r.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	csrs := r.Client.CertificatesV1().CertificateSigningRequests()
	var made *certificatesv1.CertificateSigningRequest
	err = Retry(ctx, r.Clock, r.Clock.Now().Add(r.Timeout), r.Logf, "create CSR "+name, func(ctx context.Context) error {
		created, err := csrs.Create(ctx, csr, metav1.CreateOptions{})
		if err == nil {
			made = created
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		existing, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if merr := Matches(existing, r.Key); merr != nil {
			return operr.Wrap(operr.Other, merr, "a CSR named "+name+" already exists and does not ask for this node's key", "delete it (kubectl delete csr "+name+") and run the join again")
		}
		r.Logf("CSR %s already exists for this key (an earlier answer was lost); using it", name)
		made = existing
		return nil
	})
	switch {
	case err == nil:
		return made, nil
	case apierrors.IsUnauthorized(err):
		return nil, operr.Wrap(operr.Auth, err, "the API server rejected the bootstrap token", "the token may have expired or been deleted: create a new one with kjoin token create")
	case apierrors.IsForbidden(err):
		return nil, operr.Wrap(operr.Auth, err, "the bootstrap token may not create CertificateSigningRequests",
			"kubeadm binds ClusterRole system:node-bootstrapper to group system:bootstrappers:kubeadm:default-node-token (ClusterRoleBinding kubeadm:kubelet-bootstrap); check it and the token's auth-extra-groups")
	case Transient(err):
		return nil, operr.Wrap(operr.Timeout, err, fmt.Sprintf("could not create CSR %s within %s", name, r.Timeout), "the API server is overloaded or unreachable; run the join again")
	}
	if _, ok := operr.As(err); ok {
		return nil, err
	}
	return nil, fmt.Errorf("create CertificateSigningRequest: %w", err)
}

// Retry calls fn until it returns an error that is not Transient (or nil), with Backoff
// between calls; at the deadline (on clk) or when ctx ends it returns fn's last error (not
// retry.OnError: that sleeps on the real clock and has no deadline, only a step count).
func Retry(ctx context.Context, clk clock.Clock, deadline time.Time, logf func(string, ...any), what string, fn func(context.Context) error) error {
	bo := Backoff()
	for {
		err := fn(ctx)
		if !Transient(err) || !clk.Now().Before(deadline) {
			return err
		}
		logf("%s: %v (retrying)", what, err)
		select {
		case <-ctx.Done():
			return err
		case <-clk.After(bo.Step()):
		}
	}
}

// Backoff is the retry schedule for passing API errors: from 250 ms, doubling with jitter, at
// most 4 s apart (a loaded API server gets room, a restarted one is found quickly).
func Backoff() wait.Backoff {
	return wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.3, Cap: 4 * time.Second, Steps: math.MaxInt32}
}

// Transient reports whether an API error is passing: throttling (429), server timeouts and
// errors, an unreachable or restarting API server, a connection lost under load, a request
// that timed out on the client (its rate limiter's wait included).
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	// client-go's own rate limiter refusing to wait past the call's deadline (its retries
	// after 429s spent the call's time): a call that timed out on this side.
	msg := err.Error()
	return strings.Contains(msg, "Client.Timeout exceeded") || strings.Contains(msg, "TLS handshake timeout") ||
		strings.Contains(msg, "client rate limiter Wait returned an error")
}

// ErrFinal marks a CSR that can never be issued (denied, failed or gone): a resumed join must
// not pick it up again.
var ErrFinal = errors.New("the certificate signing request reached a final state without a certificate")

// Matches reports whether an existing CSR asks for key's public key (a resumed join's CSR
// must be the one its kept key made).
func Matches(csr *certificatesv1.CertificateSigningRequest, key crypto.Signer) error {
	b, _ := pem.Decode(csr.Spec.Request)
	if b == nil {
		return errors.New("the CSR holds no PEM request")
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return fmt.Errorf("parse the CSR's request: %w", err)
	}
	if !publicKeysEqual(req.PublicKey, key.Public()) {
		return errors.New("the CSR asks for another public key than the one this node kept")
	}
	return nil
}

// Verify checks the certificate the cluster issued before it is installed: the leaf holds the
// node's own public key, the subject is CN=system:node:<name>, O=system:nodes, it allows
// client authentication, and it chains to one of the trusted (pinned) CAs at now.
func Verify(certPEM []byte, key crypto.Signer, nodeName string, roots *x509.CertPool, now time.Time) error {
	var chain []*x509.Certificate
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Errorf("parse the issued certificate: %w", err)
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return errors.New("the issued certificate holds no PEM certificate")
	}
	leaf := chain[0]
	var problems []string
	if !publicKeysEqual(leaf.PublicKey, key.Public()) {
		problems = append(problems, "it is for another public key than this node's")
	}
	if cn := leaf.Subject.CommonName; cn != "system:node:"+nodeName {
		problems = append(problems, fmt.Sprintf("its subject is %q, not system:node:%s", cn, nodeName))
	}
	if len(leaf.Subject.Organization) != 1 || leaf.Subject.Organization[0] != "system:nodes" {
		problems = append(problems, fmt.Sprintf("its organization is %q, not [system:nodes]", leaf.Subject.Organization))
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		problems = append(problems, fmt.Sprintf("it does not verify as a client certificate of the cluster CA: %v", err))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ka, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ka.Equal(b)
}

// Wait waits until the named CSR is issued, and explains exactly why when it is not (not
// csr.WaitForCertificate, whose answer on a timeout is only "timed out": kjoin says whether the
// CSR was denied, failed, approved but never signed, or never approved).
func Wait(ctx context.Context, r Request, name string) (*Issued, error) {
	return waitFrom(ctx, r, name, nil)
}

// WaitCreated is Wait for the CSR Submit returned: it starts from that answer and watches from
// its version, without reading the CSR first (one request less per join; a bootstrap storm
// is made of these).
func WaitCreated(ctx context.Context, r Request, csr *certificatesv1.CertificateSigningRequest) (*Issued, error) {
	return waitFrom(ctx, r, csr.Name, csr)
}

// waitFrom is Wait starting from seen (when not nil) as its first read.
func waitFrom(ctx context.Context, r Request, name string, seen *certificatesv1.CertificateSigningRequest) (*Issued, error) {
	if r.Interval == 0 {
		r.Interval = 200 * time.Millisecond
	}
	if r.Logf == nil {
		r.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	start := r.Clock.Now()
	out := &Issued{CSRName: name}
	// check reports whether the CSR reached a final state (issued, denied, failed).
	check := func(csr *certificatesv1.CertificateSigningRequest) (bool, error) {
		for _, c := range csr.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case certificatesv1.CertificateDenied:
				return true, &operr.Error{Code: operr.Auth, Err: ErrFinal, Hint: "inspect it with kubectl describe csr " + name + "; an approver denied this node's certificate. The next run creates a new CSR",
					What: fmt.Sprintf("CSR %s was denied (reason %q: %s)", name, c.Reason, c.Message)}
			case certificatesv1.CertificateFailed:
				return true, &operr.Error{Code: operr.Other, Err: ErrFinal, Hint: "check the controller-manager's logs (csrsigning) on the control plane. The next run creates a new CSR",
					What: fmt.Sprintf("CSR %s failed (reason %q: %s)", name, c.Reason, c.Message)}
			case certificatesv1.CertificateApproved:
				if out.Approved == 0 {
					out.Approved = r.Clock.Since(start)
					r.Logf("CSR %s approved after %s", name, out.Approved.Round(time.Millisecond))
				}
			}
		}
		if len(csr.Status.Certificate) > 0 {
			out.Signed = r.Clock.Since(start)
			out.CertPEM = csr.Status.Certificate
			return true, nil
		}
		return false, nil
	}
	csrs := r.Client.CertificatesV1().CertificateSigningRequests()
	watcher := r.Watcher
	if watcher == nil {
		watcher = r.Client
	}
	watched := watcher.CertificatesV1().CertificateSigningRequests()
	bound := false
	// One watch, re-established from the last version seen when the server ends it; the CSR
	// is read (GET) only at the start and after a failure, and failures are paced by a
	// back-off with jitter that a success resets.
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: r.Interval, Factor: 2, Jitter: 0.5, Cap: 5 * time.Second, Steps: math.MaxInt32}
	}
	bo := newBackoff()
	watching, rv := false, ""
	for {
		var csr *certificatesv1.CertificateSigningRequest
		var err error
		switch {
		case watching:
		case seen != nil:
			csr, seen = seen, nil
		default:
			csr, err = csrs.Get(ctx, name, metav1.GetOptions{})
		}
		switch {
		case watching:
			done, last, ok, ferr := watchUntilFinal(ctx, watched, name, rv, check)
			if done {
				if ferr != nil {
					return nil, ferr
				}
				return out, nil
			}
			switch {
			case !ok:
				watching = false // the watch failed: read the CSR again after a pause
			case last != rv && ctx.Err() == nil:
				// The server ended a watch that had moved on: watch again at once from there.
				rv, bo = last, newBackoff()
				continue
			default:
				// Ended with nothing new: watch again from the same version after a pause
				// (a server that ends watches at once is not asked in a loop).
			}
		case err == nil:
			bo = newBackoff()
			if !bound && slices.Contains(csr.Spec.Groups, token.BoundGroup) {
				bound = true
				announce := r.Announce
				if announce == nil {
					announce = r.Logf
				}
				announce("the token is one of kjoin's bound tokens (group %s: one join): kjoin's approver, not the controller-manager, decides on CSR %s; waiting for it", token.BoundGroup, name)
			}
			if done, err := check(csr); done {
				if err != nil {
					return nil, err
				}
				return out, nil
			}
			// Watch for the approval and the certificate rather than polling: both land
			// within tens of milliseconds on a healthy control plane.
			watching, rv = true, csr.ResourceVersion
			continue
		case apierrors.IsNotFound(err):
			return nil, &operr.Error{Code: operr.Other, Err: ErrFinal, Hint: "it may have been garbage-collected or deleted; run the join again (it creates a new CSR)",
				What: fmt.Sprintf("CSR %s disappeared before it was signed", name)}
		case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
			return nil, operr.Wrap(operr.Auth, err, "the bootstrap token may not read CSR "+name, "check the ClusterRole system:node-bootstrapper binding")
		}
		select {
		case <-ctx.Done():
			if out.Approved == 0 && bound {
				return nil, operr.Newf(operr.Timeout,
					"CSR %s, made with a token bound to this node, was not approved within %s", name, r.Timeout).
					WithHint("kjoin's approver decides on it: start it on a control plane (kjoin approver, or systemctl start kjoin-approver), then run the join again; kubectl describe csr " + name + " shows it pending")
			}
			if out.Approved == 0 {
				return nil, operr.Newf(operr.Timeout,
					"CSR %s was not approved within %s", name, r.Timeout).
					WithHint(fmt.Sprintf("kubeadm clusters auto-approve these CSRs through ClusterRoleBinding %s (group system:bootstrappers:kubeadm:default-node-token); check it exists and the controller-manager runs, or approve by hand: kubectl certificate approve %s", AutoApproveBinding, name))
			}
			return nil, operr.Newf(operr.Timeout,
				"CSR %s was approved but not signed within %s", name, r.Timeout).
				WithHint("the controller-manager's csrsigning controller signs them with the cluster CA (--cluster-signing-cert-file/--cluster-signing-key-file); check it runs")
		case <-r.Clock.After(bo.Step()):
		}
	}
}

// watchUntilFinal watches one CSR from resourceVersion until check reports a final state.
// When the watch ends first it returns done=false, ok=true and the last resourceVersion seen,
// to watch again from (bookmarks included); ok=false when the watch could not be made or
// ended with an error or the CSR's deletion (the caller then reads the CSR again).
func watchUntilFinal(ctx context.Context, csrs certificatesclient.CertificateSigningRequestInterface, name, rv string,
	check func(*certificatesv1.CertificateSigningRequest) (bool, error)) (done bool, last string, ok bool, err error) {
	// The server ends the watch after WatchFor; this side gives it a few seconds more, for
	// a connection that went silent (the caller's ctx still bounds it: ctx.Err is checked).
	wctx, cancel := context.WithTimeout(ctx, WatchFor+5*time.Second)
	defer cancel()
	secs := int64(WatchFor / time.Second)
	w, werr := csrs.Watch(wctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &secs})
	if werr != nil {
		return false, "", false, nil
	}
	defer w.Stop()
	last = rv
	for {
		var ev watch.Event
		select {
		case <-wctx.Done():
			return false, last, true, nil
		case e, open := <-w.ResultChan():
			if !open {
				return false, last, true, nil
			}
			ev = e
		}
		switch ev.Type {
		case watch.Error, watch.Deleted:
			return false, "", false, nil // read it again: it is gone (named so), or its version is
		case watch.Bookmark:
			if m, merr := meta.Accessor(ev.Object); merr == nil && m.GetResourceVersion() != "" {
				last = m.GetResourceVersion()
			}
			continue
		}
		csr, isCSR := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !isCSR {
			return false, "", false, nil
		}
		if csr.Name != name {
			continue
		}
		last = csr.ResourceVersion
		if done, err := check(csr); done {
			return true, last, true, err
		}
	}
}

// IsNodeCSR reports whether csr is a kubelet client certificate request of node: kjoin's own
// (named exactly as Name names it) or the kubelet's (sent as system:node:<node>), asking the
// kubelet client signer for CN=system:node:<node>. A CSR that merely starts with the node's
// name, or names it without asking for its identity, is not the node's.
func IsNodeCSR(csr *certificatesv1.CertificateSigningRequest, node string) bool {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return false
	}
	prefix := "kjoin-" + node
	if len(prefix) > 240 {
		prefix = prefix[:240]
	}
	suffix, named := strings.CutPrefix(csr.Name, prefix+"-")
	if named {
		_, err := hex.DecodeString(suffix)
		named = len(suffix) == 12 && err == nil && strings.ToLower(suffix) == suffix
	}
	if !named && csr.Spec.Username != "system:node:"+node {
		return false
	}
	return AsksFor(csr, node)
}

// AsksFor reports whether csr's request is for CN=system:node:<node>, whatever its signer
// and sender.
func AsksFor(csr *certificatesv1.CertificateSigningRequest, node string) bool {
	b, _ := pem.Decode(csr.Spec.Request)
	if b == nil {
		return false
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	return err == nil && req.Subject.CommonName == "system:node:"+node
}

// IsServingCSROf reports whether csr is node's own request for a kubelet serving certificate
// (signer kubernetes.io/kubelet-serving, sent by system:node:<node> for CN=system:node:<node>),
// as a kubelet with serverTLSBootstrap sends at start and at each renewal.
func IsServingCSROf(csr *certificatesv1.CertificateSigningRequest, node string) bool {
	return csr.Spec.SignerName == certificatesv1.KubeletServingSignerName && csr.Spec.Username == "system:node:"+node && AsksFor(csr, node)
}

// IsBootstrapCSRFor reports whether csr was sent with a bootstrap token to the kubelet
// client signer for CN=system:node:<node>, as a kubelet's first request after kubeadm join
// is. Anyone holding the token could have sent it, so it is not proof of the node (verify
// does not count it), but once the node leaves no such request has a use.
func IsBootstrapCSRFor(csr *certificatesv1.CertificateSigningRequest, node string) bool {
	return csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") && AsksFor(csr, node)
}
