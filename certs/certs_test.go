package certs

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	cc "kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

func newCA(t *testing.T, cn string) (*CA, []byte, []byte) {
	t.Helper()
	k, _ := pki.NewECKey()
	now := time.Now()
	c, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: cn, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}, k)
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := pki.EncodeKey(k)
	return &CA{Cert: c, Key: k}, pki.EncodeCert(c), kp
}

func TestUploadThenDownload(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ca", "front-proxy-ca", "etcd/ca"} {
		_, crt, key := newCA(t, f)
		_ = os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		_ = os.WriteFile(filepath.Join(dir, f+".crt"), crt, 0o644)
		_ = os.WriteFile(filepath.Join(dir, f+".key"), key, 0o600)
	}
	_ = os.WriteFile(filepath.Join(dir, "sa.key"), []byte("SA KEY"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "sa.pub"), []byte("SA PUB"), 0o644)
	c := fake.NewClientset()
	key, _ := NewCertificateKey()
	ctx := context.Background()
	exp, err := Upload(ctx, c, key, nil, func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, p)) }, time.Now())
	if err != nil || time.Until(exp) < time.Hour {
		t.Fatalf("upload: %v, expires %v", err, exp)
	}
	s, _ := c.CoreV1().Secrets("kube-system").Get(ctx, SecretName, metav1.GetOptions{})
	if len(s.OwnerReferences) != 1 || !strings.HasPrefix(s.OwnerReferences[0].Name, "bootstrap-token-") {
		t.Errorf("kubeadm-certs must be owned by a short-lived token: %+v", s.OwnerReferences)
	}
	if string(s.Data["sa.key"]) == "SA KEY" {
		t.Error("uploaded in clear")
	}
	files, err := Download(ctx, c, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(files["sa.key"].Data) != "SA KEY" || string(files["sa.pub"].Data) != "SA PUB" || len(files["etcd/ca.crt"].Data) == 0 {
		t.Errorf("downloaded %v", files)
	}
	// Modes come from the file names: "SA KEY" is no parseable key, yet it is a private key.
	if files["sa.key"].Mode != 0o600 || files["sa.pub"].Mode != 0o644 || files["ca.key"].Mode != 0o600 || files["ca.crt"].Mode != 0o644 {
		t.Errorf("modes: sa.key %v sa.pub %v ca.key %v ca.crt %v", files["sa.key"].Mode, files["sa.pub"].Mode, files["ca.key"].Mode, files["ca.crt"].Mode)
	}
	other, _ := NewCertificateKey()
	if _, err := Download(ctx, c, other, nil); err == nil || !strings.Contains(err.Error(), "does not match the uploaded certificates") || operr.CodeOf(err) != operr.Auth {
		t.Errorf("wrong key: %v", err)
	}
	if _, err := Download(ctx, fake.NewClientset(), key, nil); err == nil || !strings.Contains(err.Error(), "expire 2 hours after upload") {
		t.Errorf("missing secret: %v", err)
	}
	if _, err := Download(ctx, c, "abc", nil); operr.CodeOf(err) != operr.Usage {
		t.Errorf("malformed key: %v", err)
	}
}

const clusterConfig = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
controlPlaneEndpoint: cp.example:6443
apiServer:
  certSANs: [lb.example, 192.0.2.10]
networking:
  serviceSubnet: 10.96.0.0/12
