package discovery

import (
	"crypto/tls"
	"crypto/x509"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// trusted is what a vetted cluster-info answer establishes.
type trusted struct {
	server string
	// cas are the CAs to trust: exactly the pinned ones (all of them with unsafe skip).
	cas []*x509.Certificate
}

// vet checks one cluster-info answer before its signature is looked at: the kubeconfig names
// an https server and carries CAs, every CA is pinned, and the server that answered holds a
// certificate issued by a pinned CA for the endpoint's host. Any failure is final.
func (r *Request) vet(kubeconfig []byte, peers []*x509.Certificate) (*trusted, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, operr.Newf(operr.Trust, "cluster-info holds an unreadable kubeconfig: %s", Quote(err.Error()))
	}
	cluster, err := SelectCluster(cfg)
	if err != nil {
		return nil, operr.Newf(operr.Trust, "cluster-info names no usable cluster: %v", err).WithHint("check the kube-public/cluster-info ConfigMap on the control plane")
	}
	if err := CheckServerURL(cluster.Server); err != nil {
		return nil, operr.Newf(operr.Trust, "cluster-info names an unusable API server: %v", err).WithHint("check the kube-public/cluster-info ConfigMap on the control plane")
	}
	certs, err := pki.ParseCerts(cluster.CertificateAuthorityData)
	if err != nil {
		return nil, operr.Newf(operr.Trust, "cluster-info carries no usable CA certificate: %s", Quote(err.Error()))
	}
	if len(r.Pins) == 0 {
		return &trusted{server: cluster.Server, cas: certs}, nil
	}
	pinned, unpinned := r.Pins.Select(certs)
	switch {
	case len(pinned) == 0:
		return nil, operr.Newf(operr.Trust,
			"the cluster CA does not match any --discovery-token-ca-cert-hash: the server presented %s", PinsOf(certs)).
			WithHint("check that you are joining the intended cluster; on its control plane print the right pin with kjoin token create --print-join-command")
	case len(unpinned) > 0:
		return nil, operr.Newf(operr.Trust,
			"cluster-info carries CA(s) no --discovery-token-ca-cert-hash pins: %s (subject %s)", PinsOf(unpinned), Quote(unpinned[0].Subject.String())).
			WithHint("a CA bundle is trusted only when every CA in it is pinned: during a CA rotation pass one --discovery-token-ca-cert-hash per CA; otherwise someone added a CA to cluster-info")
	}
	if err := r.verifyPeer(peers, pinned); err != nil {
		return nil, err
	}
	return &trusted{server: cluster.Server, cas: pinned}, nil
}

// verifyPeer checks that the server which answered proved a certificate issued by a pinned CA
// for the endpoint's host (the TLS handshake proved it holds the matching key). The chain is
// checked first, at a time inside the certificate's own validity: only a certificate the
// pinned CA issued is then asked for its dates and names, so an impostor's never become a
// message or a hint.
func (r *Request) verifyPeer(peers []*x509.Certificate, cas []*x509.Certificate) error {
	if len(peers) == 0 {
		return operr.New(operr.Trust, "the API server presented no certificate", "check that "+r.Endpoint+" is an API server of the cluster you mean to join")
	}
	leaf := peers[0]
	inter := x509.NewCertPool()
	for _, c := range peers[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: pki.Pool(cas), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	chained := false
	for _, ca := range cas {
		// A time at which both the leaf and this CA claim to be valid.
		from, to := later(leaf.NotBefore, ca.NotBefore), earlier(leaf.NotAfter, ca.NotAfter)
		if !from.Before(to) {
			continue
		}
		opts.CurrentTime = from.Add(to.Sub(from) / 2)
		if _, err := leaf.Verify(opts); err == nil {
			chained = true
			break
		}
	}
	if !chained {
		return operr.New(operr.Trust, "the API server presented a certificate not signed by the pinned CA",
			"check that "+r.Endpoint+" is an API server of the cluster you mean to join")
	}
	opts.CurrentTime, opts.DNSName = r.Clock.Now(), r.host()
	if _, err := leaf.Verify(opts); err != nil {
		if e := r.identityError(err); e != nil {
			return e
		}
		return operr.Wrap(operr.Trust, err, "the API server certificate is not usable", "check that "+r.Endpoint+" is an API server of the cluster you mean to join")
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// verifyConnection checks a TLS connection's peer as verifyPeer does (chain first), for the
// pinned re-read: crypto/tls's own check would look at the names and dates first.
func (r *Request) verifyConnection(cas []*x509.Certificate) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error { return r.verifyPeer(cs.PeerCertificates, cas) }
}
