// Package verify proves a join after the fact, from the cluster's side: for each node it is
// registered, Ready, untainted by the node lifecycle controller, holding a renewing Lease,
// given a pod CIDR where the cluster allocates them, with no CSR left pending; for control
// planes also its etcd member (started, a voter), the member count, member health, the static
// pods and the API server's /livez verified by the cluster CA. Each check is pass, warn or
// fail with its evidence. It reads the cluster only; it changes nothing and knows nothing of
// the command line or of the host's files.
package verify

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/tlsbootstrap"
)

// Status of a check.
type Status string

// Check statuses.
const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
	// Skip: the check did not run because what it needs failed or is missing (the evidence says which).
	Skip Status = "skip"
)

// Check is one verified fact, with its evidence. IDs are stable (automation keys on them).
type Check struct {
	ID       string
	Node     string
	Status   Status
	Summary  string
	Evidence string
}

// Report is the outcome of a verification.
type Report struct {
	Nodes  []string
	Checks []Check
	// Failed counts the failed checks; zero means the join is verified.
	Failed int
	Warned int
}

// Options say what to verify and with what.
type Options struct {
	Client kubernetes.Interface
	// Nodes to verify; empty means every node.
	Nodes []string
	// Etcd connects to the cluster's etcd (nil: etcd checks are reported as warnings).
	Etcd func(endpoints []string) (etcd.Conn, error)
	// EtcdPeer asks whether a member's peer URL answers (nil: not asked; only learners that
	// never started are then reported as left behind).
	EtcdPeer etcd.PeerProbe
	// HTTP probes an API server's /livez, TLS verified by the cluster CA (CA).
	HTTP func(roots *x509.CertPool) *http.Client
	CA   *x509.CertPool
	// LeaseRenewInterval is how often a kubelet renews its Lease (10s); a Lease older than
	// that is watched until it advances, for at most LeaseObserve.
	LeaseRenewInterval time.Duration
	LeaseObserve       time.Duration
	Clock              Clock
	// KubeletTLS returns the certificate chain a kubelet serves at addr (host:port), without
	// verifying it (nil: the serving certificate is not checked).
	KubeletTLS func(ctx context.Context, addr string) ([]*x509.Certificate, error)
}

// Clock is the part of k8s.io/utils/clock verify uses.
type Clock interface {
	Now() time.Time
	Since(time.Time) time.Duration
	After(time.Duration) <-chan time.Time
}

const (
	labelControlPlane = "node-role.kubernetes.io/control-plane"
	taintNotReady     = "node.kubernetes.io/not-ready"
	taintUnreachable  = "node.kubernetes.io/unreachable"
)

