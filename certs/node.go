package certs

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	cc "kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/pki"
)

// CA is a certificate authority with its key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// LoadCA parses a CA from PEM.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	c, err := pki.ParseCert(certPEM)
	if err != nil {
		return nil, err
	}
	k, err := pki.ParseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: c, Key: k}, nil
}

// Node describes the joining control-plane node.
type Node struct {
	Name             string
	AdvertiseAddress string
	BindPort         int
}

// Pair is a certificate and its key, PEM.
type Pair struct{ Cert, Key []byte }

// spec is one leaf certificate kubeadm creates on a control-plane node.
type spec struct {
	file   string // under the certificates directory, without extension
	ca     string // "ca", "front-proxy-ca" or "etcd/ca"
	cn     string
	org    []string
	usages []x509.ExtKeyUsage
	dns    []string
	ips    []net.IP
}

// NodeCerts issues the node's leaf certificates with kubeadm's paths, subjects, usages, SANs
// and validity. cas maps "ca", "front-proxy-ca", "etcd/ca" to the shared CAs; etcd
// certificates are skipped when there is no "etcd/ca" (external etcd).
func NodeCerts(c *cc.ClusterConfiguration, n Node, cas map[string]*CA, now time.Time) (map[string]Pair, error) {
	adv := net.ParseIP(n.AdvertiseAddress)
	if adv == nil {
		return nil, fmt.Errorf("advertise address %q is not an IP", n.AdvertiseAddress)
	}
	svcIP, err := c.FirstServiceIP()
	if err != nil {
		return nil, err
	}
	apiDNS := []string{n.Name, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + c.Networking.DNSDomain}
	apiIPs := []net.IP{svcIP, adv}
	if h := c.EndpointHost(); h != "" {
		if ip := net.ParseIP(h); ip != nil {
			apiIPs = append(apiIPs, ip)
		} else {
			apiDNS = append(apiDNS, h)
		}
	}
	for _, san := range c.APIServer.CertSANs {
		if ip := net.ParseIP(san); ip != nil {
			apiIPs = append(apiIPs, ip)
		} else {
			apiDNS = append(apiDNS, san)
		}
	}
	server, client := x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth
	specs := []spec{
		{file: "apiserver", ca: "ca", cn: "kube-apiserver", usages: []x509.ExtKeyUsage{server}, dns: apiDNS, ips: apiIPs},
		{file: "apiserver-kubelet-client", ca: "ca", cn: "kube-apiserver-kubelet-client", usages: []x509.ExtKeyUsage{client}},
		{file: "front-proxy-client", ca: "front-proxy-ca", cn: "front-proxy-client", usages: []x509.ExtKeyUsage{client}},
	}
	if cas["etcd/ca"] != nil && c.Etcd.Local != nil {
		etcdDNS := []string{n.Name, "localhost"}
		etcdIPs := []net.IP{adv, net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		withSANs := func(extra []string) ([]string, []net.IP) {
			d, i := append([]string{}, etcdDNS...), append([]net.IP{}, etcdIPs...)
			for _, s := range extra {
				if ip := net.ParseIP(s); ip != nil {
					i = append(i, ip)
				} else {
					d = append(d, s)
				}
			}
			return d, i
		}
		sd, si := withSANs(c.Etcd.Local.ServerCertSANs)
		pd, pi := withSANs(c.Etcd.Local.PeerCertSANs)
		specs = append(specs,
			spec{file: "etcd/server", ca: "etcd/ca", cn: n.Name, usages: []x509.ExtKeyUsage{server, client}, dns: sd, ips: si},
			spec{file: "etcd/peer", ca: "etcd/ca", cn: n.Name, usages: []x509.ExtKeyUsage{server, client}, dns: pd, ips: pi},
			spec{file: "etcd/healthcheck-client", ca: "etcd/ca", cn: "kube-etcd-healthcheck-client", usages: []x509.ExtKeyUsage{client}},
			spec{file: "apiserver-etcd-client", ca: "etcd/ca", cn: "kube-apiserver-etcd-client", usages: []x509.ExtKeyUsage{client}},
		)
	}
	jobs := make([]issueJob, len(specs))
	for i, s := range specs {
		if cas[s.ca] == nil {
			return nil, fmt.Errorf("no %s to sign %s", s.ca, s.file)
		}
		jobs[i] = issueJob{name: s.file, ca: cas[s.ca], cfg: pki.CertConfig{CommonName: s.cn, Organization: s.org, DNSNames: s.dns, IPs: s.ips, Usages: s.usages,
			NotBefore: now.Add(-pki.Backdate), NotAfter: now.Add(c.CertValidity())}}
	}
	return issueAll(c, jobs)
}

// issueJob is one certificate to issue.
type issueJob struct {
	name string
	ca   *CA
	cfg  pki.CertConfig
}

// issueAll issues the certificates concurrently (key generation, RSA by default, is most of a
// control-plane node's preparation time on small machines).
func issueAll(c *cc.ClusterConfiguration, jobs []issueJob) (map[string]Pair, error) {
	pairs := make([]Pair, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			pairs[i], errs[i] = issue(c, j.ca, j.cfg)
		}()
	}
	wg.Wait()
	out := map[string]Pair{}
	for i, j := range jobs {
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: %w", j.name, errs[i])
		}
		out[j.name] = pairs[i]
	}
	return out, nil
}

