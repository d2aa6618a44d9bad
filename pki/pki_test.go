package pki

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestKeysAndCertificatesRoundTrip(t *testing.T) {
	ec, err := NewECKey()
	if err != nil {
		t.Fatal(err)
	}
	rsa, err := NewRSAKey(2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := NewSelfSignedCA(CertConfig{CommonName: "ca", NotBefore: now, NotAfter: now.Add(time.Hour)}, ec)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := NewSignedCert(CertConfig{CommonName: "leaf", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: now, NotAfter: now.Add(time.Hour)}, rsa.Public(), ca, ec)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseCert(append(EncodeCert(leaf), EncodeCert(ca)...))
	if err != nil || parsed.Subject.CommonName != "leaf" {
		t.Fatalf("ParseCert: %v %v", parsed, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := parsed.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("leaf does not chain to its CA: %v", err)
	}
	ecPEM, _ := EncodeKey(ec)
	rsaPEM, _ := EncodeKey(rsa)
	if k, err := ParseKey(ecPEM); err != nil || !ec.PublicKey.Equal(k.Public()) {
		t.Errorf("EC key round trip: %v", err)
	}
	if k, err := ParseKey(rsaPEM); err != nil || !rsa.PublicKey.Equal(k.Public()) {
		t.Errorf("RSA key round trip: %v", err)
	}
	if _, err := ParseKey(EncodeCert(ca)); err == nil {
		t.Error("a certificate parsed as a key")
	}
	if _, err := ParseCert(ecPEM); err == nil {
		t.Error("a key parsed as a certificate")
	}
}

// A public key x509 cannot marshal is an error, not an empty PEM.
func TestEncodePublicKeyRefusesUnknownKeys(t *testing.T) {
	if b, err := EncodePublicKey(struct{}{}); err == nil || b != nil {
		t.Errorf("EncodePublicKey(struct{}{}) = %q, %v", b, err)
	}
}