// Run verifies the nodes and returns the report. An error means the cluster could not be
// read at all.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.LeaseRenewInterval == 0 {
		o.LeaseRenewInterval = 10 * time.Second
	}
	if o.LeaseObserve == 0 {
		o.LeaseObserve = 2*o.LeaseRenewInterval + 2*time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	all, err := o.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	byName := map[string]*corev1.Node{}
	var controlPlanes []string
	for i := range all.Items {
		n := &all.Items[i]
		byName[n.Name] = n
		if _, ok := n.Labels[labelControlPlane]; ok {
			controlPlanes = append(controlPlanes, n.Name)
		}
	}
	names := o.Nodes
	if len(names) == 0 {
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	v := &verifier{o: o, r: &Report{Nodes: names, Checks: []Check{}}}
	defer func() {
		if v.conn != nil {
			_ = v.conn.Close()
		}
	}()
	v.allocatesPodCIDRs = v.podCIDRsAllocated(ctx, all.Items)
	csrs, csrErr := o.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	var etcdChecked bool
	for _, name := range names {
		n := byName[name]
		if n == nil {
			v.add(Check{ID: "node.registered", Node: name, Status: Fail, Summary: "no Node of this name is registered",
				Evidence: fmt.Sprintf("registered nodes: %s", strings.Join(sortedKeys(byName), ", "))})
			continue
		}
		v.add(Check{ID: "node.registered", Node: name, Status: Pass, Summary: "registered",
			Evidence: fmt.Sprintf("created %s, kubelet %s", n.CreationTimestamp.UTC().Format(time.RFC3339), n.Status.NodeInfo.KubeletVersion)})
		v.nodeChecks(ctx, n)
		v.csrCheck(name, csrs, csrErr)
		if _, cp := n.Labels[labelControlPlane]; cp {
			v.controlPlaneChecks(ctx, n, controlPlanes, !etcdChecked)
			etcdChecked = true
		}
	}
	return v.r, nil
}

type verifier struct {
	o                 Options
	r                 *Report
	allocatesPodCIDRs bool
	members           []member
	membersErr        error
	membersRead       bool
	conn              etcd.Conn // open once the members were listed

}

func (v *verifier) add(c Check) {
	v.r.Checks = append(v.r.Checks, c)
	switch c.Status {
	case Fail:
		v.r.Failed++
	case Warn:
		v.r.Warned++
	}
}

func (v *verifier) nodeChecks(ctx context.Context, n *corev1.Node) {
	name := n.Name
	ready := Check{ID: "node.ready", Node: name, Status: Fail, Summary: "no Ready condition reported"}
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		ready.Evidence = fmt.Sprintf("Ready=%s reason %s: %s (since %s)", c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.RFC3339))
		if c.Status == corev1.ConditionTrue {
			ready.Status, ready.Summary = Pass, "Ready"
		} else {
			ready.Summary = "not Ready (kjoin diagnose on the node says why)"
		}
	}
	v.add(ready)
	var bad []string
	for _, t := range n.Spec.Taints {
		if t.Key == taintNotReady || t.Key == taintUnreachable {
			bad = append(bad, t.Key+":"+string(t.Effect))
		}
	}
	if len(bad) > 0 {
		v.add(Check{ID: "node.taints", Node: name, Status: Fail, Summary: "tainted by the node lifecycle controller", Evidence: strings.Join(bad, ", ")})
	} else {
		v.add(Check{ID: "node.taints", Node: name, Status: Pass, Summary: "no not-ready or unreachable taint", Evidence: fmt.Sprintf("%d taint(s)", len(n.Spec.Taints))})
	}
	v.leaseCheck(ctx, name)
	v.servingCheck(ctx, n)
	switch {
	case n.Spec.PodCIDR != "":
		v.add(Check{ID: "node.podcidr", Node: name, Status: Pass, Summary: "pod CIDR assigned", Evidence: n.Spec.PodCIDR})
	case v.allocatesPodCIDRs:
		v.add(Check{ID: "node.podcidr", Node: name, Status: Fail, Summary: "no pod CIDR, though the cluster allocates them", Evidence: "kube-controller-manager runs with --allocate-node-cidrs=true"})
	default:
		v.add(Check{ID: "node.podcidr", Node: name, Status: Pass, Summary: "the cluster does not allocate pod CIDRs to nodes"})
	}
}

// servingCheck: the kubelet's serving certificate, as it serves it, is signed by the cluster
// CA, valid now, and names every address and host name the Node reports. A self-signed one
// (the kubelet's default, serverTLSBootstrap off) is reported as skipped: nothing can verify
// it, which is the kubelet's choice, not a fault.
func (v *verifier) servingCheck(ctx context.Context, n *corev1.Node) {
	if v.o.KubeletTLS == nil || v.o.CA == nil {
		return
	}
	c := Check{ID: "node.serving-cert", Node: n.Name, Status: Fail}
	var ip string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && ip == "" {
			ip = a.Address
		}
	}
	port := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port == 0 {
		port = 10250
	}
	if ip == "" {
		c.Status, c.Summary = Skip, "the Node reports no internal IP to reach its kubelet at"
		v.add(c)
		return
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	chain, err := v.o.KubeletTLS(cctx, addr)
	cancel()
	if err != nil || len(chain) == 0 {
		c.Status, c.Summary, c.Evidence = Warn, "cannot reach the kubelet's TLS port", fmt.Sprintf("%s: %v", addr, err)
		v.add(c)
		return
	}
	leaf := chain[0]
	c.Evidence = fmt.Sprintf("%s serves %q issued by %q, valid until %s", addr, leaf.Subject.CommonName, leaf.Issuer.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339))
	inter := x509.NewCertPool()
	for _, ic := range chain[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: v.o.CA, Intermediates: inter, CurrentTime: v.o.Clock.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		if kubeletMade(chain, v.o.Clock.Now()) {
			c.Status, c.Summary = Skip, "the kubelet's own self-signed serving certificate (serverTLSBootstrap off): kubectl logs/exec and metrics-server cannot verify this kubelet (kjoin join --kubelet-serving-certificates, with kjoin approver)"
		} else {
			// A certificate of another CA may be the operator's (tlsCertFile): worth a look, not a failure.
			c.Status, c.Summary = Warn, "serving certificate not signed by the cluster CA: "+err.Error()
		}
		v.add(c)
		return
	}
	var missing []string
	for _, a := range n.Status.Addresses {
		if leaf.VerifyHostname(a.Address) != nil {
			missing = append(missing, a.Address)
		}
	}
	if len(missing) > 0 {
		c.Summary = "serving certificate signed by the cluster CA, but it does not name " + strings.Join(missing, ", ")
		v.add(c)
		return
	}
	c.Status, c.Summary = Pass, "serving certificate signed by the cluster CA, naming the Node's addresses"
	v.add(c)
}

