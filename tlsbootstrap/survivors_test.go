package tlsbootstrap

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/token"
)

// A CSR of this node's name that asks for another key is never taken for ours.
func TestCreateRefusesAForeignCSROfItsName(t *testing.T) {
	c := fake.NewClientset()
	r := request(t, c, 5*time.Second)
	name, err := Name("w1", r.Key)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewECKey()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := NewCSR("w1", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CertificatesV1().CertificateSigningRequests().Create(context.Background(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Request: foreign, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := Create(context.Background(), r); err == nil || !strings.Contains(err.Error(), "does not ask for this node's key") {
		t.Errorf("Create with a foreign CSR of its name: %q, %v", got, err)
	}
}

// Names keep a prefix of at most 240 bytes: "kjoin-" and a node name of 234 bytes stay whole.
func TestNameKeepsAPrefixOf240(t *testing.T) {
	key, err := pki.NewECKey()
	if err != nil {
		t.Fatal(err)
	}
	for n, wantPrefix := range map[int]int{234: 240, 235: 240, 10: 16} {
		node := strings.Repeat("n", n)
		name, err := Name(node, key)
		if err != nil {
			t.Fatal(err)
		}
		if want := ("kjoin-" + node)[:wantPrefix] + "-"; !strings.HasPrefix(name, want) || len(name) != wantPrefix+13 {
			t.Errorf("node name of %d bytes: %s (%d bytes)", n, name, len(name))
		}
		if !IsNodeCSR(csrOf(t, name, node, ""), node) {
			t.Errorf("node name of %d bytes: its own CSR %s is not recognised", n, name)
		}
	}
}

func csrOf(t *testing.T, name, cn, user string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	k, err := pki.NewECKey()
	if err != nil {
		t.Fatal(err)
	}
	req, err := NewCSR(cn, k)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: user}}
}

// IsNodeCSR: kjoin's CSR by its exact name, or one the node itself sent; the kubelet client
// signer and the node's CN in both cases.
func TestIsNodeCSR(t *testing.T) {
	key, err := pki.NewECKey()
	if err != nil {
		t.Fatal(err)
	}
	name, _ := Name("w1", key)
	for _, c := range []struct {
		what string
		csr  *certificatesv1.CertificateSigningRequest
		want bool
	}{
		{"kjoin's, by name", csrOf(t, name, "w1", "system:bootstrap:abcdef"), true},
		{"the kubelet's, by user", csrOf(t, "csr-x7k2p", "w1", "system:node:w1"), true},
		{"another signer", func() *certificatesv1.CertificateSigningRequest {
			c := csrOf(t, name, "w1", "")
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
			return c
		}(), false},
		{"name prefix only", csrOf(t, "kjoin-w1-notmine", "w1", "system:bootstrap:abcdef"), false},
		{"upper-case suffix", csrOf(t, "kjoin-w1-"+strings.ToUpper(name[len(name)-12:]), "w1", ""), false},
		{"another node's CN", csrOf(t, name, "w2", ""), false},
		{"by user, another CN", csrOf(t, "csr-x7k2p", "w2", "system:node:w1"), false},
		{"no PEM", func() *certificatesv1.CertificateSigningRequest {
			c := csrOf(t, name, "w1", "")
			c.Spec.Request = []byte("not pem")
			return c
		}(), false},
	} {
		if got := IsNodeCSR(c.csr, "w1"); got != c.want {
			t.Errorf("%s: IsNodeCSR = %v", c.what, got)
		}
	}
}

// A CSR already denied when Wait first reads it is an error at once, not an issued nothing.
func TestWaitOnACSRDeniedBeforehand(t *testing.T) {
	c := fake.NewClientset()
	r := request(t, c, 5*time.Second)
	name, err := Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "PolicyDenied"}}
	if _, err := c.CertificatesV1().CertificateSigningRequests().UpdateStatus(context.Background(), csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	issued, err := Wait(context.Background(), r, name)
	if err == nil || !strings.Contains(err.Error(), "PolicyDenied") {
		t.Fatalf("Wait on a denied CSR: %+v, %v", issued, err)
	}
}

// IsBootstrapCSRFor: a bootstrap token's request to the kubelet client signer for the node's
// CN, and nothing else.
func TestIsBootstrapCSRFor(t *testing.T) {
	for _, c := range []struct {
		what string
		csr  *certificatesv1.CertificateSigningRequest
		want bool
	}{
		{"the kubelet's first, after kubeadm join", csrOf(t, "csr-9q2fz", "w1", "system:bootstrap:abcdef"), true},
		{"a renewal", csrOf(t, "csr-9q2fz", "w1", "system:node:w1"), false},
		{"another user's", csrOf(t, "csr-9q2fz", "w1", "alice"), false},
		{"another CN", csrOf(t, "csr-9q2fz", "w2", "system:bootstrap:abcdef"), false},
		{"another signer", func() *certificatesv1.CertificateSigningRequest {
			c := csrOf(t, "csr-9q2fz", "w1", "system:bootstrap:abcdef")
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
			return c
		}(), false},
		{"no PEM", func() *certificatesv1.CertificateSigningRequest {
			c := csrOf(t, "csr-9q2fz", "w1", "system:bootstrap:abcdef")
			c.Spec.Request = []byte("not pem")
			return c
		}(), false},
	} {
		if got := IsBootstrapCSRFor(c.csr, "w1"); got != c.want {
			t.Errorf("%s: IsBootstrapCSRFor = %v", c.what, got)
		}
	}
}

// IsServingCSROf: the node's own request (sent as system:node:<node>) to the kubelet serving
// signer for its CN, and nothing else.
func TestIsServingCSROf(t *testing.T) {
	serving := func(cn, user string) *certificatesv1.CertificateSigningRequest {
		c := csrOf(t, "csr-7x4kq", cn, user)
		c.Spec.SignerName = certificatesv1.KubeletServingSignerName
		return c
	}
	for _, c := range []struct {
		what string
		csr  *certificatesv1.CertificateSigningRequest
		want bool
	}{
		{"the kubelet's serving request", serving("w1", "system:node:w1"), true},
		{"sent by another node", serving("w1", "system:node:w2"), false},
		{"sent with a bootstrap token", serving("w1", "system:bootstrap:abcdef"), false},
		{"another CN", serving("w2", "system:node:w1"), false},
		{"the client signer", csrOf(t, "csr-7x4kq", "w1", "system:node:w1"), false},
	} {
		if got := IsServingCSROf(c.csr, "w1"); got != c.want {
			t.Errorf("%s: IsServingCSROf = %v", c.what, got)
		}
	}
}

// A CSR the API server recorded with the bound-token group: the join says kjoin's approver
// decides on it, and a timeout names the approver, not kubeadm's auto-approval.
func TestWaitSaysABoundTokensCSRWaitsForKjoinsApprover(t *testing.T) {
	c := fake.NewClientset()
	r := request(t, c, 300*time.Millisecond)
	var logs []string
	r.Logf = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	name, err := Create(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	csr.Spec.Groups = []string{token.BoundGroup, "system:bootstrappers", "system:authenticated"}
	if _, err := c.CertificatesV1().CertificateSigningRequests().Update(context.Background(), csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = Wait(context.Background(), r, name)
	if err == nil || !strings.Contains(err.Error(), "bound to this node") || !strings.Contains(operr.HintOf(err), "kjoin approver") {
		t.Errorf("err %v (hint %q)", err, operr.HintOf(err))
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "kjoin's approver, not the controller-manager, decides on CSR "+name) {
		t.Errorf("logs %q", logs)
	}
}
