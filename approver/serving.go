package approver

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// Reasons of the approver's decisions on kubelet serving certificates.
const (
	ReasonServingApproved = "KjoinServingApproved"
	ReasonServingDenied   = "KjoinServingNotTheNodes"
)

var servingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}

// NodeOfServingCSR is the node a kubelet serving CSR comes from ("" when its user is not a
// node).
func NodeOfServingCSR(csr *certificatesv1.CertificateSigningRequest) string {
	name, ok := strings.CutPrefix(csr.Spec.Username, "system:node:")
	if !ok || !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return ""
	}
	return name
}

// DecideServing decides on a kubelet serving CSR (signer kubernetes.io/kubelet-serving), given
// the Node its user names (nil: there is none). It is approved only when a node asks for
// itself: the user system:node:NAME in system:nodes, CN system:node:NAME, O system:nodes,
// server usages, a key as for client certificates, and every DNS name and IP address one the
// Node reports as its own (status.addresses), at least one. Every other serving CSR is denied
// with the reason. Renewals are decided the same way for as long as the Node exists.
func DecideServing(csr *certificatesv1.CertificateSigningRequest, node *corev1.Node) Verdict {
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return Verdict{}
	}
	v := Verdict{Ours: true, Reason: ReasonServingDenied}
	name := NodeOfServingCSR(csr)
	switch {
	case name == "":
		v.Message = fmt.Sprintf("a kubelet serving certificate is for a node to ask for itself; %q (groups %q) is not a node", csr.Spec.Username, csr.Spec.Groups)
		return v
	case node == nil:
		v.Message = fmt.Sprintf("node %s is not in the cluster: no addresses to check the request against", name)
		return v
	}
	var problems []string
	block, _ := pem.Decode(csr.Spec.Request)
	var req *x509.CertificateRequest
	var err error
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		problems = append(problems, "holds no PEM certificate request")
	} else if req, err = x509.ParseCertificateRequest(block.Bytes); err != nil {
		problems = append(problems, "holds a certificate request that does not parse: "+err.Error())
	}
	if req != nil {
		problems = append(problems, servingProblems(csr, req, node)...)
	}
	if len(problems) > 0 {
		v.Message = fmt.Sprintf("node %s's serving certificate request %s", name, strings.Join(problems, "; "))
		return v
	}
	v.Approve, v.Reason, v.Message = true, ReasonServingApproved, fmt.Sprintf("node %s asks for a serving certificate for its own names and addresses: approved by kjoin's approver", name)
	return v
}

func servingProblems(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest, node *corev1.Node) []string {
	problems := nodeRequestProblems(csr, req, node.Name, certificatesv1.UsageServerAuth, servingUsages)
	var names, ips []string
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names = append(names, a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip.String())
			}
		}
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 {
		problems = append(problems, "names no DNS name or IP address")
	}
	for _, d := range req.DNSNames {
		if !slices.Contains(names, d) {
			problems = append(problems, fmt.Sprintf("names %q, which is not among the Node's names %q", d, names))
		}
	}
	for _, ip := range req.IPAddresses {
		if !slices.Contains(ips, ip.String()) {
			problems = append(problems, fmt.Sprintf("names the address %s, which is not among the Node's %q", ip, ips))
		}
	}
	if len(req.EmailAddresses)+len(req.URIs) > 0 {
		problems = append(problems, "names e-mail addresses or URIs")
	}
	return problems
}
