package diagnose

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kjoin.dev/kjoin/host"
)

// nodeMonitorGrace is the node-lifecycle controller's default grace period.
const nodeMonitorGrace = 40 * time.Second

// connectivityChecks follow the kubelet's path to the API server named in kubelet.conf. It
// reports whether an authenticated request succeeded.
func (g *diagnosis) connectivityChecks(ctx context.Context) bool {
	if g.server == "" {
		g.fail("api.config", "kubelet.conf names no API server", host.KubeletKubeconfig)
		return false
	}
	u, err := url.Parse(g.server)
	if err != nil || u.Hostname() == "" {
		g.fail("api.config", "kubelet.conf's server is not a URL", g.server)
		return false
	}
	apiHost, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	if net.ParseIP(apiHost) == nil {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		addrs, err := g.d.LookupHost(cctx, apiHost)
		cancel()
		if err != nil {
			g.fail("api.dns", "the API server's name does not resolve", fmt.Sprintf("%s: %v", apiHost, err))
			return false
		}
		g.pass("api.dns", "the API server's name resolves", apiHost+" → "+strings.Join(addrs, ", "))
	}
	addr := net.JoinHostPort(apiHost, port)
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	conn, err := g.d.Dial(cctx, "tcp", addr)
	cancel()
	if err != nil {
		g.fail("api.tcp", "the API server is unreachable from this node", fmt.Sprintf("TCP %s: %v", addr, err))
		return false
	}
	conn.Close()
	g.pass("api.tcp", "TCP connection to the API server", addr)
	if g.caPool == nil {
		g.fail("api.tls", "kubelet.conf holds no usable CA", host.KubeletKubeconfig)
		return false
	}
	tlsCfg := &tls.Config{RootCAs: g.caPool, ServerName: apiHost}
	if pair, err := tls.X509KeyPair(g.certPEM, g.certPEM); err == nil {
		tlsCfg.Certificates = []tls.Certificate{pair}
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg, DialContext: g.d.Dial}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(g.server, "/")+"/api/v1/nodes/"+g.r.Node, nil)
	resp, err := client.Do(req)
	if err != nil {
		var verr *tls.CertificateVerificationError
		switch {
		case errors.As(err, &verr):
			g.fail("api.tls", "the API server's certificate does not verify with kubelet.conf's CA", err.Error())
		case isTimeout(err):
			g.fail("api.tls", "the API server accepted TCP but did not answer in time", err.Error())
		default:
			g.fail("api.tls", "TLS to the API server failed", err.Error())
		}
		return false
	}
	resp.Body.Close()
	g.pass("api.tls", "TLS verified by kubelet.conf's CA", addr)
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		skew := d.Sub(g.e.Clock.Now())
		if skew > time.Minute || skew < -time.Minute {
			g.fail("api.clock", "this node's clock differs from the API server's", fmt.Sprintf("API server is %s ahead", skew.Round(time.Second)))
		} else {
			g.pass("api.clock", "clock in step with the API server", fmt.Sprintf("skew %s", skew.Round(time.Second)))
		}
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNotFound:
		g.pass("api.auth", "the kubelet's credentials are accepted", fmt.Sprintf("GET /api/v1/nodes/%s: HTTP %d", g.r.Node, resp.StatusCode))
		return true
	case http.StatusUnauthorized:
		g.fail("api.auth", "the API server rejects the kubelet's certificate (401)", "expired, revoked or from another CA")
	case http.StatusForbidden:
		g.fail("api.auth", "the API server forbids the kubelet's request (403)", "the certificate's node name or group does not match (Node authorizer)")
	default:
		g.fail("api.auth", "unexpected answer to an authenticated request", fmt.Sprintf("HTTP %d", resp.StatusCode))
	}
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// nodeChecks read the Node and its Lease with the kubelet's own identity (or admin.conf).
func (g *diagnosis) nodeChecks(ctx context.Context, apiOK bool) {
	if !apiOK {
		g.warn("node.conditions", "not checked: the API server is not reachable with the kubelet's credentials", "")
		return
	}
	c, err := g.client()
	if err != nil {
		g.warn("node.conditions", "not checked", err.Error())
		return
	}
	n, err := c.CoreV1().Nodes().Get(ctx, g.r.Node, metav1.GetOptions{})
	if err != nil {
		g.fail("node.registered", "the Node is not registered", err.Error())
		return
	}
	var bad, all []string
	for _, cond := range n.Status.Conditions {
		s := fmt.Sprintf("%s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message)
		all = append(all, s)
		if (cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue) || (cond.Type != corev1.NodeReady && cond.Status == corev1.ConditionTrue) {
			bad = append(bad, s)
		}
		if cond.Type != corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			g.fail("node.pressure", "the kubelet reports "+string(cond.Type), s)
		}
	}
	if len(bad) > 0 {
		g.fail("node.conditions", "the Node is not healthy", strings.Join(bad, "; "))
	} else {
		g.pass("node.conditions", "the Node is Ready", strings.Join(all, "; "))
	}
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.Key+":"+string(t.Effect))
	}
	g.pass("node.taints", fmt.Sprintf("%d taint(s)", len(taints)), strings.Join(taints, ", "))
	if l, err := c.CoordinationV1().Leases("kube-node-lease").Get(ctx, g.r.Node, metav1.GetOptions{}); err != nil || l.Spec.RenewTime == nil {
		g.fail("node.lease", "the node has no renewed Lease", fmt.Sprint(err))
	} else if age := g.e.Clock.Since(l.Spec.RenewTime.Time); age > nodeMonitorGrace {
		g.fail("node.lease", "the Lease is older than the node-monitor grace period", fmt.Sprintf("renewed %s ago (grace %s)", age.Round(time.Second), nodeMonitorGrace))
	} else {
		g.pass("node.lease", "the Lease is fresh", fmt.Sprintf("renewed %s ago", age.Round(time.Second)))
	}
	if n.Spec.PodCIDR == "" {
		g.warn("node.podcidr", "no pod CIDR assigned (fine unless the cluster allocates them)", "")
	} else {
		g.pass("node.podcidr", "pod CIDR assigned", n.Spec.PodCIDR)
	}
	if csrs, err := c.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err == nil {
		var pending []string
		for _, r := range csrs.Items {
			if r.Spec.Username == "system:node:"+g.r.Node && len(r.Status.Certificate) == 0 && !decided(r) {
				pending = append(pending, r.Name)
			}
		}
		if len(pending) > 0 {
			g.warn("cert.csr", "certificate rotation CSR(s) pending", strings.Join(pending, ", "))
		} else {
			g.pass("cert.csr", "no rotation CSR pending", "")
		}
	}
}

func decided(r certificatesv1.CertificateSigningRequest) bool {
	return len(r.Status.Conditions) > 0
}

// client reads the cluster as the kubelet (admin.conf when present: it may read more).
func (g *diagnosis) client() (kubernetes.Interface, error) {
	if g.kube != nil {
		return g.kube, nil
	}
	if g.e.Exists(host.AdminKubeconfig) {
		if c, _, err := g.e.ClientFromKubeconfig(host.AdminKubeconfig); err == nil {
			g.kube = c
			return c, nil
		}
	}
	c, err := g.e.Client(&rest.Config{Host: g.server, Timeout: 5 * time.Second, TLSClientConfig: rest.TLSClientConfig{
		CertData: g.certPEM, KeyData: g.certPEM, CAData: g.caPEM}})
	if err == nil {
		g.kube = c
	}
	return c, err
}
