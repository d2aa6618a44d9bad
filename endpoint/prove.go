package endpoint

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// nodeClientAt is a client with the node's own identity (the kubelet's client certificate),
// at server, trusting only the node's CA.
func nodeClientAt(e *host.Env, server string, caData []byte) (kubernetes.Interface, error) {
	if len(caData) == 0 {
		return nil, operr.New(operr.Other, "this node has no cluster CA (kubelet.conf names none, and "+host.CACertPath+" is missing)", "restore the node's join before moving its endpoint")
	}
	c, err := e.Client(&rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData, CertFile: e.Paths.Of(host.KubeletClientCurrent), KeyFile: e.Paths.Of(host.KubeletClientCurrent)},
		Timeout:         10 * time.Second,
		UserAgent:       "kjoin",
	})
	if err != nil {
		return nil, operr.Wrap(operr.Other, err, "cannot build a client with the node's identity", "")
	}
	return c, nil
}

// proveIdentity asks the endpoint who this node is: TLS is verified by the node's CA for the
// endpoint's own name, and the answer must be the node's own user. It returns that user.
func proveIdentity(ctx context.Context, c kubernetes.Interface, node, to string, caData []byte) (string, error) {
	ssr, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", refusal(err, to, caData)
	}
	who := ssr.Status.UserInfo.Username
	if want := "system:node:" + node; who != want {
		return who, operr.Newf(operr.Trust, "%s authenticates this node as %q, not %q: it is not this node's cluster (nothing was changed)", to, who, want).
			WithHint("check the endpoint: it must be an API server of the cluster this node joined")
	}
	return who, nil
}

// refusal explains why the new endpoint was not accepted; nothing has been changed then.
func refusal(err error, to string, caData []byte) error {
	var hostErr x509.HostnameError
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &hostErr) && !issuedBy(hostErr.Certificate, caData):
		// Go checks the name before the chain: a stranger's certificate is named as such.
		return operr.Wrap(operr.Trust, err, fmt.Sprintf("%s presents a certificate not signed by this node's cluster CA: it is not this cluster's API server (nothing was changed)", to),
			"check the endpoint: it must reach an API server of the cluster this node joined")
	case errors.As(err, &hostErr):
		return operr.Wrap(operr.Trust, err, fmt.Sprintf("the certificate %s presents does not name %q (nothing was changed)", to, hostOnly(to)),
			"add the name or address to the API servers' certificates (ClusterConfiguration apiServer.certSANs, then kubeadm init phase certs apiserver on each control plane), or move to a name they carry")
	case errors.As(err, &unknown):
		return operr.Wrap(operr.Trust, err, fmt.Sprintf("%s presents a certificate not signed by this node's cluster CA: it is not this cluster's API server (nothing was changed)", to),
			"check the endpoint: it must reach an API server of the cluster this node joined")
	case errors.As(err, &invalid):
		return operr.Wrap(operr.Trust, err, fmt.Sprintf("the certificate %s presents is not usable (nothing was changed)", to), "check the API server's certificate and this node's clock")
	}
	return operr.Wrap(operr.Other, err, fmt.Sprintf("%s did not answer as this cluster's API server (nothing was changed)", to),
		"check that the endpoint is reachable from this node and forwards to the API servers")
}

// leaseRenewTime is the node's Lease renewal time (zero when it has none).
func leaseRenewTime(ctx context.Context, c kubernetes.Interface, node string) (time.Time, error) {
	l, err := c.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, nil
	}
	return l.Spec.RenewTime.Time, nil
}

// waitRenewal waits until the node's Lease, read through the new endpoint, is renewed after
// both since (its last renewal before the move) and the kubelet's restart.
func waitRenewal(ctx context.Context, e *host.Env, c kubernetes.Interface, node string, since time.Time, timeout time.Duration) (time.Time, error) {
	restarted := e.Clock.Now()
	if restarted.After(since) {
		since = restarted
	}
	var at time.Time
	err := e.PollFor(ctx, "endpoint", fmt.Sprintf("the kubelet to renew Lease kube-node-lease/%s", node), time.Second, timeout, func(ctx context.Context) (bool, error) {
		t, err := leaseRenewTime(ctx, c, node)
		if err != nil {
			e.Debugf("endpoint", "lease of %s: %v", node, err)
			return false, nil
		}
		at = t
		return t.After(since), nil
	})
	return at, err
}

// issuedBy reports whether cert chains to a CA in caData (names and dates aside).
func issuedBy(cert *x509.Certificate, caData []byte) bool {
	if cert == nil {
		return false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caData) {
		return false
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) / 2), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}
