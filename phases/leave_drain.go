package phases

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/drain"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// LeaveDrain evicts the Node's pods through the eviction API, so that their controllers
// recreate them elsewhere and PodDisruptionBudgets are respected (kubectl drain's library,
// with its options: DaemonSet pods, emptyDir data, unmanaged pods, grace period, timeout).
//
//	Reads:  s.leave (client, Opts, nodeGone), s.Report.Node, s.Opts.DryRun
//	Writes: evictions of the Node's pods, s.Report.Leave.EvictedPods and EvictionRefusals
var LeaveDrain = ResetPhase{Name: "drain", Short: "Evict the Node's pods (PodDisruptionBudgets respected)", Run: runLeaveDrain,
	Skip: func(s *ResetState) string {
		if r := leaveSkip(s); r != "" {
			return r
		}
		if s.leave.nodeGone {
			return "the Node is not in the cluster"
		}
		return ""
	},
}

func runLeaveDrain(ctx context.Context, e *host.Env, s *ResetState) error {
	o, name, rep := s.leave.Opts, s.Report.Node, s.Report.Leave
	refusals := &lastLine{}
	if o.EvictRetry == 0 {
		o.EvictRetry = 5 * time.Second
	}
	h := &drain.Helper{
		Ctx: ctx, Client: s.leave.client, Force: o.Force, GracePeriodSeconds: o.GracePeriod,
		IgnoreAllDaemonSets: o.IgnoreDaemonSets, DeleteEmptyDirData: o.DeleteEmptyDirData,
		DisableEviction: o.DisableEviction, EvictErrorRetryDelay: o.EvictRetry, Timeout: o.DrainTimeout, Out: io.Discard, ErrOut: refusals,
		OnPodDeletionOrEvictionFinished: func(p *corev1.Pod, evicted bool, err error) {
			if err != nil {
				return
			}
			rep.EvictedPods = append(rep.EvictedPods, p.Namespace+"/"+p.Name)
			how, verb := "evicted", "evict"
			if !evicted {
				how, verb = "deleted", "delete"
			}
			s.Change(e, "drain", host.EffectAPI, "%s pod %s/%s", verb, p.Namespace, p.Name)
			e.Logf("drain", "%s pod %s/%s", how, p.Namespace, p.Name)
		},
	}
	list, errs := h.GetPodsForDeletion(name)
	if len(errs) > 0 {
		err := errors.Join(errs...)
		if isAPIRefusal(errs) {
			return leaveAPIError(err, "list the pods of Node "+name, rep.Credentials)
		}
		return operr.Wrap(operr.Preflight, err, "Node "+name+" has pods a drain would lose",
			"pass the option the message names (--ignore-daemonsets, --delete-emptydir-data, --drain-force) as with kubectl drain, or --skip-phases drain")
	}
	for _, w := range strings.Split(list.Warnings(), "\n") {
		if w != "" {
			s.Warn(e, "drain", "%s", w)
		}
	}
	pods := list.Pods()
	if s.Opts.DryRun {
		for _, p := range pods {
			s.Change(e, "drain", host.EffectAPI, "evict pod %s/%s", p.Namespace, p.Name)
		}
		return nil
	}
	if len(pods) == 0 {
		return nil
	}
	err := h.DeleteOrEvictPods(pods)
	rep.EvictionRefusals += refusals.n
	if err != nil {
		if isAPIRefusal([]error{err}) {
			return leaveAPIError(err, "evict the pods of Node "+name, rep.Credentials)
		}
		what := "the drain of Node " + name + " did not finish"
		if refusals.last != "" {
			what += " (last refusal: " + refusals.last + ")"
		}
		return operr.Wrap(operr.Timeout, err, what,
			"a PodDisruptionBudget may forbid the eviction: check kubectl get pdb -A; run the same command again (with a longer --drain-timeout) to continue")
	}
	return nil
}

// isAPIRefusal reports whether any error is an authorization refusal.
func isAPIRefusal(errs []error) bool {
	for _, err := range errs {
		if s := err.Error(); strings.Contains(s, "forbidden") || strings.Contains(s, "Unauthorized") {
			return true
		}
	}
	return false
}

// lastLine keeps the last line the drain library printed about an eviction it will retry
// (e.g. a PodDisruptionBudget's refusal), to name it when the drain times out, and counts
// the refusals it retried. The library writes from one goroutine per pod.
type lastLine struct {
	mu   sync.Mutex
	last string
	n    int
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range strings.Split(string(p), "\n") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		l.last = s
		if strings.HasPrefix(s, "error when evicting") {
			l.n++
		}
	}
	return len(p), nil
}
