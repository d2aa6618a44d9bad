package phases

import (
	"crypto/x509"
	"net/http"
	"strings"
	"testing"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/operr"
)

func TestWaitControlPlaneNamesTheUnhealthyComponent(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.env.HTTPClient = func(*x509.CertPool) *http.Client {
		return &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			code := http.StatusOK
			if r.URL.Port() == "10257" {
				code = http.StatusServiceUnavailable
			}
			return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: http.NoBody, Request: r, Header: http.Header{}}, nil
		})}
	}
	s := &State{Opts: joinrequest.Options{NodeName: "cp2", ControlPlane: true, AdvertiseAddress: "10.0.0.12", BindPort: 6443, Timeouts: joinrequest.DefaultTimeouts()},
		Discovery: &discovery.Result{CAData: h.server.CAPEM}}
	err := runPhase(WaitControlPlane, h.env, s)
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "kube-controller-manager is not healthy") || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(h.out.String(), "kube-apiserver is healthy") {
		t.Errorf("the API server check did not pass first:\n%s", h.out)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
