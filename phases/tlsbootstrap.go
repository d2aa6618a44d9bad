package phases

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	cc "kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/tlsbootstrap"
)

// TLSBootstrap obtains the kubelet's client certificate with the node's own CSR (the key never
// leaves the node) and writes the kubelet's layout: pki/kubelet-client-<ts>.pem, the
// -current.pem symlink, kubelet.conf pointing at it, and the cluster CA.
//
//	Reads:  s.BootstrapClient, s.BootstrapWatcher, s.Discovery (Server, CAData), s.api, s.Opts (NodeName, Timeouts, DryRun); kube-system/kubeadm-config (several endpoints)
//	Writes: s.NodeKey, s.CSRName, s.ClientCertPath, s.StaleNode (a NotReady Node of this name);
//	        /etc/kubernetes/{pki/ca.crt,kubelet.conf}, /var/lib/kubelet/pki/kubelet-client-*.pem
//	        and its -current.pem symlink, /var/lib/kubelet/pki/kjoin-pending-client.key (the key
//	        until the CSR is issued, then removed)
var TLSBootstrap = Phase{Name: "tls-bootstrap", Short: "Request and install the kubelet client certificate", Needs: []string{"discovery"}, Run: runTLSBootstrap}

func runTLSBootstrap(ctx context.Context, e *host.Env, s *State) error {
	name := s.Opts.NodeName
	var renewing *Repair
	if s.Own {
		if p, ok := validIdentity(e, s); ok {
			s.ClientCertPath = p
			e.Logf("tls-bootstrap", "the kubelet already holds a valid client certificate for system:node:%s (%s)", name, p)
			return writeKubeletKubeconfig(e, s, kubeletServer(ctx, e, s))
		}
		renewing = staleIdentity(e, s)
	} else if err := refuseReadyNode(ctx, e, s, name); err != nil {
		return err
	}
	if renewing != nil {
		if s.Opts.DryRun {
			renewing.Action = "would renew"
			s.Repairs = append(s.Repairs, *renewing)
		} else {
			e.Logf("tls-bootstrap", "renewing the kubelet client certificate in place: %s", renewing.Detail)
			defer func() {
				if s.ClientCertPath != "" {
					renewing.Detail += "; new certificate " + s.ClientCertPath
					s.Repairs = append(s.Repairs, *renewing)
				}
			}()
		}
	}
	if s.Opts.DryRun {
		e.Fx().API(fmt.Sprintf("create CertificateSigningRequest (signer %s, CN system:node:%s) and wait for it to be issued", "kubernetes.io/kube-apiserver-client-kubelet", name))
		ts := e.Clock.Now().Format("2006-01-02-15-04-05")
		pem := path.Join(host.KubeletPKIDir, "kubelet-client-"+ts+".pem")
		fx := e.Fx() // planned: nothing is written
		return errors.Join(fx.WriteFile(host.CACertPath, nil, 0o644), fx.WriteFile(pem, nil, 0o600),
			fx.Symlink(pem, host.KubeletClientCurrent), fx.WriteFile(host.KubeletKubeconfig, nil, 0o600))
	}
	req := tlsbootstrap.Request{
		Client: s.BootstrapClient, Watcher: s.BootstrapWatcher, NodeName: name, Timeout: s.Opts.Timeouts.TLSBootstrap, Clock: e.Clock,
		Logf: func(f string, a ...any) {
			e.Debugf("tls-bootstrap", f, a...)
			e.Note("tls-bootstrap", fmt.Sprintf(f, a...)) // the wait line says why it still waits
		},
		Announce: func(f string, a ...any) { e.Logf("tls-bootstrap", f, a...) },
	}
	// Resume a CSR an interrupted run created: its key was kept on the node until issued.
	csrName := resumableCSR(ctx, e, s, &req)
	var created *certificatesv1.CertificateSigningRequest // what the create answered: the wait starts from it
	if csrName == "" {
		key, err := pki.NewECKey()
		if err != nil {
			return fmt.Errorf("generate node key: %w", err)
		}
		req.Key = key
		keyPEM, err := pki.EncodeKey(key)
		if err != nil {
			return err
		}
		if err := e.Fx().WriteFile(pendingKeyPath, keyPEM, 0o600); err != nil {
			return err
		}
		if created, err = tlsbootstrap.Submit(ctx, req); err != nil {
			return err
		}
		csrName = created.Name
		e.Fx().API("create CSR " + csrName + " for system:node:" + name)
		if j := s.Journal; j != nil {
			j.CSR, j.PendingKey = csrName, pendingKeyPath
			if err := j.Save(e); err != nil {
				return err
			}
		}
		e.Logf("tls-bootstrap", "created CSR %s for system:node:%s (key generated on this node)", csrName, name)
	}
	e.At("tls-bootstrap/csr-created")
	s.NodeKey, s.CSRName = req.Key, csrName
	waited := e.Waiting("tls-bootstrap", "CSR "+csrName+" to be approved and signed", s.Opts.Timeouts.TLSBootstrap)
	var issued *tlsbootstrap.Issued
	var err error
	if created != nil {
		issued, err = tlsbootstrap.WaitCreated(ctx, req, created)
	} else {
		issued, err = tlsbootstrap.Wait(ctx, req, csrName)
	}
	waited()
	if err != nil {
		if errors.Is(err, tlsbootstrap.ErrFinal) {
			forgetCSR(e, s)
		}
		return err
	}
	e.Logf("tls-bootstrap", "CSR %s approved and signed in %s", csrName, issued.Signed.Round(time.Millisecond))
	if err := tlsbootstrap.Verify(issued.CertPEM, req.Key, name, pki.Pool(mustCerts(s.Discovery.CAData)), e.Clock.Now()); err != nil {
		forgetCSR(e, s)
		return operr.Wrap(operr.Trust, err, fmt.Sprintf("the certificate issued for CSR %s is not this node's kubelet client certificate", csrName),
			"it was not installed; check the cluster's signer (kubectl get csr "+csrName+" -o yaml) and run the join again")
	}
	if err := installKubeletIdentity(e, s, kubeletServer(ctx, e, s), issued.CertPEM); err != nil {
		return err
	}
	if j := s.Journal; j != nil {
		j.PendingKey = ""
		if err := j.Save(e); err != nil {
			return err
		}
	}
	return e.Fx().Remove(pendingKeyPath)
}

