package approver

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/token"
)

// request is a certificate request for cn in orgs, signed by key, with tmpl's SANs.
func request(t *testing.T, key crypto.Signer, cn string, orgs []string, tmpl x509.CertificateRequest) []byte {
	t.Helper()
	tmpl.Subject = pkix.Name{CommonName: cn, Organization: orgs}
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func ecKey(t *testing.T, c elliptic.Curve) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// boundCSR is the request a kjoin join with bound token abcdef makes for node w1.
func boundCSR(t *testing.T) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "kjoin-w1-0123456789ab"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    request(t, ecKey(t, elliptic.P256()), "system:node:w1", []string{"system:nodes"}, x509.CertificateRequest{}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			Username:   "system:bootstrap:abcdef",
			Groups:     []string{token.BoundGroup, "system:bootstrappers", "system:authenticated"},
		}}
}

// boundSecret is bound token abcdef's Secret, for node w1.
func boundSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system",
		Labels: map[string]string{token.NodeLabel: "w1", token.RoleLabel: "worker"}}}
}

// Every field the approver checks, each changed alone from a request it approves: the
// change alone must turn the approval into a denial with its reason (each case fails if
// that field went unchecked).
func TestDecideChecksEveryField(t *testing.T) {
	if v := Decide(boundCSR(t), boundSecret()); !v.Ours || !v.Approve || v.Reason != ReasonApproved || v.TokenID != "abcdef" || v.Leaked {
		t.Fatalf("the bound request itself: %+v", v)
	}
	rsaKey := func(bits int) crypto.Signer {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	for _, c := range []struct {
		field  string
		change func(*certificatesv1.CertificateSigningRequest, *corev1.Secret) *corev1.Secret
		reason string
		want   string
	}{
		{"name (CN)", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w2", []string{"system:nodes"}, x509.CertificateRequest{})
			return s
		}, ReasonNotForNode, `asks for "system:node:w2", not "system:node:w1"`},
		{"groups (O), one more", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w1", []string{"system:nodes", "system:masters"}, x509.CertificateRequest{})
			return s
		}, ReasonNotForNode, "not exactly [system:nodes]"},
		{"groups (O), none", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w1", nil, x509.CertificateRequest{})
			return s
		}, ReasonNotForNode, "not exactly [system:nodes]"},
		{"SANs", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Request = request(t, ecKey(t, elliptic.P256()), "system:node:w1", []string{"system:nodes"}, x509.CertificateRequest{IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}})
			return s
		}, ReasonNotForNode, "subject alternative names"},
		{"signature", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			b, _ := pem.Decode(c.Spec.Request)
			b.Bytes[len(b.Bytes)-3] ^= 0xff
			c.Spec.Request = pem.EncodeToMemory(b)
			return s
		}, ReasonNotForNode, "not signed by its own key"},
		{"usages: no client auth", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
			return s
		}, ReasonNotForNode, `does not ask for "client auth"`},
		{"usages: server auth too", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
			return s
		}, ReasonNotForNode, `the usage "server auth"`},
		{"key type: Ed25519", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Request = request(t, edKey, "system:node:w1", []string{"system:nodes"}, x509.CertificateRequest{})
			return s
		}, ReasonNotForNode, "ed25519.PublicKey key"},
		{"key type: P-224", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Request = request(t, ecKey(t, elliptic.P224()), "system:node:w1", []string{"system:nodes"}, x509.CertificateRequest{})
			return s
		}, ReasonNotForNode, "curve other than"},
		{"key size: RSA 1024", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Request = request(t, rsaKey(1024), "system:node:w1", []string{"system:nodes"}, x509.CertificateRequest{})
			return s
		}, ReasonNotForNode, "1024-bit RSA key"},
		{"no PEM", func(c *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			c.Spec.Request = []byte("junk")
			return s
		}, ReasonNotForNode, "no PEM"},
		{"the token gone", func(_ *certificatesv1.CertificateSigningRequest, _ *corev1.Secret) *corev1.Secret { return nil }, ReasonTokenUnknown, "unknown"},
		{"the token names no node", func(_ *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			delete(s.Labels, token.NodeLabel)
			return s
		}, ReasonTokenUnknown, "names no node"},
		{"the token used for another CSR", func(_ *certificatesv1.CertificateSigningRequest, s *corev1.Secret) *corev1.Secret {
			s.Annotations = map[string]string{token.UsedByAnnotation: "kjoin-w1-ffffffffffff"}
			return s
		}, ReasonTokenUsed, "used already, for CSR kjoin-w1-ffffffffffff"},
	} {
		csr, secret := boundCSR(t), boundSecret()
		v := Decide(csr, c.change(csr, secret))
		if !v.Ours || v.Approve || v.Reason != c.reason || !strings.Contains(v.Message, c.want) {
			t.Errorf("%s: %+v, want a denial %s naming %q", c.field, v, c.reason, c.want)
		}
		if v.Leaked != (c.reason == ReasonNotForNode) {
			t.Errorf("%s: leaked %v: a token used for another request is deleted, only then", c.field, v.Leaked)
		}
	}
	// The CSR the token was claimed for is approved again (a second approver's view).
	csr, secret := boundCSR(t), boundSecret()
	secret.Annotations = map[string]string{token.UsedByAnnotation: csr.Name}
	if v := Decide(csr, secret); !v.Approve {
		t.Errorf("the claimed CSR itself: %+v", v)
	}
}

// Only a bound token's kubelet client CSRs are the approver's: not the kubeadm group's, not a
// node's renewal, not another signer.
func TestDecideLeavesOthersAlone(t *testing.T) {
	for what, change := range map[string]func(*certificatesv1.CertificateSigningRequest){
		"kubeadm's token group": func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Groups = []string{token.DefaultGroup, "system:bootstrappers", "system:authenticated"}
		},
		"a renewal by the node": func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username, c.Spec.Groups = "system:node:w1", []string{"system:nodes", token.BoundGroup}
		},
		"the serving signer": func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeletServingSignerName
		},
	} {
		csr := boundCSR(t)
		change(csr)
		if v := Decide(csr, boundSecret()); v.Ours || v.Approve || v.Reason != "" {
			t.Errorf("%s: %+v, want it left alone", what, v)
		}
	}
}

func elliptic256() elliptic.Curve          { return elliptic.P256() }
func x509Request() x509.CertificateRequest { return x509.CertificateRequest{} }
