// Package discoverytest serves a fake kube-public/cluster-info over TLS for tests of token
// discovery: its own CA, a serving certificate for 127.0.0.1, and JWS signatures for tokens.
package discoverytest

import (
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/cluster-bootstrap/token/jws"

	"kjoin.dev/kjoin/pki"
)

// Server is a fake API server endpoint for discovery.
type Server struct {
	*httptest.Server
	CA           *x509.Certificate
	CAKey        crypto.Signer
	CAPEM        []byte
	Pin          string
	APIServerURL string // the API server URL written into cluster-info
	// CredentialSeen is set if any request carried an Authorization header.
	CredentialSeen atomic.Bool
}

// Endpoint is host:port of the server.
func (s *Server) Endpoint() string { return strings.TrimPrefix(s.URL, "https://") }

// New starts a server whose cluster-info names server and is signed for tokens.
func New(t testing.TB, server string, tokens ...string) *Server {
	t.Helper()
	key, err := pki.NewECKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "kubernetes", NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, key)
	if err != nil {
		t.Fatal(err)
	}
	skey, _ := pki.NewECKey()
	cert, err := pki.NewSignedCert(pki.CertConfig{CommonName: "kube-apiserver", IPs: []net.IP{net.ParseIP("127.0.0.1")},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, skey.Public(), ca, key)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{CA: ca, CAKey: key, CAPEM: pki.EncodeCert(ca), APIServerURL: server}
	s.Pin = pinOf(ca)
	cm := ClusterInfo(t, s.CAPEM, server, tokens...)
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			s.CredentialSeen.Store(true)
		}
		if r.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(cm)
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: skey}}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// ClusterInfo builds a cluster-info ConfigMap for caPEM and server, signed for tokens.
func ClusterInfo(t testing.TB, caPEM []byte, server string, tokens ...string) *corev1.ConfigMap {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{Data: map[string]string{"kubeconfig": string(kc)}}
	for _, tok := range tokens {
		id, secret, _ := strings.Cut(tok, ".")
		sig, err := jws.ComputeDetachedSignature(string(kc), id, secret)
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["jws-kubeconfig-"+id] = sig
	}
	return cm
}

func pinOf(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// SignCSR issues a one-year client certificate for a PEM CSR with the server's CA, as the
// controller-manager's signer does for kubelet client CSRs.
func (s *Server) SignCSR(csrPEM []byte) ([]byte, error) {
	b, _ := pem.Decode(csrPEM)
	if b == nil {
		return nil, fmt.Errorf("no PEM CSR")
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	c, err := pki.NewSignedCert(pki.CertConfig{CommonName: req.Subject.CommonName, Organization: req.Subject.Organization,
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(365 * 24 * time.Hour)}, req.PublicKey, s.CA, s.CAKey)
	if err != nil {
		return nil, err
	}
	return pki.EncodeCert(c), nil
}

// DownEndpoint is a loopback host:port nothing listens on: an API server that is down (its
// connections are refused).
func DownEndpoint(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := l.Addr().String()
	l.Close()
	return ep
}
