package phases

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/tlsbootstrap"
)

// IssueWith returns a signer that issues whatever cfg says, for pub (nil: the CSR's own key).
func issueWith(h *testHost, cfg func(*pki.CertConfig), pub func(req *x509.CertificateRequest) any) func(*certificatesv1.CertificateSigningRequest) error {
	return func(csr *certificatesv1.CertificateSigningRequest) error {
		req, err := parseCSR(csr.Spec.Request)
		if err != nil {
			return err
		}
		now := time.Now()
		c := pki.CertConfig{CommonName: req.Subject.CommonName, Organization: req.Subject.Organization,
			Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour)}
		cfg(&c)
		key := any(req.PublicKey)
		if pub != nil {
			key = pub(req)
		}
		cert, err := pki.NewSignedCert(c, key, h.server.CA, h.server.CAKey)
		if err != nil {
			return err
		}
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
		csr.Status.Certificate = pki.EncodeCert(cert)
		return nil
	}
}

func parseCSR(p []byte) (*x509.CertificateRequest, error) {
	return x509.ParseCertificateRequest(mustPEM(p))
}

func mustPEM(p []byte) []byte {
	b, _ := pem.Decode(p)
	if b == nil {
		return nil
	}
	return b.Bytes
}

// What the cluster issues is verified before it is installed; a bad certificate
// is refused, nothing is installed and the CSR is not resumed later.
func TestIssuedCertificateIsVerified(t *testing.T) {
	t.Parallel()
	other, _ := pki.NewECKey()
	foreignKey, _ := pki.NewECKey()
	foreignCA, _ := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "foreign", NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}, foreignKey)
	cases := []struct {
		name string
		sign func(h *testHost) func(*certificatesv1.CertificateSigningRequest) error
		want string
	}{
		{"another key", func(h *testHost) func(*certificatesv1.CertificateSigningRequest) error {
			return issueWith(h, func(*pki.CertConfig) {}, func(*x509.CertificateRequest) any { return other.Public() })
		}, "another public key"},
		{"another node", func(h *testHost) func(*certificatesv1.CertificateSigningRequest) error {
			return issueWith(h, func(c *pki.CertConfig) { c.CommonName = "system:node:w9" }, nil)
		}, `"system:node:w9"`},
		{"not in system:nodes", func(h *testHost) func(*certificatesv1.CertificateSigningRequest) error {
			return issueWith(h, func(c *pki.CertConfig) { c.Organization = []string{"system:masters"} }, nil)
		}, "system:masters"},
		{"server usage only", func(h *testHost) func(*certificatesv1.CertificateSigningRequest) error {
			return issueWith(h, func(c *pki.CertConfig) { c.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }, nil)
		}, "client certificate"},
		{"another CA", func(h *testHost) func(*certificatesv1.CertificateSigningRequest) error {
			return func(csr *certificatesv1.CertificateSigningRequest) error {
				req, _ := parseCSR(csr.Spec.Request)
				c, err := pki.NewSignedCert(pki.CertConfig{CommonName: req.Subject.CommonName, Organization: req.Subject.Organization,
					Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}, req.PublicKey, foreignCA, foreignKey)
				csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
				csr.Status.Certificate = pki.EncodeCert(c)
				return err
			}
		}, "unknown authority"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHost(t)
			h.sign = tc.sign(h)
			s := &State{Opts: h.options(t)}
			_, err := Run(context.Background(), h.env, s, Join, RunOptions{})
			if operr.CodeOf(err) != operr.Trust || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a trust error naming %q", err, tc.want)
			}
			if h.env.Exists(host.KubeletKubeconfig) || h.env.Exists(host.KubeletClientCurrent) || h.env.Exists(pendingKeyPath) {
				t.Error("a refused certificate left kubelet.conf, the client certificate or the pending key behind")
			}
			j, _ := LoadJournal(h.env)
			if j.CSR != "" || j.PendingKey != "" {
				t.Errorf("journal still resumes CSR %q", j.CSR)
			}
		})
	}
}

// A denied CSR is forgotten: the next run creates a new one instead of resuming it.
func TestDeniedCSRIsNotResumed(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	good := h.sign
	denied := ""
	h.sign = func(csr *certificatesv1.CertificateSigningRequest) error {
		denied = csr.Name
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "Policy"}}
		return nil
	}
	_, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Auth || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("got %v", err)
	}
	if j, _ := LoadJournal(h.env); j.CSR != "" {
		t.Fatalf("journal keeps the denied CSR %s", j.CSR)
	}
	h.sign = good
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("re-run: %v\n%s", err, h.out)
	}
	if s.CSRName == denied || !strings.HasPrefix(s.CSRName, "kjoin-w1-") {
		t.Errorf("re-run used CSR %q, want a new one (not the denied %s)", s.CSRName, denied)
	}
}

// A journal CSR that asks for another key than the kept one is not resumed.
func TestResumedCSRMustMatchKeptKey(t *testing.T) {
	t.Parallel()
	otherKey, _ := pki.NewECKey()
	csrPEM, _ := tlsbootstrap.NewCSR("w1", otherKey)
	old := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "kjoin-w1-old"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName}}
	h := newTestHost(t, old)
	kept, _ := pki.NewECKey()
	keyPEM, _ := pki.EncodeKey(kept)
	if err := os.MkdirAll(h.env.Paths.Of(host.KubeletPKIDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.env.Paths.Of(pendingKeyPath), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	j := &Journal{Node: "w1", CSR: "kjoin-w1-old", PendingKey: pendingKeyPath, Phases: []string{"preflight", "discovery"}}
	if err := j.Save(h.env); err != nil {
		t.Fatal(err)
	}
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	if s.CSRName == "kjoin-w1-old" || !strings.Contains(h.out.String(), "another public key") {
		t.Errorf("resumed CSR %q; output:\n%s", s.CSRName, h.out)
	}
}

func TestJoinRefusesNameOfReadyNode(t *testing.T) {
	t.Parallel()
	ready := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	h := newTestHost(t, ready)
	s := &State{Opts: h.options(t)}
	_, err := Run(context.Background(), h.env, s, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), `"w1" is already registered and Ready`) || !strings.Contains(operr.HintOf(err), "kubectl delete node w1") {
		t.Fatalf("got %v (hint %q)", err, operr.HintOf(err))
	}
	assertNothingWritten(t, h)
}
