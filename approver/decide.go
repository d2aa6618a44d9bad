// Package approver is kjoin's certificate approver: it decides on the kubelet client CSRs
// made with tokens bound to one node (kjoin token create --node), which no binding of
// kubeadm's lets the controller-manager approve, and on kubelet serving CSRs (a node asking
// for a certificate for its own names and addresses). A bound token joins one machine, as its
// node, once: its first CSR for that node's identity is approved and the token claimed; any
// other is denied with the reason, and a token used for another name is deleted (it leaked).
// It runs on control planes (kjoin approver), needs no container image, and any number of
// copies may run at once: a decision is an update the API server accepts once.
package approver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"kjoin.dev/kjoin/token"
)

// Verdict is the approver's decision on one CSR.
type Verdict struct {
	// Ours: a CSR made with a bound token for the kubelet client signer; others are left to
	// the cluster's other approvers (Approve and Reason are then unset).
	Ours bool
	// TokenID is the bound token's ID (from the requesting user).
	TokenID string
	Approve bool
	// Reason is the condition's reason (CamelCase), Message says why, for kubectl describe csr.
	Reason, Message string
	// Leaked: the token was used for what it was not made for; it is to be deleted.
	Leaked bool
	// Node is the node an approval is for (a single-use token's: the name its CSR asks for).
	Node string
}

// Reasons of the approver's conditions.
const (
	ReasonApproved     = "KjoinBoundTokenApproved"
	ReasonTokenUnknown = "KjoinBoundTokenUnknown"
	ReasonTokenUsed    = "KjoinBoundTokenUsed"
	ReasonNotForNode   = "KjoinBoundTokenNotForThisRequest"
)

// allowedUsages are the key usages a kubelet client certificate may ask for; client auth
// is required.
var allowedUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}

// Decide decides on csr, given the Secret of the token its user names (nil: there is none).
// It reads nothing else.
func Decide(csr *certificatesv1.CertificateSigningRequest, secret *corev1.Secret) Verdict {
	id, isBootstrap := tokenID(csr)
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !isBootstrap || !slices.Contains(csr.Spec.Groups, token.BoundGroup) {
		return Verdict{}
	}
	v := Verdict{Ours: true, TokenID: id}
	deny := func(reason string, leaked bool, format string, a ...any) Verdict {
		v.Reason, v.Leaked, v.Message = reason, leaked, fmt.Sprintf(format, a...)
		return v
	}
	if secret == nil {
		return deny(ReasonTokenUnknown, false, "bound token %s is unknown to the cluster: it was used already, deleted or has expired", id)
	}
	node, labelled := secret.Labels[token.NodeLabel]
	if !labelled {
		return deny(ReasonTokenUnknown, false, "token %s is in group %s but names no node (label %s): it was not made by kjoin token create --node or --uses 1", id, token.BoundGroup, token.NodeLabel)
	}
	kind, joins := "bound token "+id, "joins node "+node+" only"
	if node == "" { // single use (--uses 1): the node is the one its first request asks to be
		kind, joins = "single-use token "+id, "joins one node"
		if node = requestedNode(csr); node == "" {
			return deny(ReasonNotForNode, true, "%s %s, and this request asks for no node's identity (CN system:node:NAME); the token is deleted (whoever sent this holds it)", kind, joins)
		}
	}
	// A request not its node's first: whoever sent it holds the token, used or not.
	if problems := check(csr, node); len(problems) > 0 {
		return deny(ReasonNotForNode, true, "%s %s, and this request %s; the token is deleted (whoever sent this holds it)", kind, joins, strings.Join(problems, "; "))
	}
	if used := secret.Annotations[token.UsedByAnnotation]; used != "" && used != csr.Name {
		return deny(ReasonTokenUsed, false, "%s was used already, for CSR %s: it joins one machine once", kind, used)
	}
	v.Approve, v.Reason, v.Node, v.Message = true, ReasonApproved, node, fmt.Sprintf("%s, for node %s: approved once by kjoin's approver", kind, node)
	return v
}

// requestedNode is the node name csr's request asks for (CN system:node:NAME, NAME a valid
// node name), or "".
func requestedNode(csr *certificatesv1.CertificateSigningRequest) string {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return ""
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return ""
	}
	name, ok := strings.CutPrefix(req.Subject.CommonName, "system:node:")
	if !ok || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return ""
	}
	return name
}

// check lists what in csr is not a kubelet client certificate request of node.
func check(csr *certificatesv1.CertificateSigningRequest, node string) []string {
	var problems []string
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return []string{"holds no PEM certificate request"}
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return []string{"holds a certificate request that does not parse: " + err.Error()}
	}
	problems = append(problems, nodeRequestProblems(csr, req, node, certificatesv1.UsageClientAuth, allowedUsages)...)
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		problems = append(problems, "asks for subject alternative names, which a client certificate has none of")
	}
	return problems
}

// nodeRequestProblems lists what a node's certificate request gets wrong in what client and
// serving certificates share: signed by its own key, CN system:node:<node>, O exactly
// system:nodes, the required usage and no usage outside allowed, the key.
func nodeRequestProblems(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest, node string, required certificatesv1.KeyUsage, allowed []certificatesv1.KeyUsage) []string {
	var problems []string
	if err := req.CheckSignature(); err != nil {
		problems = append(problems, "is not signed by its own key: "+err.Error())
	}
	if want := "system:node:" + node; req.Subject.CommonName != want {
		problems = append(problems, fmt.Sprintf("asks for %q, not %q", req.Subject.CommonName, want))
	}
	if !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		problems = append(problems, fmt.Sprintf("asks for the groups %q, not exactly [system:nodes]", req.Subject.Organization))
	}
	if !slices.Contains(csr.Spec.Usages, required) {
		problems = append(problems, fmt.Sprintf("does not ask for %q", required))
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(allowed, u) {
			problems = append(problems, fmt.Sprintf("asks for the usage %q", u))
		}
	}
	if p := keyProblem(req); p != "" {
		problems = append(problems, p)
	}
	return problems
}

// keyProblem says what is wrong with a request's key ("": nothing): ECDSA P-256 or P-384, or
// RSA of 2048 bits or more.
func keyProblem(req *x509.CertificateRequest) string {
	switch k := req.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return "has an ECDSA key on a curve other than P-256 or P-384"
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Sprintf("has a %d-bit RSA key (at least 2048)", k.N.BitLen())
		}
	default:
		return fmt.Sprintf("has a %T key (ECDSA P-256/P-384 or RSA of 2048 bits or more)", req.PublicKey)
	}
	return ""
}
