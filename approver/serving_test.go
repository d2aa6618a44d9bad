package approver

import (
	"context"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// servingNode is w1 as its kubelet reports it.
func servingNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.21"}, {Type: corev1.NodeInternalIP, Address: "fd00::21"}, {Type: corev1.NodeHostName, Address: "w1"}}}}
}

// servingCSR is the serving CSR w1's kubelet sends (serverTLSBootstrap).
func servingCSR(t *testing.T) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-serving"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request(t, ecKey(t, elliptic.P256()), "system:node:w1", []string{"system:nodes"},
				x509.CertificateRequest{DNSNames: []string{"w1"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.21"), net.ParseIP("fd00::21")}}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			Username:   "system:node:w1",
			Groups:     []string{"system:nodes", "system:authenticated"},
		}}
}

// Every field of a serving CSR, each changed alone from one the approver approves: the change
// alone must turn the approval into a denial naming it.
func TestDecideServingChecksEveryField(t *testing.T) {
	if v := DecideServing(servingCSR(t), servingNode()); !v.Ours || !v.Approve || v.Reason != ReasonServingApproved {
		t.Fatalf("w1's own request: %+v", v)
	}
	withSANs := func(dns []string, ips ...string) func(*certificatesv1.CertificateSigningRequest, *corev1.Node) *corev1.Node {
		return func(c *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			var addrs []net.IP
			for _, ip := range ips {
				addrs = append(addrs, net.ParseIP(ip))
			}
			c.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w1", []string{"system:nodes"}, x509.CertificateRequest{DNSNames: dns, IPAddresses: addrs})
			return n
		}
	}
	for _, c := range []struct {
		field  string
		change func(*certificatesv1.CertificateSigningRequest, *corev1.Node) *corev1.Node
		want   string
	}{
		{"requesting user", func(c *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			c.Spec.Username = "system:serviceaccount:default:x"
			return n
		}, "is not a node"},
		{"groups of the requester", func(c *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			c.Spec.Groups = []string{"system:authenticated"}
			return n
		}, "is not a node"},
		{"another node's name in the CN", func(c *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			c.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w2", []string{"system:nodes"}, x509.CertificateRequest{DNSNames: []string{"w1"}})
			return n
		}, `not "system:node:w1"`},
		{"O", func(c *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			c.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w1", []string{"system:masters"}, x509.CertificateRequest{DNSNames: []string{"w1"}})
			return n
		}, "not exactly [system:nodes]"},
		{"an address the node does not have", withSANs([]string{"w1"}, "10.0.0.21", "10.0.0.99"), "the address 10.0.0.99"},
		{"a name the node does not have", withSANs([]string{"w1", "api.example.com"}, "10.0.0.21"), `"api.example.com"`},
		{"no SAN", withSANs(nil), "no DNS name or IP address"},
		{"usages: client auth", func(c *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
			return n
		}, `the usage "client auth"`},
		{"usages: no server auth", func(c *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
			return n
		}, `does not ask for "server auth"`},
		{"key", func(c *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			c.Spec.Request = request(t, ecKey(t, elliptic.P224()), "system:node:w1", []string{"system:nodes"}, x509.CertificateRequest{DNSNames: []string{"w1"}})
			return n
		}, "curve other than"},
		{"signature", func(c *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			b, _ := pem.Decode(c.Spec.Request)
			b.Bytes[len(b.Bytes)-3] ^= 0xff
			c.Spec.Request = pem.EncodeToMemory(b)
			return n
		}, "not signed by its own key"},
		{"the Node gone", func(*certificatesv1.CertificateSigningRequest, *corev1.Node) *corev1.Node { return nil }, "not in the cluster"},
		{"the Node's addresses changed", func(_ *certificatesv1.CertificateSigningRequest, n *corev1.Node) *corev1.Node {
			n.Status.Addresses = n.Status.Addresses[2:]
			return n
		}, "the address 10.0.0.21"},
	} {
		csr := servingCSR(t)
		v := DecideServing(csr, c.change(csr, servingNode()))
		if !v.Ours || v.Approve || v.Reason != ReasonServingDenied || !strings.Contains(v.Message, c.want) {
			t.Errorf("%s: %+v, want a denial naming %q", c.field, v, c.want)
		}
	}
	// A client CSR is not a serving one.
	if v := DecideServing(boundCSR(t), servingNode()); v.Ours {
		t.Errorf("a client CSR: %+v", v)
	}
}

// Handle decides a serving CSR against the Node the API server has: approved for w1's own
// addresses, denied for one naming another address.
func TestHandleServing(t *testing.T) {
	good, bad := servingCSR(t), servingCSR(t)
	bad.Name = "csr-serving-bad"
	bad.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w1", []string{"system:nodes"}, x509.CertificateRequest{IPAddresses: []net.IP{net.ParseIP("10.9.9.9")}})
	node := servingNode()
	for _, o := range []metav1.Object{good, bad, node} {
		withRV(o)
	}
	c := cluster(t, good, bad, node)
	var log []string
	a := approverFor(c, clocktesting.NewFakeClock(time.Now()), &log)
	for _, csr := range []*certificatesv1.CertificateSigningRequest{good, bad} {
		if err := a.Handle(context.Background(), csr); err != nil {
			t.Fatal(err)
		}
	}
	if got := decisions(conditions(t, c, good.Name)); got != "Approved/"+ReasonServingApproved {
		t.Errorf("w1's own: %s", got)
	}
	if got := decisions(conditions(t, c, bad.Name)); got != "Denied/"+ReasonServingDenied {
		t.Errorf("another address: %s", got)
	}
}

func decisions(conds []certificatesv1.CertificateSigningRequestCondition) string {
	var out []string
	for _, c := range conds {
		out = append(out, string(c.Type)+"/"+c.Reason)
	}
	return strings.Join(out, ",")
}
