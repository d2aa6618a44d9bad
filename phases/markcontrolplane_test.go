package phases

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/operr"
)

func TestMarkControlPlaneKeepsExistingTaintsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	h := newTestHost(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp2"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}}}})
	s := &State{Opts: joinrequest.Options{NodeName: "cp2", ControlPlane: true, Timeouts: joinrequest.DefaultTimeouts()}, AdminClient: h.client}
	if err := runPhase(MarkControlPlane, h.env, s); err != nil || !s.Changed() {
		t.Fatalf("first: %v changed=%v", err, s.Changed())
	}
	s2 := &State{Opts: s.Opts, AdminClient: h.client}
	if err := runPhase(MarkControlPlane, h.env, s2); err != nil || s2.Changed() {
		t.Fatalf("second: %v changed=%v", err, s2.Changed())
	}
	n, err := h.client.CoreV1().Nodes().Get(context.Background(), "cp2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The operator's taint stays, kubeadm's is added once; both labels are there, empty as kubeadm sets them.
	want := []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}, {Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}}
	if len(n.Spec.Taints) != len(want) || n.Spec.Taints[0] != want[0] || n.Spec.Taints[1] != want[1] {
		t.Errorf("taints %v, want %v", n.Spec.Taints, want)
	}
	for _, l := range []string{LabelControlPlane, LabelExcludeFromLB} {
		if v, ok := n.Labels[l]; !ok || v != "" {
			t.Errorf("label %s: %q (set %v); labels %v", l, v, ok, n.Labels)
		}
	}
}

func TestMarkControlPlaneWaitsForRegistration(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: joinrequest.Options{NodeName: "cp2", ControlPlane: true, Timeouts: joinrequest.DefaultTimeouts()}, AdminClient: h.client}
	err := runPhase(MarkControlPlane, h.env, s)
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), `node "cp2" did not register`) {
		t.Fatalf("got %v", err)
	}
}

// The wait for the Node to register is one list and one watch, not a read every interval;
// the Node is read once it is there, to label it.
func TestMarkControlPlaneWatchesForTheNode(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.env.Clock = stillClock{}
	var mu sync.Mutex
	var verbs []string
	record := func(v string) {
		mu.Lock()
		defer mu.Unlock()
		verbs = append(verbs, v)
	}
	h.client.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		record(a.GetVerb())
		return false, nil, nil
	})
	h.client.PrependWatchReactor("nodes", func(a k8stesting.Action) (bool, watch.Interface, error) {
		record("watch")
		go func() { // the kubelet registers a moment after the watch began
			time.Sleep(50 * time.Millisecond)
			_, _ = h.client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp2"}}, metav1.CreateOptions{})
		}()
		return false, nil, nil
	})
	s := &State{Opts: joinrequest.Options{NodeName: "cp2", ControlPlane: true, Timeouts: joinrequest.DefaultTimeouts()}, AdminClient: h.client}
	if err := runPhase(MarkControlPlane, h.env, s); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The test's own create is among them.
	if got := strings.Join(verbs, ","); got != "list,watch,create,get,update" {
		t.Errorf("node requests %s: want list, watch (the kubelet's create), then one get and the update", got)
	}
}