// resumableCSR returns the journal's CSR (and sets req.Key to its kept key) when that CSR can
// still be issued to this node: it exists and asks for the kept key. Otherwise it forgets it.
func resumableCSR(ctx context.Context, e *host.Env, s *State, req *tlsbootstrap.Request) string {
	j := s.Journal
	if j == nil || j.CSR == "" || j.PendingKey == "" {
		return ""
	}
	keyPEM, err := e.ReadFile(j.PendingKey)
	if err != nil {
		forgetCSR(e, s)
		return ""
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		forgetCSR(e, s)
		return ""
	}
	csr, err := s.BootstrapClient.CertificatesV1().CertificateSigningRequests().Get(ctx, j.CSR, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s.Warn(e, "tls-bootstrap", "CSR %s of an interrupted run is gone; creating a new one", j.CSR)
		forgetCSR(e, s)
		return ""
	case err == nil:
		if err := tlsbootstrap.Matches(csr, key); err != nil {
			s.Warn(e, "tls-bootstrap", "not resuming CSR %s: %v; creating a new one", j.CSR, err)
			forgetCSR(e, s)
			return ""
		}
	}
	// Unreadable for now (e.g. forbidden to get, transient): Wait tells the outcome.
	req.Key = key
	e.Logf("tls-bootstrap", "resuming CSR %s from an interrupted run", j.CSR)
	return j.CSR
}

