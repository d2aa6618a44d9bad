package phases

import (
	"strings"
	"testing"
	"time"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// Finding 8: the CA downloaded from kubeadm-certs must be the CA discovery pinned.
func TestUploadedCAMustBeThePinnedCA(t *testing.T) {
	t.Parallel()
	newCA := func() []byte {
		k, _ := pki.NewECKey()
		c, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "kubernetes", NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}, k)
		if err != nil {
			t.Fatal(err)
		}
		return pki.EncodeCert(c)
	}
	pinned, other := newCA(), newCA()
	if err := sameCA(pinned, pinned); err != nil {
		t.Errorf("the pinned CA was refused: %v", err)
	}
	err := sameCA(other, pinned)
	if operr.CodeOf(err) != operr.Trust || !strings.Contains(err.Error(), "is not the cluster CA discovery pinned") {
		t.Errorf("another CA: %v", err)
	}
	if err := sameCA([]byte("junk"), pinned); operr.CodeOf(err) != operr.Trust {
		t.Errorf("junk: %v", err)
	}
}
