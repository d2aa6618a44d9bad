package tlsbootstrap

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// newClient returns a fake clientset that names created CSRs and then applies decide to them.
func newClient(t *testing.T, decide func(*certificatesv1.CertificateSigningRequest)) *fake.Clientset {
	t.Helper()
	c := fake.NewClientset()
	c.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		return false, csr, nil
	})
	go func() {
		for {
			list, err := c.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
			if err == nil && len(list.Items) > 0 {
				csr := list.Items[0].DeepCopy()
				decide(csr)
				_, _ = c.CertificatesV1().CertificateSigningRequests().UpdateStatus(context.Background(), csr, metav1.UpdateOptions{})
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return c
}

func request(t *testing.T, c *fake.Clientset, timeout time.Duration) Request {
	key, err := pki.NewECKey()
	if err != nil {
		t.Fatal(err)
	}
	return Request{Client: c, NodeName: "w1", Key: key, Timeout: timeout, Interval: 10 * time.Millisecond, Clock: clock.RealClock{}}
}

func TestIssued(t *testing.T) {
	c := newClient(t, func(csr *certificatesv1.CertificateSigningRequest) {
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
		csr.Status.Certificate = []byte("CERT")
	})
	r := request(t, c, 5*time.Second)
	name, err := Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Wait(context.Background(), r, name)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Name("w1", r.Key); string(got.CertPEM) != "CERT" || got.CSRName != want || !strings.HasPrefix(want, "kjoin-w1-") {
		t.Errorf("unexpected %+v", got)
	}
	csr, _ := c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		t.Errorf("signer %s", csr.Spec.SignerName)
	}
	if len(csr.Spec.Usages) != 2 || csr.Spec.Usages[0] != certificatesv1.UsageDigitalSignature || csr.Spec.Usages[1] != certificatesv1.UsageClientAuth {
		t.Errorf("usages %v", csr.Spec.Usages)
	}
	b, _ := pem.Decode(csr.Spec.Request)
	x, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil || x.Subject.CommonName != "system:node:w1" || len(x.Subject.Organization) != 1 || x.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %v %v", x.Subject, err)
	}
}

func TestDeniedNamesCSRAndReason(t *testing.T) {
	c := newClient(t, func(csr *certificatesv1.CertificateSigningRequest) {
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "PolicyDenied", Message: "not on my watch"}}
	})
	r := request(t, c, 5*time.Second)
	name, _ := Create(context.Background(), r)
	_, err := Wait(context.Background(), r, name)
	if err == nil || operr.CodeOf(err) != operr.Auth || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "PolicyDenied") {
		t.Fatalf("got %v", err)
	}
}

func TestNotApprovedNamesAutoApproveBinding(t *testing.T) {
	c := newClient(t, func(*certificatesv1.CertificateSigningRequest) {})
	r := request(t, c, 300*time.Millisecond)
	name, _ := Create(context.Background(), r)
	_, err := Wait(context.Background(), r, name)
	if err == nil || operr.CodeOf(err) != operr.Timeout || !strings.Contains(operr.HintOf(err), AutoApproveBinding) {
		t.Fatalf("got %v (hint %q)", err, operr.HintOf(err))
	}
}

func TestApprovedNotSigned(t *testing.T) {
	c := newClient(t, func(csr *certificatesv1.CertificateSigningRequest) {
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	})
	r := request(t, c, 300*time.Millisecond)
	name, _ := Create(context.Background(), r)
	_, err := Wait(context.Background(), r, name)
	if err == nil || !strings.Contains(err.Error(), "approved but not signed") {
		t.Fatalf("got %v", err)
	}
}

// Under load a create's answer can be lost (client timeout) after the API server made the
// CSR: the retry finds it by its key-derived name and uses it; nothing is created twice.
// Throttling and server timeouts are retried too.
func TestCreateRetriesAndFindsALostCreate(t *testing.T) {
	c := fake.NewClientset()
	calls := 0
	c.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		switch calls {
		case 1:
			return true, nil, apierrors.NewTooManyRequests("slow down", 1)
		case 2:
			return true, nil, apierrors.NewServerTimeout(certificatesv1.Resource("certificatesigningrequests"), "create", 1)
		case 3: // created, but the answer is lost
			csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
			if err := c.Tracker().Create(certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests"), csr, ""); err != nil {
				t.Fatal(err)
			}
			return true, nil, &url.Error{Op: "Post", URL: "https://cp:6443", Err: errors.New("net/http: request canceled (Client.Timeout exceeded while awaiting headers)")}
		}
		return false, nil, nil
	})
	r := request(t, c, 30*time.Second)
	fc := clocktesting.NewFakeClock(time.Now())
	r.Clock = fc
	done := make(chan struct{})
	defer close(done)
	go func() { // end each back-off wait, and only a wait: 3 waits of 6 s stay inside the 30 s
		for {
			select {
			case <-done:
				return
			default:
			}
			if fc.HasWaiters() {
				fc.Step(6 * time.Second)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	name, err := Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := c.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if want, _ := Name("w1", r.Key); name != want || len(list.Items) != 1 || calls != 4 {
		t.Errorf("name %s (want %s), %d CSRs, %d creates", name, want, len(list.Items), calls)
	}

	// A non-passing error is not retried.
	c2 := fake.NewClientset()
	c2.PrependReactor("create", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewBadRequest("no")
	})
	if _, err := Create(context.Background(), request(t, c2, time.Second)); err == nil || Transient(err) {
		t.Errorf("a bad request: %v", err)
	}
}

func TestTransient(t *testing.T) {
	gr := certificatesv1.Resource("certificatesigningrequests")
	for _, err := range []error{
		apierrors.NewTooManyRequests("throttled", 1),
		apierrors.NewServerTimeout(gr, "create", 1),
		apierrors.NewTimeoutError("timeout", 1),
		apierrors.NewInternalError(errors.New("boom")),
		apierrors.NewServiceUnavailable("starting"),
		&url.Error{Op: "Get", URL: "https://cp:6443", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}},
		&url.Error{Op: "Get", URL: "https://cp:6443", Err: errors.New("net/http: request canceled (Client.Timeout exceeded while awaiting headers)")},
		context.DeadlineExceeded,
		// A connection dropped under load while the answer was on its way (storm of 800).
		&url.Error{Op: "Post", URL: "https://cp:6443", Err: errors.New("http2: client connection lost")},
	} {
		if !Transient(err) {
			t.Errorf("%v is not transient", err)
		}
	}
	for _, err := range []error{nil, apierrors.NewUnauthorized("no"), apierrors.NewForbidden(gr, "x", errors.New("no")), apierrors.NewBadRequest("bad"), apierrors.NewAlreadyExists(gr, "x")} {
		if Transient(err) {
			t.Errorf("%v is transient", err)
		}
	}
}

// client-go's own rate limiter refusing to wait past a call's deadline (storm of 800, 2026-12-06:
// its retries after 429s had spent the call's 10 s) is a passing client-side timeout: retried.
// The error is client-go's own, made by a real client whose limiter has no token left.
func TestRateLimiterRefusalIsTransient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"w1"}}`))
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 0.001, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "would exceed context deadline") {
		t.Fatalf("the limiter's refusal was not produced: %v", err)
	}
	if !Transient(err) {
		t.Errorf("%v is not transient", err)
	}
}
