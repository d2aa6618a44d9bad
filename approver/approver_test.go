package approver

import (
	"context"
	"crypto/elliptic"
	"crypto/x509"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"kjoin.dev/kjoin/token"
)

// cluster is a fake API server that, as a real one, refuses an update made at a version that
// is not the object's current one (for Secrets and CSR approvals) and bumps the version.
func cluster(t *testing.T, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	c := fake.NewClientset(objs...)
	var mu sync.Mutex
	for _, res := range []string{"secrets", "certificatesigningrequests"} {
		c.PrependReactor("update", res, func(a k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			obj := a.(k8stesting.UpdateAction).GetObject()
			m := obj.(metav1.Object)
			cur, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), m.GetName())
			if err != nil {
				return true, nil, err
			}
			if cm := cur.(metav1.Object); cm.GetResourceVersion() != m.GetResourceVersion() {
				return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: res}, m.GetName(), fmt.Errorf("the object has been modified"))
			}
			n, _ := strconv.Atoi(m.GetResourceVersion())
			m.SetResourceVersion(strconv.Itoa(n + 1))
			return true, obj, c.Tracker().Update(a.GetResource(), obj, a.GetNamespace())
		})
	}
	return c
}

func approverFor(c *fake.Clientset, clk *clocktesting.FakeClock, log *[]string) *Approver {
	var mu sync.Mutex
	return &Approver{Client: c, Clock: clk, Logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		*log = append(*log, fmt.Sprintf(f, a...))
	}}
}

func conditions(t *testing.T, c *fake.Clientset, name string) []certificatesv1.CertificateSigningRequestCondition {
	t.Helper()
	csr, err := c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return csr.Status.Conditions
}

func withRV(o metav1.Object) { o.SetResourceVersion("1") }

// A bound token's CSR for its node is approved and the token claimed for it; a second CSR
// with the token, same name, is denied as a reuse (the token stays: the first join may still
// need it); a CSR for another name is denied and the token deleted.
func TestHandleApprovesOnceAndDeniesTheRest(t *testing.T) {
	first, again, other := boundCSR(t), boundCSR(t), boundCSR(t)
	again.Name = "kjoin-w1-aaaaaaaaaaaa"
	other.Name = "csr-other"
	other.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w2", []string{"system:nodes"}, x509.CertificateRequest{})
	secret := boundSecret()
	for _, o := range []metav1.Object{first, again, other, secret} {
		withRV(o)
	}
	c := cluster(t, first, again, other, secret)
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC))
	var log []string
	a := approverFor(c, clk, &log)
	ctx := context.Background()

	if err := a.Handle(ctx, first); err != nil {
		t.Fatal(err)
	}
	if conds := conditions(t, c, first.Name); len(conds) != 1 || conds[0].Type != certificatesv1.CertificateApproved || conds[0].Reason != ReasonApproved {
		t.Fatalf("first: %+v", conds)
	}
	s, err := c.CoreV1().Secrets("kube-system").Get(ctx, secret.Name, metav1.GetOptions{})
	if err != nil || s.Annotations[token.UsedByAnnotation] != first.Name || s.Annotations[token.UsedAtAnnotation] != "2026-12-03T07:00:00Z" {
		t.Fatalf("the token was not claimed for %s: %v %+v", first.Name, err, s)
	}
	if err := a.Handle(ctx, again); err != nil {
		t.Fatal(err)
	}
	if conds := conditions(t, c, again.Name); len(conds) != 1 || conds[0].Type != certificatesv1.CertificateDenied || conds[0].Reason != ReasonTokenUsed {
		t.Errorf("reuse: %+v", conds)
	}
	if _, err := c.CoreV1().Secrets("kube-system").Get(ctx, secret.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a reuse deleted the token the first join may still need: %v", err)
	}
	if err := a.Handle(ctx, other); err != nil {
		t.Fatal(err)
	}
	if conds := conditions(t, c, other.Name); len(conds) != 1 || conds[0].Type != certificatesv1.CertificateDenied || conds[0].Reason != ReasonNotForNode {
		t.Errorf("another name: %+v", conds)
	}
	if _, err := c.CoreV1().Secrets("kube-system").Get(ctx, secret.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the token used for another name survived: %v", err)
	}
	// Handled again (a resync): nothing more.
	for _, csr := range []*certificatesv1.CertificateSigningRequest{first, again, other} {
		if err := a.Handle(ctx, csr); err != nil {
			t.Fatal(err)
		}
		if n := len(conditions(t, c, csr.Name)); n != 1 {
			t.Errorf("%s has %d conditions after a resync", csr.Name, n)
		}
	}
	t.Logf("%q", log)
}

// Two approvers handling the same CSR at once decide once.
func TestTwoApproversDecideOnce(t *testing.T) {
	for round := range 20 {
		csr, secret := boundCSR(t), boundSecret()
		withRV(csr)
		withRV(secret)
		c := cluster(t, csr, secret)
		clk := clocktesting.NewFakeClock(time.Now())
		var log1, log2 []string
		a1, a2 := approverFor(c, clk, &log1), approverFor(c, clk, &log2)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, a := range []*Approver{a1, a2} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = a.Handle(context.Background(), csr.DeepCopy()) }()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: %v", round, errs)
		}
		if conds := conditions(t, c, csr.Name); len(conds) != 1 || conds[0].Type != certificatesv1.CertificateApproved {
			t.Fatalf("round %d: conditions %+v; logs %q %q", round, conds, log1, log2)
		}
		if len(log1)+len(log2) != 1 {
			t.Errorf("round %d: %d decisions logged: %q %q", round, len(log1)+len(log2), log1, log2)
		}
	}
}

// Sweep deletes a used token once its CSR is issued and its node registered after the
// claim, or when the claim is older than Linger; an unused token stays.
func TestSweepDeletesUsedTokens(t *testing.T) {
	at := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	used := func(name, node, csr string) *corev1.Secret {
		s := boundSecret()
		s.Name, s.Labels[token.NodeLabel] = name, node
		s.Annotations = map[string]string{token.UsedByAnnotation: csr, token.UsedAtAnnotation: at.Format(time.RFC3339)}
		return s
	}
	issued := func(name string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: certificatesv1.CertificateSigningRequestStatus{Certificate: []byte("x")}}
	}
	node := func(name string, created time.Time) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	}
	unused := boundSecret()
	unused.Name = "bootstrap-token-unused"
	c := cluster(t,
		used("bootstrap-token-done01", "w1", "csr-1"), issued("csr-1"), node("w1", at.Add(5*time.Second)),
		used("bootstrap-token-old002", "w2", "csr-2"), issued("csr-2"), node("w2", at.Add(-time.Hour)), // a machine reinstalled: its Node older
		used("bootstrap-token-wait03", "w3", "csr-3"), // not issued yet
		unused)
	clk := clocktesting.NewFakeClock(at.Add(time.Minute))
	var log []string
	a := approverFor(c, clk, &log)
	a.Linger = 10 * time.Minute
	if err := a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	exists := func(name string) bool {
		_, err := c.CoreV1().Secrets("kube-system").Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	}
	if exists("bootstrap-token-done01") || !exists("bootstrap-token-old002") || !exists("bootstrap-token-wait03") || !exists("bootstrap-token-unused") {
		t.Errorf("after a minute: only the registered node's token goes; log %q", log)
	}
	clk.Step(10 * time.Minute)
	if err := a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exists("bootstrap-token-old002") || exists("bootstrap-token-wait03") || !exists("bootstrap-token-unused") {
		t.Errorf("after the linger: the used tokens go, the unused one stays; log %q", log)
	}
}
