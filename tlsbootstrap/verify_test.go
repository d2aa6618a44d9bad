package tlsbootstrap

import (
	"crypto"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"kjoin.dev/kjoin/pki"
)

// A CA bundled in the issued PEM by whoever answered the CSR is at most an intermediate,
// never a root: a leaf from that CA (with the CA appended) does not verify against the
// pinned CA; a leaf from the pinned CA does, whatever else is appended.
func TestBundledCAIsNeverTrusted(t *testing.T) {
	now := time.Now()
	newCA := func(cn string) (*x509.Certificate, crypto.Signer) {
		k, _ := pki.NewECKey()
		ca, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: cn, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, k)
		if err != nil {
			t.Fatal(err)
		}
		return ca, k
	}
	pinned, pinnedKey := newCA("kubernetes")
	rogue, rogueKey := newCA("rogue")
	nodeKey, _ := pki.NewECKey()
	leaf := func(ca *x509.Certificate, caKey crypto.Signer) []byte {
		c, err := pki.NewSignedCert(pki.CertConfig{CommonName: "system:node:w1", Organization: []string{"system:nodes"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour)}, nodeKey.Public(), ca, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return pki.EncodeCert(c)
	}
	roots := x509.NewCertPool()
	roots.AddCert(pinned)
	if err := Verify(append(leaf(rogue, rogueKey), pki.EncodeCert(rogue)...), nodeKey, "w1", roots, now); err == nil || !strings.Contains(err.Error(), "cluster CA") {
		t.Errorf("a leaf from a CA bundled with it verified: %v", err)
	}
	if err := Verify(append(leaf(pinned, pinnedKey), pki.EncodeCert(rogue)...), nodeKey, "w1", roots, now); err != nil {
		t.Errorf("the pinned CA's leaf: %v", err)
	}
}
