package certs

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"

	cc "kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/token"
)

// The Role kjoin creates for kubeadm-certs lets bootstrap tokens read that one Secret and
// nothing else in kube-system: without resourceNames every token holder reads every Secret.
func TestCertsRoleReadsOnlyTheCertsSecret(t *testing.T) {
	c := fake.NewClientset()
	if err := ensureRBAC(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	role, err := c.RbacV1().Roles("kube-system").Get(context.Background(), "kubeadm:kubeadm-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{SecretName}}}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("rules %+v, want get on secret %s only", role.Rules, SecretName)
	}
	rb, err := c.RbacV1().RoleBindings("kube-system").Get(context.Background(), "kubeadm:kubeadm-certs", metav1.GetOptions{})
	if err != nil || len(rb.Subjects) != 1 || rb.Subjects[0].Name != token.DefaultGroup || rb.RoleRef.Name != role.Name {
		t.Errorf("binding %+v %v", rb, err)
	}
}

// admin.conf is issued in kubeadm:cluster-admins (bound to cluster-admin by kubeadm, and
// revocable), never in system:masters.
func TestAdminConfIsAClusterAdminNotAMaster(t *testing.T) {
	ca, _, _ := newCA(t, "ca")
	cfg, err := cc.Parse([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\ncontrolPlaneEndpoint: cp.example:6443\n"))
	if err != nil {
		t.Fatal(err)
	}
	kcs, err := Kubeconfigs(cfg, Node{Name: "cp2", AdvertiseAddress: "10.0.0.2", BindPort: 6443}, ca, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(kcs["admin.conf"])
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range kc.AuthInfos {
		cert, err := pki.ParseCert(ai.ClientCertificateData)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cert.Subject.Organization, []string{"kubeadm:cluster-admins"}) || cert.Subject.CommonName != "kubernetes-admin" {
			t.Errorf("admin.conf subject %v, want CN kubernetes-admin in kubeadm:cluster-admins only", cert.Subject)
		}
	}
}

// etcd's server and peer certificates name ::1 as well as 127.0.0.1: an IPv6 control plane's
// API server reaches its etcd at [::1]:2379.
func TestEtcdCertificatesNameBothLoopbacks(t *testing.T) {
	cas := map[string]*CA{}
	for _, n := range []string{"ca", "front-proxy-ca", "etcd/ca"} {
		cas[n], _, _ = newCA(t, n)
	}
	cfg, err := cc.Parse([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\ncontrolPlaneEndpoint: cp.example:6443\n"))
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := NodeCerts(cfg, Node{Name: "cp2", AdvertiseAddress: "10.0.0.2", BindPort: 6443}, cas, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, leaf := range []string{"etcd/server", "etcd/peer"} {
		crt, _ := pki.ParseCert(leaves[leaf].Cert)
		for _, ip := range []string{"127.0.0.1", "::1", "10.0.0.2"} {
			if err := crt.VerifyHostname(ip); err != nil {
				t.Errorf("%s: %v", leaf, err)
			}
		}
	}
}

// Modes follow content as well as names: a Secret whose values were swapped never leaves a
// private key readable by others in a certificate's or public key's slot.
func TestSwappedSecretValuesKeepKeysPrivate(t *testing.T) {
	_, crt, key := newCA(t, "ca")
	for _, tc := range []struct {
		name    string
		content []byte
		want    os.FileMode
	}{
		{"ca.crt", crt, 0o644},
		{"sa.pub", []byte("-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"), 0o644},
		{"sa.pub", key, 0o600},
		{"front-proxy-ca.crt", append(append([]byte{}, crt...), key...), 0o600},
		{"ca.key", crt, 0o600},
		{"sa.pub", []byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"), 0o600},
	} {
		if got := ModeOf(tc.name, tc.content); got != tc.want {
			t.Errorf("%s holding %.30q: mode %04o, want %04o", tc.name, tc.content, got, tc.want)
		}
	}
}

// etcd's extra SANs (etcd.local.serverCertSANs, peerCertSANs) go where they belong: an IP as
// an IP address, a name as a DNS name, in the certificate they were given for.
func TestEtcdExtraSANsByKind(t *testing.T) {
	cas := map[string]*CA{}
	for _, n := range []string{"ca", "front-proxy-ca", "etcd/ca"} {
		cas[n], _, _ = newCA(t, n)
	}
	cfg, err := cc.Parse([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n" +
		"etcd:\n  local:\n    serverCertSANs: [10.9.9.9, etcd.example]\n    peerCertSANs: [10.8.8.8, peer.example]\n"))
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := NodeCerts(cfg, Node{Name: "cp2", AdvertiseAddress: "10.0.0.2", BindPort: 6443}, cas, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for leaf, want := range map[string][2]string{"etcd/server": {"10.9.9.9", "etcd.example"}, "etcd/peer": {"10.8.8.8", "peer.example"}} {
		crt, err := pki.ParseCert(leaves[leaf].Cert)
		if err != nil {
			t.Fatal(err)
		}
		var ips []string
		for _, ip := range crt.IPAddresses {
			ips = append(ips, ip.String())
		}
		if !slices.Contains(ips, want[0]) || slices.Contains(crt.DNSNames, want[0]) || !slices.Contains(crt.DNSNames, want[1]) {
			t.Errorf("%s: IPs %v, DNS names %v; want %s as an IP and %s as a name", leaf, ips, crt.DNSNames, want[0], want[1])
		}
	}
}

// LoadCA refuses a certificate or key that is not PEM.
func TestLoadCARefusesBadPEM(t *testing.T) {
	_, certPEM, keyPEM := newCA(t, "ca")
	if _, err := LoadCA([]byte("x"), keyPEM); err == nil {
		t.Error("a bad certificate was loaded")
	}
	if _, err := LoadCA(certPEM, []byte("x")); err == nil {
		t.Error("a bad key was loaded")
	}
	if _, err := LoadCA(certPEM, keyPEM); err != nil {
		t.Errorf("a good CA: %v", err)
	}
}

// Upload sends a missing etcd CA as an empty value (kubeadm does: a cluster may have no
// local etcd) but refuses to go on without a required file, naming it.
func TestUploadOptionalAndRequiredFiles(t *testing.T) {
	dir, read := sharedFilesWithoutEtcd(t)
	key, _ := NewCertificateKey()
	c := fake.NewClientset()
	if _, err := Upload(context.Background(), c, key, nil, read, time.Now()); err != nil {
		t.Fatalf("without an etcd CA: %v", err)
	}
	s, err := c.CoreV1().Secrets("kube-system").Get(context.Background(), SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Data["etcd-ca.crt"]; !ok || len(v) != 0 {
		t.Errorf("etcd-ca.crt = %q (present %v), want an empty value", v, ok)
	}
	_ = os.Remove(filepath.Join(dir, "sa.key"))
	if _, err := Upload(context.Background(), fake.NewClientset(), key, nil, read, time.Now()); err == nil || !strings.Contains(err.Error(), "read sa.key") {
		t.Errorf("without sa.key: %v", err)
	}
}

// ExternalOf is nil for a stacked etcd (or no configuration) and carries an external etcd's files.
func TestExternalOf(t *testing.T) {
	if ExternalOf(nil) != nil {
		t.Error("no configuration gave an external etcd")
	}
	stacked, err := cc.Parse([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ExternalOf(stacked) != nil {
		t.Error("a stacked etcd gave an external one")
	}
	ext, err := cc.Parse([]byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\netcd:\n  external:\n    endpoints: [https://10.0.0.9:2379]\n    caFile: /e/ca.crt\n    certFile: /e/c.crt\n    keyFile: /e/c.key\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := ExternalOf(ext); got == nil || *got != (External{CAFile: "/e/ca.crt", CertFile: "/e/c.crt", KeyFile: "/e/c.key"}) {
		t.Errorf("ExternalOf = %+v", got)
	}
}

// A second upload (another certificate key) replaces kubeadm-certs in place.
func TestUploadAgainReplacesTheSecret(t *testing.T) {
	_, read := sharedFilesWithoutEtcd(t)
	c := fake.NewClientset()
	for i := range 2 {
		key, _ := NewCertificateKey()
		if _, err := Upload(context.Background(), c, key, nil, read, time.Now()); err != nil {
			t.Fatalf("upload %d: %v", i+1, err)
		}
		files, err := Download(context.Background(), c, key, nil)
		if err != nil || string(files["sa.key"].Data) != "SA KEY" {
			t.Fatalf("upload %d: the secret does not open with its key: %v", i+1, err)
		}
	}
}

// sharedFilesWithoutEtcd writes the shared CAs and service-account keys, but no etcd CA, into a
// directory, and returns it with a reader of paths relative to it.
func sharedFilesWithoutEtcd(t *testing.T) (string, func(string) ([]byte, error)) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"ca", "front-proxy-ca"} {
		_, crt, key := newCA(t, f)
		_ = os.WriteFile(filepath.Join(dir, f+".crt"), crt, 0o644)
		_ = os.WriteFile(filepath.Join(dir, f+".key"), key, 0o600)
	}
	_ = os.WriteFile(filepath.Join(dir, "sa.key"), []byte("SA KEY"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "sa.pub"), []byte("SA PUB"), 0o644)
	return dir, func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, p)) }
}