// forgetCSR drops the resume state of a CSR that can never be issued to this node, so no
// later run resumes it: the journal entry and the kept key.
func forgetCSR(e *host.Env, s *State) {
	j := s.Journal
	if j == nil {
		return
	}
	if j.PendingKey != "" {
		_ = e.Fx().Remove(j.PendingKey)
	}
	j.CSR, j.PendingKey = "", ""
	if err := j.Save(e); err != nil {
		e.Logf("tls-bootstrap", "WARNING: could not save the journal: %v", err)
	}
}

// mustCerts parses CA data that discovery already verified.
func mustCerts(caPEM []byte) []*x509.Certificate {
	certs, _ := pki.ParseCerts(caPEM)
	return certs
}

// pendingKeyPath keeps the node key of an unissued CSR so an interrupted join can resume it.
const pendingKeyPath = "/var/lib/kubelet/pki/kjoin-pending-client.key"

// validIdentity reports whether the kubelet's current client certificate is this node's,
// issued by the cluster CA and valid for at least another hour.
func validIdentity(e *host.Env, s *State) (string, bool) {
	target, err := os.Readlink(e.Paths.Of(host.KubeletClientCurrent))
	if err != nil {
		return "", false
	}
	b, err := e.ReadFile(target)
	if err != nil {
		return "", false
	}
	cert, err := pki.ParseCert(b)
	if err != nil || cert.Subject.CommonName != "system:node:"+s.Opts.NodeName {
		return "", false
	}
	if _, err := pki.ParseKey(b); err != nil {
		return "", false
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.Discovery.CAData)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: e.Clock.Now()}); err != nil {
		return "", false
	}
	if cert.NotAfter.Before(e.Clock.Now().Add(time.Hour)) {
		return "", false
	}
	return target, true
}

// staleIdentity describes the kubelet client certificate a joined node holds when it is no
// longer usable (expired, about to, or not this node's): the kubelet cannot rotate an expired
// certificate, so the join renews it in place with the bootstrap token (nil: no certificate).
func staleIdentity(e *host.Env, s *State) *Repair {
	target, err := os.Readlink(e.Paths.Of(host.KubeletClientCurrent))
	if err != nil {
		return nil
	}
	b, err := e.ReadFile(target)
	if err != nil {
		return nil
	}
	cert, err := pki.ParseCert(b)
	if err != nil {
		return &Repair{Kind: "client-certificate", Name: "system:node:" + s.Opts.NodeName, Action: "renewed", Detail: target + " is unreadable: " + err.Error()}
	}
	now := e.Clock.Now()
	why := "not this node's or not issued by the cluster CA"
	switch {
	case now.After(cert.NotAfter):
		why = fmt.Sprintf("expired %s (%s ago): the kubelet cannot rotate an expired certificate", cert.NotAfter.UTC().Format(time.RFC3339), now.Sub(cert.NotAfter).Round(time.Second))
	case cert.NotAfter.Before(now.Add(time.Hour)):
		why = fmt.Sprintf("expires %s, within the hour", cert.NotAfter.UTC().Format(time.RFC3339))
	case cert.Subject.CommonName != "system:node:"+s.Opts.NodeName:
		why = fmt.Sprintf("issued to %q, not system:node:%s", cert.Subject.CommonName, s.Opts.NodeName)
	}
	return &Repair{Kind: "client-certificate", Name: cert.Subject.CommonName, ID: "serial " + cert.SerialNumber.Text(16), Action: "renewed",
		Detail: target + " " + why}
}

