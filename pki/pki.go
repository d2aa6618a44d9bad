// Package pki creates keys and certificates with kubeadm's subjects, usages and validity,
// and encodes them the way Kubernetes components read them. It knows nothing of where the
// files live or which cluster they are for.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Backdate is how far before "now" certificates start, to tolerate small clock skew (kubeadm: 5m).
const Backdate = 5 * time.Minute

// CertConfig describes a certificate to issue.
type CertConfig struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Usages       []x509.ExtKeyUsage
	IsCA         bool
	NotBefore    time.Time
	NotAfter     time.Time
}

// NewECKey returns a new ECDSA P-256 key.
func NewECKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// NewRSAKey returns a new RSA key of the given size.
func NewRSAKey(bits int) (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, bits) }

// NewSelfSignedCA returns a CA certificate for key.
func NewSelfSignedCA(cfg CertConfig, key crypto.Signer) (*x509.Certificate, error) {
	cfg.IsCA = true
	return sign(cfg, key.Public(), nil, key)
}

// NewSignedCert issues a certificate for pub, signed by ca/caKey.
func NewSignedCert(cfg CertConfig, pub crypto.PublicKey, ca *x509.Certificate, caKey crypto.Signer) (*x509.Certificate, error) {
	if ca == nil {
		return nil, errors.New("no CA to sign with")
	}
	return sign(cfg, pub, ca, caKey)
}

func sign(cfg CertConfig, pub crypto.PublicKey, parent *x509.Certificate, signer crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, big.NewInt(math.MaxInt64-1))
	if err != nil {
		return nil, err
	}
	serial.Add(serial, big.NewInt(1))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cfg.CommonName, Organization: cfg.Organization},
		DNSNames:              cfg.DNSNames,
		IPAddresses:           cfg.IPs,
		NotBefore:             cfg.NotBefore.UTC(),
		NotAfter:              cfg.NotAfter.UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           cfg.Usages,
		BasicConstraintsValid: true,
		IsCA:                  cfg.IsCA,
	}
	if cfg.IsCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	}
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", cfg.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

// EncodeCert returns the PEM of a certificate.
func EncodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// EncodeKey returns the PEM of a private key: "EC PRIVATE KEY" or "RSA PRIVATE KEY", as the
// Kubernetes components and kubeadm write them.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	case *rsa.PrivateKey:
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), nil
	}
	return nil, fmt.Errorf("unsupported key type %T", key)
}

// EncodePublicKey returns the PEM of a public key ("PUBLIC KEY", PKIX).
func EncodePublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParseKey parses a PEM private key (PKCS#1, SEC1 or PKCS#8) that can sign.
func ParseKey(data []byte) (crypto.Signer, error) {
	k, err := keyutil.ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key %T", k)
	}
	return s, nil
}

// ParseCert parses the first PEM certificate in data.
func ParseCert(data []byte) (*x509.Certificate, error) {
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// ParseCerts parses every certificate in PEM data (a CA bundle).
func ParseCerts(data []byte) ([]*x509.Certificate, error) { return certutil.ParseCertsPEM(data) }

// EncodeCerts returns certificates as PEM, one block each.
func EncodeCerts(certs []*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, EncodeCert(c)...)
	}
	return out
}

// Pool returns a certificate pool holding exactly certs.
func Pool(certs []*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
}
