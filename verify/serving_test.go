package verify

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/pki"
)

// node.serving-cert: the certificate the kubelet serves must chain to the cluster CA and name
// every address of the Node; the kubelet's own self-signed one (serverTLSBootstrap off) is
// skipped, another CA's warns (it may be the operator's), one of the cluster CA missing an
// address fails, an unreachable kubelet warns.
func TestServingCertificate(t *testing.T) {
	newCA := func(cn string) (*x509.Certificate, crypto.Signer) {
		key, _ := pki.NewECKey()
		ca, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: cn, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, key)
		if err != nil {
			t.Fatal(err)
		}
		return ca, key
	}
	ca, caKey := newCA("kubernetes")
	other, otherKey := newCA("other")
	kubeletCA, kubeletCAKey := newCA("w1-ca@1700000000")
	serving := func(parent *x509.Certificate, parentKey crypto.Signer, ips ...string) []*x509.Certificate {
		key, _ := pki.NewECKey()
		var addrs []net.IP
		for _, ip := range ips {
			addrs = append(addrs, net.ParseIP(ip))
		}
		cfg := pki.CertConfig{CommonName: "w1@1700000000", DNSNames: []string{"w1"}, IPs: addrs, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour)}
		var c *x509.Certificate
		var err error
		if parent == nil {
			c, err = pki.NewSelfSignedCA(cfg, key)
		} else {
			c, err = pki.NewSignedCert(cfg, key.Public(), parent, parentKey)
		}
		if err != nil {
			t.Fatal(err)
		}
		return []*x509.Certificate{c}
	}
	for _, tc := range []struct {
		what   string
		chain  []*x509.Certificate
		err    error
		status Status
		want   string
	}{
		{"signed by the cluster CA, naming both addresses", serving(ca, caKey, "10.0.0.21", "fd00::21"), nil, Pass, "naming the Node's addresses"},
		{"self-signed leaf", serving(nil, nil, "10.0.0.21", "fd00::21"), nil, Skip, "self-signed"},
		// What a kubelet without serverTLSBootstrap serves (found in the lab): a leaf and the
		// "<host>-ca@<time>" root it made for it.
		{"the kubelet's own CA and leaf", append(serving(kubeletCA, kubeletCAKey, "10.0.0.21", "fd00::21"), kubeletCA), nil, Skip, "self-signed"},
		{"signed by another CA", serving(other, otherKey, "10.0.0.21", "fd00::21"), nil, Warn, "not signed by the cluster CA"},
		{"another CA's chain, its root served", append(serving(other, otherKey, "10.0.0.21", "fd00::21"), other), nil, Warn, "not signed by the cluster CA"},
		{"missing an address", serving(ca, caKey, "10.0.0.21"), nil, Fail, "does not name fd00::21"},
		{"unreachable", nil, errors.New("connection refused"), Warn, "cannot reach"},
	} {
		o, _, _ := cluster(t)
		o.CA = x509.NewCertPool()
		o.CA.AddCert(ca)
		n, err := o.Client.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.21"}, {Type: corev1.NodeInternalIP, Address: "fd00::21"}, {Type: corev1.NodeHostName, Address: "w1"}}
		if _, err := o.Client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var asked []string
		o.KubeletTLS = func(_ context.Context, addr string) ([]*x509.Certificate, error) {
			asked = append(asked, addr)
			return tc.chain, tc.err
		}
		o.Nodes = []string{"w1"}
		r, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		c := byID(r, "w1", "node.serving-cert")
		if c.Status != tc.status || !strings.Contains(c.Summary+" "+c.Evidence, tc.want) {
			t.Errorf("%s: %+v, want %s naming %q", tc.what, c, tc.status, tc.want)
		}
		if strings.Join(asked, ",") != "10.0.0.21:10250" {
			t.Errorf("%s: asked %v, want the kubelet at its internal IP, port 10250", tc.what, asked)
		}
	}
}
