// Package tlsbootstrap obtains a kubelet client certificate the way the kubelet would, but
// from the join tool: a local key, a CertificateSigningRequest authenticated with the
// bootstrap token, and a precise account of what happened to it (approved, denied, failed,
// or never signed).
package tlsbootstrap

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	certificatesclient "k8s.io/client-go/kubernetes/typed/certificates/v1"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/operr"
)

// AutoApproveBinding is the ClusterRoleBinding kubeadm creates so that the controller-manager
// approves kubelet client CSRs made with a bootstrap token.
const AutoApproveBinding = "kubeadm:node-autoapprove-bootstrap"

// Request asks for a kubelet client certificate.
type Request struct {
	Client   kubernetes.Interface
	NodeName string
	Key      crypto.Signer
	Timeout  time.Duration
	Interval time.Duration
	Clock    clock.Clock
	// Logf receives progress lines; may be nil.
	Logf func(format string, args ...any)
}

// Issued is a signed certificate.
type Issued struct {
	CSRName  string
	CertPEM  []byte
	Approved time.Duration // from creation to approval
	Signed   time.Duration // from creation to certificate
}

// NewCSR returns the PEM CSR for a node: CN system:node:<name>, O system:nodes.
func NewCSR(nodeName string, key crypto.Signer) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// Create submits a CSR and returns its name.
func Create(ctx context.Context, r Request) (string, error) {
	csrPEM, err := NewCSR(r.NodeName, r.Key)
	if err != nil {
		return "", fmt.Errorf("create CSR: %w", err)
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if _, isRSA := r.Key.Public().(interface{ Size() int }); isRSA {
		usages = append(usages, certificatesv1.UsageKeyEncipherment)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kjoin-" + r.NodeName + "-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrPEM,
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     usages,
		},
	}
	created, err := r.Client.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsUnauthorized(err) {
			return "", operr.Wrap(operr.Auth, err, "the API server rejected the bootstrap token", "the token may have expired or been deleted: create a new one with kjoin token create")
		}
		if apierrors.IsForbidden(err) {
			return "", operr.Wrap(operr.Auth, err, "the bootstrap token may not create CertificateSigningRequests",
				"kubeadm binds ClusterRole system:node-bootstrapper to group system:bootstrappers:kubeadm:default-node-token (ClusterRoleBinding kubeadm:kubelet-bootstrap); check it and the token's auth-extra-groups")
		}
		return "", fmt.Errorf("create CertificateSigningRequest: %w", err)
	}
	return created.Name, nil
}

// Wait waits until the named CSR is issued, and explains exactly why when it is not.
func Wait(ctx context.Context, r Request, name string) (*Issued, error) {
	if r.Interval == 0 {
		r.Interval = 200 * time.Millisecond
	}
	if r.Logf == nil {
		r.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	start := r.Clock.Now()
	out := &Issued{CSRName: name}
	// check reports whether the CSR reached a final state (issued, denied, failed).
	check := func(csr *certificatesv1.CertificateSigningRequest) (bool, error) {
		for _, c := range csr.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case certificatesv1.CertificateDenied:
				return true, operr.Newf(operr.Auth, "inspect it with kubectl describe csr "+name+"; an approver denied this node's certificate",
					"CSR %s was denied (reason %q: %s)", name, c.Reason, c.Message)
			case certificatesv1.CertificateFailed:
				return true, operr.Newf(operr.Other, "check the controller-manager's logs (csrsigning) on the control plane",
					"CSR %s failed (reason %q: %s)", name, c.Reason, c.Message)
			case certificatesv1.CertificateApproved:
				if out.Approved == 0 {
					out.Approved = r.Clock.Since(start)
					r.Logf("CSR %s approved after %s", name, out.Approved.Round(time.Millisecond))
				}
			}
		}
		if len(csr.Status.Certificate) > 0 {
			out.Signed = r.Clock.Since(start)
			out.CertPEM = csr.Status.Certificate
			return true, nil
		}
		return false, nil
	}
	csrs := r.Client.CertificatesV1().CertificateSigningRequests()
	for {
		csr, err := csrs.Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			if done, err := check(csr); done {
				if err != nil {
					return nil, err
				}
				return out, nil
			}
			// Watch for the approval and the certificate rather than polling: both land
			// within tens of milliseconds on a healthy control plane.
			if done, err := watchUntilFinal(ctx, csrs, name, csr.ResourceVersion, check); done {
				if err != nil {
					return nil, err
				}
				return out, nil
			}
		case apierrors.IsNotFound(err):
			return nil, operr.Newf(operr.Other, "it may have been garbage-collected or deleted; run the join again", "CSR %s disappeared before it was signed", name)
		case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
			return nil, operr.Wrap(operr.Auth, err, "the bootstrap token may not read CSR "+name, "check the ClusterRole system:node-bootstrapper binding")
		}
		select {
		case <-ctx.Done():
			if out.Approved == 0 {
				return nil, operr.Newf(operr.Timeout,
					fmt.Sprintf("kubeadm clusters auto-approve these CSRs through ClusterRoleBinding %s (group system:bootstrappers:kubeadm:default-node-token); check it exists and the controller-manager runs, or approve by hand: kubectl certificate approve %s", AutoApproveBinding, name),
					"CSR %s was not approved within %s", name, r.Timeout)
			}
			return nil, operr.Newf(operr.Timeout,
				"the controller-manager's csrsigning controller signs them with the cluster CA (--cluster-signing-cert-file/--cluster-signing-key-file); check it runs",
				"CSR %s was approved but not signed within %s", name, r.Timeout)
		case <-r.Clock.After(r.Interval):
		}
	}
}

// watchUntilFinal watches one CSR from resourceVersion until check reports a final state.
// It returns done=false when the watch ends early (the caller then reads and watches again).
func watchUntilFinal(ctx context.Context, csrs certificatesclient.CertificateSigningRequestInterface, name, rv string,
	check func(*certificatesv1.CertificateSigningRequest) (bool, error)) (bool, error) {
	w, err := csrs.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv})
	if err != nil {
		return false, nil
	}
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return false, nil
		case e, open := <-w.ResultChan():
			if !open {
				return false, nil
			}
			ev = e
		}
		csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return false, nil
		}
		if csr.Name != name {
			continue
		}
		if done, err := check(csr); done {
			return true, err
		}
	}
}
