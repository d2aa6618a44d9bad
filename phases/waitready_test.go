package phases

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

func notReadyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime network not ready: NetworkReady=false"}}}}
}

func leaseOf(name string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"}, Spec: coordinationv1.LeaseSpec{RenewTime: &now}}
}

// A Node that registers but stays NotReady is a warning naming the blocking condition, or a
// timeout with --wait-ready.
func TestWaitReadyNamesTheBlockingCondition(t *testing.T) {
	t.Parallel()
	for _, require := range []bool{false, true} {
		h := newTestHost(t, notReadyNode("w1"), leaseOf("w1"))
		o := h.options(t)
		o.WaitReady, o.WaitReadyTimeout = require, time.Minute
		s := &State{Opts: o, NodeClient: h.client, Started: h.env.Clock.Now()}
		err := runPhase(WaitReady, h.env, s)
		if require {
			if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "NetworkReady=false") {
				t.Errorf("--wait-ready: %v", err)
			}
			continue
		}
		if err != nil || s.Ready || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "NetworkReady=false") {
			t.Errorf("err %v ready %v warnings %q", err, s.Ready, s.Warnings)
		}
	}
}

func TestWaitReadyTimesOutWithoutRegistration(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t), NodeClient: h.client, Started: h.env.Clock.Now()}
	err := runPhase(WaitReady, h.env, s)
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), `did not register Node "w1"`) {
		t.Fatalf("got %v", err)
	}
}

// The join does not wait for the kubelet's first Lease: Ready without a Lease succeeds and
// reports the Lease as pending.
func TestWaitReadyDoesNotWaitForTheLease(t *testing.T) {
	t.Parallel()
	ready := notReadyNode("w1")
	ready.Status.Conditions[0].Status = corev1.ConditionTrue
	h := newTestHost(t, ready)
	s := &State{Opts: h.options(t), NodeClient: h.client, Started: h.env.Clock.Now()}
	if err := runPhase(WaitReady, h.env, s); err != nil {
		t.Fatal(err)
	}
	if !s.Ready || s.LeaseFound || !strings.Contains(h.out.String(), "Lease pending") {
		t.Errorf("ready %v lease %v output:\n%s", s.Ready, s.LeaseFound, h.out)
	}
}

// --wait=kubelet waits for the kubelet's /healthz on the port its config names, and the client
// certificate, not for the Node (the fake cluster has none).
func TestWaitKubeletOnlyWaitsForHealthz(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" || calls.Add(1) < 3 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	h.env.HTTPClient = func(*x509.CertPool) *http.Client { return srv.Client() }
	writeHostFile(t, h.root, host.KubeletConfigPath, fmt.Sprintf("kind: KubeletConfiguration\nhealthzPort: %d\n", port))
	writeHostFile(t, h.root, host.KubeletClientCurrent, "cert")
	o := h.options(t)
	o.WaitKubeletOnly = true
	s := &State{Opts: o, NodeClient: h.client, Started: h.env.Clock.Now()}
	if err := runPhase(WaitReady, h.env, s); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 || s.RegisteredAfter != 0 {
		t.Errorf("healthz asked %d times (want until it answered ok, 3); registered %s", calls.Load(), s.RegisteredAfter)
	}

	// A kubelet that never gets healthy is a timeout naming the URL.
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 500) })
	o.Timeouts.KubeletHealth = time.Second
	err := runPhase(WaitReady, h.env, &State{Opts: o, Started: h.env.Clock.Now()})
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d/healthz", port)) {
		t.Errorf("got %v", err)
	}
}

// A kubelet whose healthzPort is 0 serves no /healthz (0 disables it): --wait=kubelet then
// waits for its client certificate only and asks no port, neither 0 nor the default.
func TestWaitKubeletOnlyWithHealthzOff(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	h.env.HTTPClient = func(*x509.CertPool) *http.Client { return srv.Client() }
	writeHostFile(t, h.root, host.KubeletConfigPath, "kind: KubeletConfiguration\nhealthzPort: 0\n")
	o := h.options(t)
	o.WaitKubeletOnly = true
	o.Timeouts.KubeletHealth = time.Second
	err := runPhase(WaitReady, h.env, &State{Opts: o, Started: h.env.Clock.Now()})
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "did not get its client certificate "+host.KubeletClientCurrent) {
		t.Errorf("without the client certificate: %v", err)
	}
	writeHostFile(t, h.root, host.KubeletClientCurrent, "cert")
	if err := runPhase(WaitReady, h.env, &State{Opts: o, Started: h.env.Clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 0 || !strings.Contains(h.out.String(), "its healthz is off (healthzPort 0)") {
		t.Errorf("healthz asked %d times, want none; output:\n%s", asked.Load(), h.out)
	}
}

func writeHostFile(t *testing.T, root, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
