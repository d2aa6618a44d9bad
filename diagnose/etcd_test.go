package diagnose

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/etcd/etcdtest"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/verify"
)

// asControlPlane gives the node a stacked etcd: its manifest, the etcd CA and the
// healthcheck client certificate, and an etcd that answers with members.
func asControlPlane(t *testing.T, n *node, members ...*etcdserverpb.Member) *etcdtest.Cluster {
	t.Helper()
	now := time.Now()
	key, _ := pki.NewECKey()
	ca, _ := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "etcd-ca", NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, key)
	ck, _ := pki.NewECKey()
	c, _ := pki.NewSignedCert(pki.CertConfig{CommonName: "kube-etcd-healthcheck-client", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}, ck.Public(), ca, key)
	ckPEM, _ := pki.EncodeKey(ck)
	n.write(t, "/etc/kubernetes/manifests/etcd.yaml", "kind: Pod\n")
	n.write(t, "/etc/kubernetes/pki/etcd/ca.crt", string(pki.EncodeCert(ca)))
	n.write(t, "/etc/kubernetes/pki/etcd/healthcheck-client.crt", string(pki.EncodeCert(c)))
	n.write(t, "/etc/kubernetes/pki/etcd/healthcheck-client.key", string(ckPEM))
	f := etcdtest.New()
	f.Members = append(f.Members, members...)
	f.Started = func() bool { return false }
	var dialed []string
	n.deps.Host.DialEtcd = func(eps []string, cfg *tls.Config) (etcd.Conn, error) {
		if len(cfg.Certificates) != 1 {
			t.Errorf("etcd dialled without the healthcheck client certificate")
		}
		dialed = append(dialed, eps...)
		return f, nil
	}
	t.Cleanup(func() {
		if strings.Join(dialed, ",") != "https://127.0.0.1:2379" {
			t.Errorf("dialled %v, want this node's etcd", dialed)
		}
	})
	return f
}

func TestDiagnoseNamesEtcdMembersLeftBehind(t *testing.T) {
	n := newNode(t)
	asControlPlane(t, n,
		&etcdserverpb.Member{ID: 0x77, PeerURLs: []string{"https://10.0.0.99:2380"}, IsLearner: true},
		&etcdserverpb.Member{ID: 3, Name: "cp3", PeerURLs: []string{"https://10.0.0.13:2380"}, ClientURLs: []string{"https://10.0.0.13:2379"}})
	n.deps.Host.EtcdPeer = func(_ context.Context, u string) bool { return u == "https://10.0.0.11:2380" }
	r := verdictOf(t, n)
	c := checkOf(t, r, "etcd.members")
	for _, want := range []string{"2 etcd member(s) left behind", "member 77 (no name, https://10.0.0.99:2380, learner never started, peer URL silent)",
		"member 3 (cp3, https://10.0.0.13:2380, voter started, peer URL silent)"} {
		if !strings.Contains(c.Summary, want) {
			t.Errorf("summary %q lacks %q", c.Summary, want)
		}
	}
	if c.Status != verify.Warn || !strings.Contains(c.Evidence, "--remove-dead-etcd-learners") || !strings.Contains(c.Evidence, "etcdctl member remove") {
		t.Errorf("etcd.members = %+v", c)
	}
	if !r.Verdict.Healthy {
		t.Errorf("members left behind made this node unhealthy: %+v", r.Verdict)
	}
}

func TestDiagnoseEtcdMembersOnlyOnControlPlanes(t *testing.T) {
	n := newNode(t)
	n.deps.Host.DialEtcd = func([]string, *tls.Config) (etcd.Conn, error) {
		t.Error("a worker dialled etcd")
		return nil, nil
	}
	for _, c := range verdictOf(t, n).Checks {
		if c.ID == "etcd.members" {
			t.Errorf("a worker reports %+v", c)
		}
	}
	cp := newNode(t)
	asControlPlane(t, cp)
	cp.deps.Host.EtcdPeer = func(context.Context, string) bool { return true }
	if c := checkOf(t, verdictOf(t, cp), "etcd.members"); c.Status != verify.Pass || !strings.Contains(c.Summary, "1 etcd members, none left behind") {
		t.Errorf("etcd.members = %+v", c)
	}
}