func newKey(c *cc.ClusterConfiguration) (crypto.Signer, error) {
	switch c.EncryptionAlgorithm {
	case "ECDSA-P256":
		return pki.NewECKey()
	case "RSA-3072":
		return pki.NewRSAKey(3072)
	case "RSA-4096":
		return pki.NewRSAKey(4096)
	default:
		return pki.NewRSAKey(2048)
	}
}

func issue(c *cc.ClusterConfiguration, ca *CA, cfg pki.CertConfig) (Pair, error) {
	key, err := newKey(c)
	if err != nil {
		return Pair{}, err
	}
	cert, err := pki.NewSignedCert(cfg, key.Public(), ca.Cert, ca.Key)
	if err != nil {
		return Pair{}, err
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{Cert: pki.EncodeCert(cert), Key: keyPEM}, nil
}

// Kubeconfigs renders admin.conf, controller-manager.conf and scheduler.conf for the node,
// with client certificates signed by the cluster CA.
func Kubeconfigs(c *cc.ClusterConfiguration, n Node, ca *CA, now time.Time) (map[string][]byte, error) {
	local := fmt.Sprintf("https://%s", net.JoinHostPort(n.AdvertiseAddress, fmt.Sprint(n.BindPort)))
	specs := []struct {
		file, server, cn string
		org              []string
	}{
		{"admin.conf", "https://" + c.ControlPlaneEndpoint, "kubernetes-admin", []string{"kubeadm:cluster-admins"}},
		{"controller-manager.conf", local, "system:kube-controller-manager", nil},
		{"scheduler.conf", local, "system:kube-scheduler", nil},
	}
	jobs := make([]issueJob, len(specs))
	for i, s := range specs {
		jobs[i] = issueJob{name: s.file, ca: ca, cfg: pki.CertConfig{CommonName: s.cn, Organization: s.org, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore: ca.Cert.NotBefore, NotAfter: now.Add(c.CertValidity())}}
	}
	pairs, err := issueAll(c, jobs)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, s := range specs {
		p := pairs[s.file]
		ctx := s.cn + "@" + c.ClusterName
		kc := clientcmdapi.NewConfig()
		kc.Clusters[c.ClusterName] = &clientcmdapi.Cluster{Server: s.server, CertificateAuthorityData: pki.EncodeCert(ca.Cert)}
		kc.AuthInfos[s.cn] = &clientcmdapi.AuthInfo{ClientCertificateData: p.Cert, ClientKeyData: p.Key}
		kc.Contexts[ctx] = &clientcmdapi.Context{Cluster: c.ClusterName, AuthInfo: s.cn}
		kc.CurrentContext = ctx
		b, err := clientcmd.Write(*kc)
		if err != nil {
			return nil, err
		}
		out[s.file] = b
	}
	return out, nil
}
