package phases

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"kjoin.dev/kjoin/host"
)

// nodeWatch follows one Node: a list, then a watch from the list's resourceVersion,
// re-established from the last version seen when the server ends it (a list again only when
// that version is gone, or after an error, paced on the injected clock). Waiting on it costs
// two requests however long the wait, where polling costs one every interval.
type nodeWatch struct {
	c     kubernetes.Interface
	name  string
	e     *host.Env
	phase string // whose debug lines

	node *corev1.Node // as last seen; nil: not registered
	rv   string       // resourceVersion to watch from; "": list first
	w    watch.Interface
}

func newNodeWatch(e *host.Env, phase string, c kubernetes.Interface, name string) *nodeWatch {
	return &nodeWatch{c: c, name: name, e: e, phase: phase}
}

func (n *nodeWatch) selector() string {
	return fields.OneTermEqualSelector("metadata.name", n.name).String()
}

// list reads the Node's current state.
func (n *nodeWatch) list(ctx context.Context) error {
	l, err := n.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: n.selector()})
	if err != nil {
		return err
	}
	n.node = nil
	for i := range l.Items {
		if l.Items[i].Name == n.name {
			n.node = &l.Items[i]
		}
	}
	n.rv = l.ResourceVersion
	return nil
}

// until waits until cond holds for the Node as last seen, or timeout passes on the clock.
// observe sees every state of the Node (nil ones excepted).
func (n *nodeWatch) until(ctx context.Context, timeout time.Duration, observe func(*corev1.Node), cond func(*corev1.Node) bool) error {
	deadline := n.e.Clock.After(timeout)
	seen := func() bool {
		if n.node != nil {
			observe(n.node)
		}
		return cond(n.node)
	}
	if n.rv == "" {
		if err := n.list(ctx); err != nil {
			n.e.Debugf(n.phase, "node %q: %v", n.name, err)
		} else if seen() {
			return nil
		}
	} else if seen() {
		return nil
	}
	defer n.stop()
	for {
		var events <-chan watch.Event
		var retry <-chan time.Time
		if n.rv != "" && n.w == nil {
			w, err := n.c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: n.selector(), ResourceVersion: n.rv, AllowWatchBookmarks: true})
			if err != nil {
				n.e.Debugf(n.phase, "watch node %q: %v", n.name, err)
				n.rv = "" // list again after a pause
			} else {
				n.w = w
			}
		}
		if n.w != nil {
			events = n.w.ResultChan()
		} else {
			retry = n.e.Clock.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return context.DeadlineExceeded
		case <-retry:
			if err := n.list(ctx); err != nil {
				n.e.Debugf(n.phase, "node %q: %v", n.name, err)
				continue
			}
			if seen() {
				return nil
			}
		case ev, ok := <-events:
			if !ok {
				n.stop() // the server ended the watch: watch again from the last version
				continue
			}
			if n.apply(ev) && seen() {
				return nil
			}
		}
	}
}

// apply takes one watch event; it reports whether the Node changed.
func (n *nodeWatch) apply(ev watch.Event) bool {
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		node, ok := ev.Object.(*corev1.Node)
		if !ok || node.Name != n.name {
			return false
		}
		n.rv = node.ResourceVersion
		if ev.Type == watch.Deleted {
			n.node = nil
		} else {
			n.node = node
		}
		return true
	case watch.Bookmark:
		if m, err := meta.Accessor(ev.Object); err == nil {
			n.rv = m.GetResourceVersion()
		}
	case watch.Error:
		n.e.Debugf(n.phase, "watch node %q: %v", n.name, apierrors.FromObject(ev.Object))
		n.stop()
		n.rv = "" // the version may be gone (410): list again
	}
	return false
}

func (n *nodeWatch) stop() {
	if n.w != nil {
		n.w.Stop()
		n.w = nil
	}
}
