package tlsbootstrap

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"kjoin.dev/kjoin/token"
)

// pendingCSR creates the node's CSR (pending) and returns the request and its name.
func pendingCSR(t *testing.T, c *fake.Clientset) (Request, string) {
	t.Helper()
	r := request(t, c, 10*time.Second)
	name, err := Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return r, name
}

// calls records the CSR reads and watches a Wait makes (with the version each watch starts at).
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, s)
}

func (c *calls) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.log, ",")
}

// issued is csr approved and signed (certificate "issued") at resource version rv.
func issued(csr *certificatesv1.CertificateSigningRequest, rv string) *certificatesv1.CertificateSigningRequest {
	csr.ResourceVersion = rv
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	csr.Status.Certificate = []byte("issued")
	return csr
}

// A watch the server ends is watched again from the last version it delivered, without
// reading the CSR again: one read in all.
func TestCSRWatchResumesFromTheLastVersion(t *testing.T) {
	c := fake.NewClientset()
	r, name := pendingCSR(t, c)
	var seen calls
	c.PrependReactor("get", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		seen.add("get")
		return false, nil, nil
	})
	watches := 0
	c.PrependWatchReactor("certificatesigningrequests", func(a k8stesting.Action) (bool, watch.Interface, error) {
		watches++
		seen.add("watch@" + a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion)
		w := watch.NewFake()
		csr, _ := c.Tracker().Get(certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests"), "", name)
		cur := csr.(*certificatesv1.CertificateSigningRequest).DeepCopy()
		go func() {
			if watches == 1 { // the first watch: the CSR changes (still pending), then the server ends it
				cur.ResourceVersion = "7"
				w.Modify(cur)
				w.Stop()
				return
			}
			w.Modify(issued(cur, "8"))
		}()
		return true, w, nil
	})
	out, err := Wait(context.Background(), r, name)
	if err != nil || string(out.CertPEM) != "issued" {
		t.Fatalf("%v %+v", err, out)
	}
	if got := seen.String(); got != "get,watch@,watch@7" {
		t.Errorf("requests %s: want one read, then a watch, then a watch from version 7", got)
	}
}

// The wait after a create starts from the create's answer: it watches from that version
// and never reads the CSR first (one request less per join), and what the answer says (a
// bound token's group) is announced as a read's would be.
func TestWaitCreatedWatchesFromTheCreatesAnswer(t *testing.T) {
	c := fake.NewClientset()
	r := request(t, c, 10*time.Second)
	created, err := Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	created.ResourceVersion = "5" // as the API server answers (the fake tracker keeps none)
	created.Spec.Groups = []string{"system:authenticated", token.BoundGroup}
	var announced []string
	r.Announce = func(f string, a ...any) { announced = append(announced, fmt.Sprintf(f, a...)) }
	var seen calls
	c.PrependReactor("get", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		seen.add("get")
		return false, nil, nil
	})
	c.PrependWatchReactor("certificatesigningrequests", func(a k8stesting.Action) (bool, watch.Interface, error) {
		seen.add("watch@" + a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion)
		w := watch.NewFake()
		cur := created.DeepCopy()
		go func() {
			w.Modify(issued(cur, "6"))
		}()
		return true, w, nil
	})
	out, err := WaitCreated(context.Background(), r, created)
	if err != nil || string(out.CertPEM) != "issued" || out.CSRName != created.Name {
		t.Fatalf("%v %+v", err, out)
	}
	if got := seen.String(); got != "watch@5" {
		t.Errorf("requests %s: want one watch from the create's version 5 and no read", got)
	}
	if len(announced) != 1 || !strings.Contains(announced[0], "kjoin's approver") {
		t.Errorf("the bound token's group in the create's answer was not announced: %q", announced)
	}
}

// The CSR is watched through the Watcher (the client without a per-request timeout, which
// would end each watch after 10 s), and each watch asks the server to end it after WatchFor:
// a join waiting minutes in a storm makes one watch a minute, not six.
func TestCSRWatchedByTheWatcherForAMinute(t *testing.T) {
	c := fake.NewClientset()
	r := request(t, c, 10*time.Second)
	created, err := Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	created.ResourceVersion = "5"
	c.PrependWatchReactor("certificatesigningrequests", func(k8stesting.Action) (bool, watch.Interface, error) {
		t.Error("the CSR was watched with the client that has a request timeout")
		return true, nil, fmt.Errorf("not this client")
	})
	watcher := fake.NewClientset()
	var seen calls
	watcher.PrependWatchReactor("certificatesigningrequests", func(a k8stesting.Action) (bool, watch.Interface, error) {
		wa := a.(k8stesting.WatchActionImpl)
		secs := "none"
		if ts := wa.ListOptions.TimeoutSeconds; ts != nil {
			secs = fmt.Sprint(*ts)
		}
		seen.add("watch@" + wa.WatchRestrictions.ResourceVersion + " for " + secs)
		w := watch.NewFake()
		cur := created.DeepCopy()
		go w.Modify(issued(cur, "6"))
		return true, w, nil
	})
	r.Watcher = watcher
	out, err := WaitCreated(context.Background(), r, created)
	if err != nil || string(out.CertPEM) != "issued" {
		t.Fatalf("%v %+v", err, out)
	}
	if got, want := seen.String(), fmt.Sprintf("watch@5 for %d", int64(WatchFor/time.Second)); got != want || WatchFor != time.Minute {
		t.Errorf("watches %q (WatchFor %s): want %q, one minute", got, WatchFor, want)
	}
}

// Reads that keep failing (a throttled API server) are paced by a growing back-off with
// jitter, not a fixed interval: over one second of 429s with a 10 ms first pause, a handful
// of reads rather than a hundred.
func TestCSRReadsBackOffWhileThrottled(t *testing.T) {
	c := fake.NewClientset()
	r, name := pendingCSR(t, c)
	r.Timeout = time.Second
	var mu sync.Mutex
	gets := 0
	c.PrependReactor("get", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		gets++
		return true, nil, apierrors.NewTooManyRequests("throttled", 0)
	})
	_, err := Wait(context.Background(), r, name)
	if err == nil {
		t.Fatal("a CSR that could never be read was issued")
	}
	mu.Lock()
	defer mu.Unlock()
	if gets < 3 || gets > 10 {
		t.Errorf("%d reads in one second of 429s (first pause 10 ms): want a few, growing apart", gets)
	}
}

// A CSR deleted while it is watched is read again and named as gone.
func TestCSRDeletedWhileWatched(t *testing.T) {
	c := fake.NewClientset()
	r, name := pendingCSR(t, c)
	c.PrependWatchReactor("certificatesigningrequests", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		go func() {
			_ = c.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), name, metav1.DeleteOptions{})
			w.Delete(&certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}()
		return true, w, nil
	})
	_, err := Wait(context.Background(), r, name)
	if err == nil || !strings.Contains(err.Error(), "disappeared") {
		t.Fatalf("err %v", err)
	}
}
