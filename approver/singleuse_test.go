package approver

import (
	"context"
	"crypto/elliptic"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"kjoin.dev/kjoin/token"
)

// singleUseSecret is token abcdef's Secret as kjoin token create --uses 1 writes it.
func singleUseSecret() *corev1.Secret {
	s := (&token.Spec{Token: token.Token{ID: "abcdef", Secret: "0123456789abcdef"}, SingleUse: true}).Secret(time.Now())
	return s
}

// A single-use token (--uses 1) approves the first request for any valid node identity, for
// that node; a second request, under another name, is denied as a reuse; a request for no
// node's identity is denied and the token deleted; every other check of a bound token holds.
func TestDecideSingleUse(t *testing.T) {
	secret := singleUseSecret()
	if _, labelled := secret.Labels[token.NodeLabel]; !labelled || !strings.Contains(string(secret.Data["auth-extra-groups"]), token.BoundGroup) {
		t.Fatalf("a single-use token's Secret: labels %v, groups %s", secret.Labels, secret.Data["auth-extra-groups"])
	}
	first := boundCSR(t) // asks for system:node:w1
	v := Decide(first, secret)
	if !v.Approve || v.Node != "w1" || !strings.Contains(v.Message, "single-use token abcdef, for node w1") {
		t.Fatalf("first request: %+v", v)
	}
	secret.Annotations = map[string]string{token.UsedByAnnotation: first.Name}
	second := boundCSR(t)
	second.Name, second.Spec.Request = "kjoin-w9-0123456789ab", request(t, ecKey(t, elliptic.P256()), "system:node:w9", []string{"system:nodes"}, x509.CertificateRequest{})
	if v := Decide(second, secret); v.Approve || v.Reason != ReasonTokenUsed || v.Leaked {
		t.Errorf("a second request: %+v, want denied as a reuse", v)
	}
	stranger := boundCSR(t)
	stranger.Spec.Request = request(t, ecKey(t, elliptic.P256()), "admin", []string{"system:masters"}, x509.CertificateRequest{})
	if v := Decide(stranger, singleUseSecret()); v.Approve || v.Reason != ReasonNotForNode || !v.Leaked {
		t.Errorf("a request for no node: %+v, want denied and the token deleted", v)
	}
	wrongGroup := boundCSR(t)
	wrongGroup.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w1", []string{"system:masters"}, x509.CertificateRequest{})
	if v := Decide(wrongGroup, singleUseSecret()); v.Approve || v.Reason != ReasonNotForNode {
		t.Errorf("a node request in system:masters: %+v", v)
	}
	unlabelled := singleUseSecret()
	delete(unlabelled.Labels, token.NodeLabel)
	if v := Decide(boundCSR(t), unlabelled); v.Approve || v.Reason != ReasonTokenUnknown {
		t.Errorf("a token in the bound group kjoin did not make: %+v", v)
	}
}

// The approval claims the single-use token for the node it approved; the sweep deletes it
// once that node has registered.
func TestSingleUseTokenClaimedAndSwept(t *testing.T) {
	at := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(at)
	csr := boundCSR(t)
	c := cluster(t, singleUseSecret(), csr)
	var log []string
	a := approverFor(c, clk, &log)
	if err := a.Handle(context.Background(), csr); err != nil {
		t.Fatal(err)
	}
	s, err := c.CoreV1().Secrets("kube-system").Get(context.Background(), "bootstrap-token-abcdef", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Annotations[token.UsedByAnnotation] != csr.Name || s.Annotations[token.UsedForAnnotation] != "w1" {
		t.Fatalf("claim %v", s.Annotations)
	}
	issued, _ := c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), csr.Name, metav1.GetOptions{})
	issued.Status.Certificate = []byte("x")
	if _, err := c.CertificatesV1().CertificateSigningRequests().UpdateStatus(context.Background(), issued, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", CreationTimestamp: metav1.NewTime(at.Add(2 * time.Second))}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	if err := a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets("kube-system").Get(context.Background(), "bootstrap-token-abcdef", metav1.GetOptions{}); err == nil {
		t.Errorf("the used single-use token is still there after w1 registered; log %q", log)
	}
	var approved *certificatesv1.CertificateSigningRequest
	if approved, err = c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), csr.Name, metav1.GetOptions{}); err != nil || !decided(approved) {
		t.Errorf("the CSR was not decided: %v", err)
	}
}

// A single-use token may not take the identity of a node that exists (a client certificate
// in the name of a NotReady node, kubernetes#81056): denied, the token deleted.
func TestSingleUseTokenRefusesAnExistingNodesName(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	csr := boundCSR(t) // asks for system:node:w1
	c := cluster(t, singleUseSecret(), csr, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}})
	var log []string
	if err := approverFor(c, clk, &log).Handle(context.Background(), csr); err != nil {
		t.Fatal(err)
	}
	got, err := c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), csr.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != certificatesv1.CertificateDenied || got.Status.Conditions[0].Reason != ReasonNotForNode ||
		!strings.Contains(got.Status.Conditions[0].Message, "existing node w1") {
		t.Errorf("conditions %+v", got.Status.Conditions)
	}
	if _, err := c.CoreV1().Secrets("kube-system").Get(context.Background(), "bootstrap-token-abcdef", metav1.GetOptions{}); err == nil {
		t.Error("the token that asked for an existing node's identity was not deleted")
	}
}