// refuseReadyNode applies kubeadm's rule: never take over the name of a Ready Node.
// Passing API errors (throttling, timeouts, a restarting API server) are retried.
func refuseReadyNode(ctx context.Context, e *host.Env, s *State, name string) error {
	var node *corev1.Node
	err := tlsbootstrap.Retry(ctx, e.Clock, e.Clock.Now().Add(s.Opts.Timeouts.TLSBootstrap),
		func(f string, a ...any) { e.Debugf("tls-bootstrap", f, a...) }, fmt.Sprintf("look up node %q", name),
		func(ctx context.Context) error {
			var err error
			node, err = s.BootstrapClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err
		})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil
	}
	if err != nil {
		if apierrors.IsUnauthorized(err) {
			return operr.Wrap(operr.Auth, err, "the API server rejected the bootstrap token", "the token may have expired or been deleted: create a new one with kjoin token create")
		}
		return fmt.Errorf("look up node %q: %w", name, err)
	}
	if isReady(node) {
		return operr.Newf(operr.Preflight,
			"a Node named %q is already registered and Ready in the cluster (uid %s)", name, node.UID).
			WithHint(fmt.Sprintf("delete the existing Node (kubectl delete node %s) if that machine is gone, or join this one with another --node-name", name))
	}
	s.StaleNode = node // replace-node reports it (and with --replace deletes it)
	return nil
}

// installKubeletIdentity writes the kubelet's client certificate layout and kubelet.conf.
func installKubeletIdentity(e *host.Env, s *State, server string, certPEM []byte) error {
	keyPEM, err := pki.EncodeKey(s.NodeKey)
	if err != nil {
		return err
	}
	pemPath := path.Join(host.KubeletPKIDir, "kubelet-client-"+e.Clock.Now().Format("2006-01-02-15-04-05")+".pem")
	if err := e.Fx().WriteFile(pemPath, append(append(append([]byte{}, certPEM...), '\n'), keyPEM...), 0o600); err != nil {
		return err
	}
	if err := e.Fx().Symlink(pemPath, host.KubeletClientCurrent); err != nil {
		return err
	}
	s.ClientCertPath = pemPath
	if err := writeKubeletKubeconfig(e, s, server); err != nil {
		return err
	}
	e.Logf("tls-bootstrap", "wrote %s and %s", pemPath, host.KubeletKubeconfig)
	return nil
}

// kubeletServer is the API server kubelet.conf names. A control plane's kubelet talks to its
// own API server, as kubeadm's does; a worker's to cluster-info's server (the cluster's
// controlPlaneEndpoint in a kubeadm cluster, as kubeadm joins). A worker joined through several
// endpoints gets the cluster's controlPlaneEndpoint when kubeadm-config names one, else the
// endpoint that served its join: cluster-info's server may be the very one that was down.
func kubeletServer(ctx context.Context, e *host.Env, s *State) string {
	switch {
	case s.Opts.ControlPlane:
		return "https://" + host.JoinHostPort(s.Opts.AdvertiseAddress, s.Opts.BindPort)
	case s.api == nil:
		return s.Discovery.Server
	}
	cfg, err := cc.Fetch(ctx, s.BootstrapClient, "the bootstrap token")
	if err == nil && cfg.ControlPlaneEndpoint != "" {
		e.Logf("tls-bootstrap", "the kubelet will use the cluster's controlPlaneEndpoint %s", cfg.ControlPlaneEndpoint)
		return "https://" + cfg.ControlPlaneEndpoint
	}
	served := s.api.current()
	if err != nil {
		s.Warn(e, "tls-bootstrap", "the cluster's controlPlaneEndpoint is unknown (%v): the kubelet will use %s, the API server that served this join, and only it", err, served)
	} else {
		s.Warn(e, "tls-bootstrap", "the cluster has no controlPlaneEndpoint: the kubelet will use %s, the API server that served this join, and only it", served)
	}
	return "https://" + served
}

// writeKubeletKubeconfig writes kubelet.conf pointing at the rotating -current.pem, and the CA.
func writeKubeletKubeconfig(e *host.Env, s *State, server string) error {
	if err := e.Fx().WriteFile(host.CACertPath, s.Discovery.CAData, 0o644); err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	s.KubeletServer = server
	kc.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: s.Discovery.CAData}
	kc.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: host.KubeletClientCurrent, ClientKey: host.KubeletClientCurrent}
	kc.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}
	kc.CurrentContext = "default-context"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return e.Fx().WriteFile(host.KubeletKubeconfig, b, 0o600)
}