`

func TestNodeCertsHaveKubeadmSubjectsAndSANs(t *testing.T) {
	cfg, err := cc.Parse([]byte(clusterConfig))
	if err != nil {
		t.Fatal(err)
	}
	cas := map[string]*CA{}
	for _, n := range []string{"ca", "front-proxy-ca", "etcd/ca"} {
		cas[n], _, _ = newCA(t, n)
	}
	now := time.Now()
	leaves, err := NodeCerts(cfg, Node{Name: "cp2", AdvertiseAddress: "10.0.0.2", BindPort: 6443}, cas, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(leaves) != 7 {
		t.Errorf("want 7 leaf certificates, got %d", len(leaves))
	}
	api, _ := pki.ParseCert(leaves["apiserver"].Cert)
	if err := api.VerifyHostname("cp.example"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"lb.example", "192.0.2.10", "10.96.0.1", "10.0.0.2", "cp2", "kubernetes.default.svc.cluster.local"} {
		if err := api.VerifyHostname(name); err != nil {
			t.Errorf("apiserver cert: %v", err)
		}
	}
	if _, err := api.Verify(x509.VerifyOptions{Roots: pool(cas["ca"].Cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Error(err)
	}
	peer, _ := pki.ParseCert(leaves["etcd/peer"].Cert)
	if peer.Subject.CommonName != "cp2" || len(peer.ExtKeyUsage) != 2 {
		t.Errorf("etcd peer %v %v", peer.Subject, peer.ExtKeyUsage)
	}
	if !api.NotBefore.Before(now.Add(-4*time.Minute)) || api.NotAfter.Sub(now) < 364*24*time.Hour {
		t.Errorf("validity %v - %v", api.NotBefore, api.NotAfter)
	}
	kcs, err := Kubeconfigs(cfg, Node{Name: "cp2", AdvertiseAddress: "10.0.0.2", BindPort: 6443}, cas["ca"], now)
	if err != nil || !strings.Contains(string(kcs["admin.conf"]), "https://cp.example:6443") || !strings.Contains(string(kcs["scheduler.conf"]), "https://10.0.0.2:6443") {
		t.Errorf("kubeconfigs: %v\n%s", err, kcs["admin.conf"])
	}
}

func pool(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

func FuzzParseCertificateKey(f *testing.F) {
	for _, s := range []string{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", " 00 ", "", "zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseCertificateKey(s)
		if err == nil && len(k) != 32 {
			t.Errorf("ParseCertificateKey(%q) gave %d bytes", s, len(k))
		}
		if err != nil && len(s) > 8 && strings.Contains(err.Error(), s) {
			t.Errorf("the error repeats the key: %v", err)
		}
	})
}

// IPv6 single-stack and dual-stack: the apiserver certificate names the first service IP of
// the first family (as kubeadm), the IPv6 advertise address and a bracketed IPv6 endpoint's
// host; etcd's certificates name the IPv6 address; kubeconfigs put the address in brackets.
func TestNodeCertsIPv6AndDualStack(t *testing.T) {
	cas := map[string]*CA{}
	for _, n := range []string{"ca", "front-proxy-ca", "etcd/ca"} {
		cas[n], _, _ = newCA(t, n)
	}
	for _, c := range []struct {
		name, cfg, adv string
		names          []string
		local          string // the node's own kubeconfigs' server
	}{
		{"ipv6", "controlPlaneEndpoint: \"[fd77::11]:6443\"\nnetworking:\n  serviceSubnet: fd77:96::/112\n", "fd77::12",
			[]string{"fd77:96::1", "fd77::12", "fd77::11", "cp2", "kubernetes.default.svc.cluster.local"}, "https://[fd77::12]:6443"},
		{"dual", "controlPlaneEndpoint: cp.example:6443\nnetworking:\n  serviceSubnet: 10.96.0.0/12,fd77:96::/112\n", "10.0.0.2",
			[]string{"10.96.0.1", "10.0.0.2", "cp.example"}, "https://10.0.0.2:6443"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := cc.Parse([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n" + c.cfg))
			if err != nil {
				t.Fatal(err)
			}
			n := Node{Name: "cp2", AdvertiseAddress: c.adv, BindPort: 6443}
			leaves, err := NodeCerts(cfg, n, cas, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			api, _ := pki.ParseCert(leaves["apiserver"].Cert)
			for _, name := range c.names {
				if err := api.VerifyHostname(name); err != nil {
					t.Errorf("apiserver cert: %v", err)
				}
			}
			for _, leaf := range []string{"etcd/server", "etcd/peer"} {
				crt, _ := pki.ParseCert(leaves[leaf].Cert)
				if err := crt.VerifyHostname(c.adv); err != nil {
					t.Errorf("%s: %v", leaf, err)
				}
			}
			kcs, err := Kubeconfigs(cfg, n, cas["ca"], time.Now())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"controller-manager.conf", "scheduler.conf"} {
				if !strings.Contains(string(kcs[f]), "server: "+c.local+"\n") {
					t.Errorf("%s does not name %s:\n%s", f, c.local, kcs[f])
				}
			}
		})
	}
}