// kubeletMade reports whether a served chain is the kubelet's own self-signed one: a single
// self-signed certificate, or a leaf issued by the chain's own self-signed root named as the
// kubelet names it ("<host>-ca@<unix time>").
func kubeletMade(chain []*x509.Certificate, now time.Time) bool {
	root := chain[len(chain)-1]
	if root.CheckSignatureFrom(root) != nil || (len(chain) > 1 && !strings.Contains(root.Subject.CommonName, "-ca@")) {
		return false
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(root)
	if len(chain) > 2 {
		for _, c := range chain[1 : len(chain)-1] {
			inter.AddCert(c)
		}
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// leaseCheck: the Lease exists, is held by the node and renews (younger than the renew
// interval, or seen to advance).
func (v *verifier) leaseCheck(ctx context.Context, name string) {
	leases := v.o.Client.CoordinationV1().Leases("kube-node-lease")
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		v.add(Check{ID: "node.lease", Node: name, Status: Fail, Summary: "no Lease in kube-node-lease", Evidence: err.Error()})
		return
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if holder != name {
		v.add(Check{ID: "node.lease", Node: name, Status: Fail, Summary: "the Lease is not held by the node", Evidence: fmt.Sprintf("holder %q", holder)})
		return
	}
	if l.Spec.RenewTime == nil {
		v.add(Check{ID: "node.lease", Node: name, Status: Fail, Summary: "the Lease was never renewed"})
		return
	}
	first := l.Spec.RenewTime.Time
	age := v.o.Clock.Since(first)
	if age <= v.o.LeaseRenewInterval {
		v.add(Check{ID: "node.lease", Node: name, Status: Pass, Summary: "the Lease is renewing", Evidence: fmt.Sprintf("renewed %s ago", age.Round(time.Second))})
		return
	}
	start := v.o.Clock.Now()
	for v.o.Clock.Since(start) < v.o.LeaseObserve {
		select {
		case <-ctx.Done():
			return
		case <-v.o.Clock.After(time.Second):
		}
		if l, err := leases.Get(ctx, name, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first) {
			v.add(Check{ID: "node.lease", Node: name, Status: Pass, Summary: "the Lease is renewing",
				Evidence: fmt.Sprintf("renewTime advanced from %s to %s", first.UTC().Format(time.RFC3339), l.Spec.RenewTime.UTC().Format(time.RFC3339))})
			return
		}
	}
	v.add(Check{ID: "node.lease", Node: name, Status: Fail, Summary: "the Lease is not renewing: the kubelet is not reporting",
		Evidence: fmt.Sprintf("last renewed %s ago, unchanged for %s", age.Round(time.Second), v.o.LeaseObserve)})
}

func (v *verifier) csrCheck(name string, csrs *certificatesv1.CertificateSigningRequestList, err error) {
	if err != nil {
		v.add(Check{ID: "node.csr", Node: name, Status: Warn, Summary: "cannot list CSRs", Evidence: err.Error()})
		return
	}
	var pending []string
	for _, c := range csrs.Items {
		if !forNode(c, name) || len(c.Status.Certificate) > 0 || finished(c) {
			continue
		}
		pending = append(pending, fmt.Sprintf("%s (%s, created %s)", c.Name, c.Spec.SignerName, c.CreationTimestamp.UTC().Format(time.RFC3339)))
	}
	if len(pending) > 0 {
		v.add(Check{ID: "node.csr", Node: name, Status: Fail, Summary: "CSR(s) of the node left pending", Evidence: strings.Join(pending, "; ")})
		return
	}
	v.add(Check{ID: "node.csr", Node: name, Status: Pass, Summary: "no CSR of the node pending"})
}

func forNode(c certificatesv1.CertificateSigningRequest, name string) bool {
	return tlsbootstrap.IsNodeCSR(&c, name)
}

func finished(c certificatesv1.CertificateSigningRequest) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed {
			return true
		}
	}
	return false
}

// podCIDRsAllocated: the controller-manager runs with --allocate-node-cidrs=true, or some
// node already has a pod CIDR.
func (v *verifier) podCIDRsAllocated(ctx context.Context, nodes []corev1.Node) bool {
	pods, err := v.o.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "component=kube-controller-manager"})
	if err == nil {
		for _, p := range pods.Items {
			for _, c := range p.Spec.Containers {
				for _, a := range c.Command {
					if a == "--allocate-node-cidrs=true" {
						return true
					}
				}
			}
		}
	}
	for _, n := range nodes {
		if n.Spec.PodCIDR != "" {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]*corev1.Node) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
