package phases

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// stillClock's waits never end: only the watch can end a wait.
type stillClock struct{ clock.RealClock }

func (stillClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// The Node's way to Ready is followed on one list and one watch: no Node is read again.
func TestWaitReadyWatchesInsteadOfPolling(t *testing.T) {
	t.Parallel()
	h := newTestHost(t, notReadyNode("w1"), leaseOf("w1"))
	h.env.Clock = stillClock{}
	o := h.options(t)
	o.WaitReady, o.WaitReadyTimeout = true, time.Hour
	var mu sync.Mutex
	var verbs []string
	h.client.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		verbs = append(verbs, a.GetVerb())
		mu.Unlock()
		return false, nil, nil
	})
	h.client.PrependWatchReactor("nodes", func(a k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		verbs = append(verbs, "watch")
		mu.Unlock()
		go func() {
			// Once the watch is there: another node changes, then this one goes Ready.
			time.Sleep(50 * time.Millisecond)
			other := notReadyNode("w2")
			_, _ = h.client.CoreV1().Nodes().Create(context.Background(), other, metav1.CreateOptions{})
			n := notReadyNode("w1")
			n.Status.Conditions[0].Status = corev1.ConditionTrue
			_, _ = h.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		}()
		return false, nil, nil
	})
	s := &State{Opts: o, NodeClient: h.client, Started: time.Now()}
	if err := runPhase(WaitReady, h.env, s); err != nil || !s.Ready {
		t.Fatalf("err %v ready %v", err, s.Ready)
	}
	mu.Lock()
	defer mu.Unlock()
	reads := 0
	for _, v := range verbs {
		if v == "get" || v == "list" || v == "watch" {
			reads++
		}
	}
	// The test's own writes (create, update) are in the list too.
	if reads != 2 || verbs[0] != "list" || verbs[1] != "watch" {
		t.Errorf("node requests %v: want one list, then one watch, and no get", verbs)
	}
}

// A watch the server ends is watched again from the last version seen; an error event makes
// the next step a list.
func TestNodeWatchResumesAfterTheServerEndsIt(t *testing.T) {
	t.Parallel()
	h := newTestHost(t, notReadyNode("w1"))
	h.env.Clock = stillClock{}
	var mu sync.Mutex
	var rvs []string
	watchers := make(chan *watch.FakeWatcher, 4)
	h.client.PrependWatchReactor("nodes", func(a k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		rvs = append(rvs, a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion)
		mu.Unlock()
		w := watch.NewFake()
		watchers <- w
		return true, w, nil
	})
	nw := newNodeWatch(h.env, "wait-ready", h.client, "w1")
	done := make(chan error, 1)
	go func() {
		done <- nw.until(context.Background(), time.Hour, func(*corev1.Node) {}, func(n *corev1.Node) bool { return ready(n) })
	}()
	w := <-watchers
	n := notReadyNode("w1")
	n.ResourceVersion = "41"
	w.Modify(n)
	w.Stop() // the server ends the watch
	w = <-watchers
	ready := notReadyNode("w1")
	ready.ResourceVersion = "42"
	ready.Status.Conditions[0].Status = corev1.ConditionTrue
	w.Modify(ready)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rvs) != 2 || rvs[1] != "41" {
		t.Errorf("watches from versions %q: want the second from 41, the last seen", rvs)
	}
}
