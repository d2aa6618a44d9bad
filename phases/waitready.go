package phases

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// WaitReady waits, with the node's own identity, until the kubelet has registered the Node and
// it reports Ready. Not Ready within the grace is a warning naming the blocking condition
// (clusters often get their CNI after the first joins) unless --wait-ready makes Ready a
// requirement. The kubelet's first Lease (which may come about 10 s after its start) is not
// waited for: it is reported as found or pending, and kjoin verify proves that it renews.
//
//	Reads:  s.Discovery (Server, CAData), s.Opts (NodeName, Wait, WaitReady, WaitReadyTimeout, ReadyGrace, Timeouts), s.Started
//	Writes: s.NodeClient, s.RegisteredAfter, s.ReadyAfter, s.Ready, s.LeaseFound
var WaitReady = Phase{ReadOnly: true,
	Name:  "wait-ready",
	Short: "Wait for the Node to register and report Ready", Needs: []string{"discovery"},
	Skip: func(s *State) string {
		if !s.Opts.Wait {
			return "--wait=false"
		}
		if s.Opts.DryRun {
			return "dry run"
		}
		return ""
	},
	Run: runWaitReady,
}

// nodeClient is the client with the node's own identity (the kubelet's current client
// certificate) at the discovered API server, built once (s.NodeClient).
func nodeClient(e *host.Env, s *State) (kubernetes.Interface, error) {
	if s.NodeClient != nil {
		return s.NodeClient, nil
	}
	cfg := &rest.Config{
		Host:            s.Discovery.Server,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.Discovery.CAData, CertFile: e.Paths.Of(host.KubeletClientCurrent), KeyFile: e.Paths.Of(host.KubeletClientCurrent)},
		Timeout:         10 * time.Second,
		UserAgent:       "kjoin",
	}
	if s.api != nil {
		s.api.wrap(cfg)
	}
	c, err := e.Client(cfg)
	if err != nil {
		return nil, fmt.Errorf("node client: %w", err)
	}
	s.NodeClient = c
	return c, nil
}

func runWaitReady(ctx context.Context, e *host.Env, s *State) error {
	if s.Opts.WaitKubeletOnly {
		return waitKubeletHealthy(ctx, e, s)
	}
	if _, err := nodeClient(e, s); err != nil {
		return err
	}
	name := s.Opts.NodeName
	var node *corev1.Node
	observe := func(n *corev1.Node) {
		node = n
		if s.RegisteredAfter == 0 {
			s.RegisteredAfter = e.Clock.Since(s.Started)
			e.Logf("wait-ready", "node %q registered %s after start", name, s.RegisteredAfter.Round(time.Millisecond))
		}
		if !s.Ready && ready(n) {
			s.Ready, s.ReadyAfter = true, e.Clock.Since(s.Started)
			e.Logf("wait-ready", "node %q is Ready %s after start", name, s.ReadyAfter.Round(time.Millisecond))
		}
	}
	// One list and one watch for the whole wait (re-established if the server ends it).
	nw := newNodeWatch(e, "wait-ready", s.NodeClient, name)
	waited := e.Waiting("wait-ready", fmt.Sprintf("the kubelet to register Node %q", name), s.Opts.Timeouts.KubeletHealth)
	err := nw.until(ctx, s.Opts.Timeouts.KubeletHealth, observe, func(n *corev1.Node) bool { return n != nil })
	waited()
	if err != nil {
		return operr.Newf(operr.Timeout,
			"the kubelet did not register Node %q within %s", name, s.Opts.Timeouts.KubeletHealth).
			WithHint("check the kubelet: systemctl status kubelet; journalctl -xeu kubelet")
	}
	defer reportLease(ctx, e, s)
	if s.Ready {
		return nil
	}
	limit := s.Opts.ReadyGrace
	if s.Opts.WaitReady {
		limit = s.Opts.WaitReadyTimeout
	}
	waited = e.Waiting("wait-ready", fmt.Sprintf("Node %q to be Ready", name), limit)
	err = nw.until(ctx, limit, observe, func(*corev1.Node) bool { return s.Ready })
	waited()
	if err == nil {
		return nil
	}
	reason := blockingCondition(node)
	if s.Opts.WaitReady {
		return operr.Newf(operr.Timeout,
			"node %q is not Ready after %s: %s", name, limit, reason).
			WithHint("run kjoin diagnose on this node; a network plugin (CNI) must be installed for nodes to become Ready")
	}
	s.Warn(e, "wait-ready", "node %q joined but is not Ready yet: %s (pass --wait-ready to require Ready; kjoin diagnose says why)", name, reason)
	return nil
}

