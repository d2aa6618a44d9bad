package phases

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"kjoin.dev/kjoin/operr"
)

// WaitReady waits, with the node's own identity, until the kubelet has registered the Node
// and its Lease, then reports Ready. Not Ready within the grace is a warning naming the
// blocking condition (clusters often get their CNI after the first joins) unless
// --wait-ready makes Ready a requirement.
//
//	Reads:  s.Discovery (Server, CAData), s.Opts (NodeName, Wait, WaitReady, WaitReadyTimeout, ReadyGrace, Timeouts), s.Started
//	Writes: s.NodeClient, s.RegisteredAfter, s.ReadyAfter, s.Ready
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

func runWaitReady(ctx context.Context, e *Env, s *State) error {
	if s.NodeClient == nil {
		client, err := e.NewClient(&rest.Config{
			Host:            s.Discovery.Server,
			TLSClientConfig: rest.TLSClientConfig{CAData: s.Discovery.CAData, CertFile: e.Paths.Of(KubeletClientCurrent), KeyFile: e.Paths.Of(KubeletClientCurrent)},
			Timeout:         10 * time.Second,
			UserAgent:       "kjoin",
		})
		if err != nil {
			return fmt.Errorf("node client: %w", err)
		}
		s.NodeClient = client
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
	err := e.Poll(ctx, 200*time.Millisecond, s.Opts.Timeouts.KubeletHealth, func(ctx context.Context) (bool, error) {
		n, err := s.NodeClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			e.Debugf("wait-ready", "node %q: %v", name, err)
			return false, nil
		}
		observe(n)
		l, err := s.NodeClient.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			e.Debugf("wait-ready", "lease %q: %v", name, err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return operr.Newf(operr.Timeout,
			"the kubelet did not register Node %q with a Lease within %s", name, s.Opts.Timeouts.KubeletHealth).
			WithHint("check the kubelet: systemctl status kubelet; journalctl -xeu kubelet")
	}
	e.Logf("wait-ready", "node %q holds its Lease in kube-node-lease (%s after start)", name, e.Clock.Since(s.Started).Round(time.Millisecond))
	if s.Ready {
		return nil
	}

	limit := s.Opts.ReadyGrace
	if s.Opts.WaitReady {
		limit = s.Opts.WaitReadyTimeout
	}
	err = e.Poll(ctx, 200*time.Millisecond, limit, func(ctx context.Context) (bool, error) {
		if n, err := s.NodeClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			observe(n)
		}
		return s.Ready, nil
	})
	if err == nil {
		return nil
	}
	reason := blockingCondition(node)
	if s.Opts.WaitReady {
		return operr.Newf(operr.Timeout,
			"node %q is not Ready after %s: %s", name, limit, reason).
			WithHint("a network plugin (CNI) must be installed for nodes to become Ready; check kubectl describe node " + name)
	}
	s.Warn(e, "wait-ready", "node %q joined but is not Ready yet: %s (pass --wait-ready to require Ready)", name, reason)
	return nil
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
