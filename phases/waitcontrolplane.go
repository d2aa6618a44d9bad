package phases

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
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

func runWaitControlPlane(ctx context.Context, e *host.Env, s *State) error {
	verified := e.HTTPClient(pki.Pool(mustCerts(s.Discovery.CAData)))
	// The controller-manager and scheduler serve self-signed certificates on localhost.
	local := e.HTTPClient(nil)
	checks := []struct {
		name   string
		url    string
		client *http.Client
	}{
		{"kube-apiserver", fmt.Sprintf("https://%s/livez", host.JoinHostPort(s.Opts.AdvertiseAddress, s.Opts.BindPort)), verified},
		{"kube-controller-manager", "https://127.0.0.1:10257/healthz", local},
		{"kube-scheduler", "https://127.0.0.1:10259/livez", local},
	}
	// The three are polled at once: each answers as soon as it can, none waits for the others.
	errs := make([]error, len(checks))
	defer e.Waiting("wait-control-plane", "this node's kube-apiserver, kube-controller-manager and kube-scheduler to be healthy", s.Opts.Timeouts.ControlPlane)()
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last string
			err := e.Poll(ctx, 250*time.Millisecond, s.Opts.Timeouts.ControlPlane, func(ctx context.Context) (bool, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
				if err != nil {
					return false, err
				}
				resp, err := c.client.Do(req)
				if err != nil {
					last = err.Error()
					return false, nil
				}
				resp.Body.Close()
				last = resp.Status
				return resp.StatusCode == http.StatusOK, nil
			})
			if err != nil {
				errs[i] = operr.Newf(operr.Timeout,
					"%s is not healthy at %s after %s (last: %s)", c.name, c.url, s.Opts.Timeouts.ControlPlane, last).
					WithHint("check the component's container: crictl ps -a --name " + c.name + "; crictl logs <id>")
				return
			}
			e.Logf("wait-control-plane", "%s is healthy (%s)", c.name, c.url)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