// waitKubeletHealthy is --wait=kubelet, what kubeadm's kubelet-start waits for: the kubelet
// answers its /healthz (port from its config.yaml) and holds its client certificate. A kubelet
// whose healthzPort is 0 serves no /healthz (the kubelet's "0 disables"): then only the client
// certificate is waited for, and the log says so.
func waitKubeletHealthy(ctx context.Context, e *host.Env, s *State) error {
	port := int32(10248)
	if b, err := e.ReadFile(host.KubeletConfigPath); err == nil {
		var kc struct {
			HealthzPort *int32 `json:"healthzPort"`
		}
		if yaml.Unmarshal(b, &kc) == nil && kc.HealthzPort != nil {
			port = *kc.HealthzPort
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	what := "the kubelet's " + url + " and its client certificate"
	off := port <= 0 // the kubelet serves no /healthz
	if off {
		what = "the kubelet's client certificate (its healthz is off: healthzPort " + fmt.Sprint(port) + ")"
	}
	client := e.HTTPClient(nil)
	err := e.PollFor(ctx, "wait-ready", what, 100*time.Millisecond, s.Opts.Timeouts.KubeletHealth, func(ctx context.Context) (bool, error) {
		if !e.Exists(host.KubeletClientCurrent) {
			return false, nil
		}
		if off {
			return true, nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		failed := fmt.Sprintf("the kubelet did not answer %s within %s", url, s.Opts.Timeouts.KubeletHealth)
		if off {
			failed = fmt.Sprintf("the kubelet did not get its client certificate %s within %s", host.KubeletClientCurrent, s.Opts.Timeouts.KubeletHealth)
		}
		return operr.New(operr.Timeout, failed, "check the kubelet: systemctl status kubelet; journalctl -xeu kubelet")
	}
	if off {
		e.Logf("wait-ready", "the kubelet holds its client certificate %s after start; its healthz is off (healthzPort %d), so its health was not checked; not waiting for the Node (--wait=kubelet)", e.Clock.Since(s.Started).Round(time.Millisecond), port)
		return nil
	}
	e.Logf("wait-ready", "the kubelet is healthy (%s) %s after start; not waiting for the Node (--wait=kubelet)", url, e.Clock.Since(s.Started).Round(time.Millisecond))
	return nil
}

// reportLease looks once for the node's Lease: found, or pending (the kubelet creates it
// within about 10 s of its start; kjoin verify proves it renews).
func reportLease(ctx context.Context, e *host.Env, s *State) {
	l, err := s.NodeClient.CoordinationV1().Leases("kube-node-lease").Get(ctx, s.Opts.NodeName, metav1.GetOptions{})
	if err == nil && l.Spec.RenewTime != nil {
		s.LeaseFound = true
		e.Logf("wait-ready", "node %q holds its Lease in kube-node-lease", s.Opts.NodeName)
		return
	}
	e.Logf("wait-ready", "node %q: Lease pending (the kubelet creates it shortly; kjoin verify %s proves it renews)", s.Opts.NodeName, s.Opts.NodeName)
}

func ready(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func blockingCondition(n *corev1.Node) string {
	if n == nil {
		return "not registered"
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return fmt.Sprintf("Ready=%s, reason %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "no Ready condition reported yet"
}
