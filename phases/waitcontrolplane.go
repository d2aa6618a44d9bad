package phases

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/operr"
)

// WaitControlPlane waits until this node's control-plane components answer their health
// endpoints: the API server's /livez on its advertise address (verified with the cluster CA),
// the controller-manager's /healthz and the scheduler's /livez on localhost.
//
//	Reads:  s.Discovery.CAData, s.Opts (AdvertiseAddress, BindPort, Timeouts)
//	Writes: nothing
var WaitControlPlane = Phase{ReadOnly: true, Name: "wait-control-plane", Short: "Wait for this node's API server, controller-manager and scheduler", Skip: func(s *State) string {
	if r := workerSkip(s); r != "" {
		return r
	}
	if s.Opts.DryRun {
		return "dry run"
	}
	return ""
}, Run: runWaitControlPlane}

func runWaitControlPlane(ctx context.Context, e *Env, s *State) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.Discovery.CAData)
	verified := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	// The controller-manager and scheduler serve self-signed certificates on localhost.
	local := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // localhost health probe
	checks := []struct {
		name   string
		url    string
		client *http.Client
	}{
		{"kube-apiserver", fmt.Sprintf("https://%s/livez", joinHostPort(s.Opts.AdvertiseAddress, s.Opts.BindPort)), verified},
		{"kube-controller-manager", "https://127.0.0.1:10257/healthz", local},
		{"kube-scheduler", "https://127.0.0.1:10259/livez", local},
	}
	for _, c := range checks {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, s.Opts.Timeouts.ControlPlane, true, func(ctx context.Context) (bool, error) {
			resp, err := c.client.Get(c.url)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			resp.Body.Close()
			last = resp.Status
			return resp.StatusCode == http.StatusOK, nil
		})
		if err != nil {
			return operr.Newf(operr.Timeout, "check the component's container: crictl ps -a --name "+c.name+"; crictl logs <id>",
				"%s is not healthy at %s after %s (last: %s)", c.name, c.url, s.Opts.Timeouts.ControlPlane, last)
		}
		e.Logf("wait-control-plane", "%s is healthy (%s)", c.name, c.url)
	}
	return nil
}
