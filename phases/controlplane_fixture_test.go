package phases

import (
	"context"
	"crypto/x509"
	"net/http"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/certs"
	"kjoin.dev/kjoin/etcd/etcdtest"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/pki"
)

const testCertKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// cpHost is a test host ready to join as control plane cp2: the cluster's kubeadm-config,
// an etcd pod of cp1, the shared certificates uploaded with testCertKey (the cluster CA is
// the discovery server's), a fake etcd cluster and healthy local components.
type cpHost struct {
	*testHost
	etcd *etcdtest.Cluster
}

func newCPHost(t *testing.T) *cpHost {
	t.Helper()
	cfg, err := os.ReadFile("testdata/cluster-configuration.yaml")
	if err != nil {
		t.Fatal(err)
	}
	etcdPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-cp1", Namespace: "kube-system",
		Labels:      map[string]string{"component": "etcd", "tier": "control-plane"},
		Annotations: map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": "https://10.0.0.11:2379"}},
		Spec: corev1.PodSpec{NodeName: "cp1"}}
	h := newTestHost(t, etcdPod, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system"},
		Data: map[string]string{"ClusterConfiguration": string(cfg)}})
	h.runner.node = "cp2"
	c := &cpHost{testHost: h, etcd: etcdtest.New()}
	c.etcd.Started = func() bool { return h.env.Exists(path.Join(host.ManifestsDir, "etcd.yaml")) }
	h.env.DialEtcd = c.etcd.Dial
	h.env.EtcdPeer = func(context.Context, string) bool { return true } // every member answers
	h.env.HTTPClient = func(*x509.CertPool) *http.Client { return &http.Client{Transport: okTransport{}} }

	// cp1's shared certificates: the cluster CA is the one discovery pins.
	shared := map[string][]byte{"ca.crt": h.server.CAPEM}
	caKey, err := pki.EncodeKey(h.server.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	shared["ca.key"] = caKey
	for _, name := range []string{"front-proxy-ca", "etcd/ca"} {
		k, _ := pki.NewECKey()
		ca, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: name, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}, k)
		if err != nil {
			t.Fatal(err)
		}
		kp, _ := pki.EncodeKey(k)
		shared[name+".crt"], shared[name+".key"] = pki.EncodeCert(ca), kp
	}
	sa, _ := pki.NewECKey()
	shared["sa.key"], _ = pki.EncodeKey(sa)
	shared["sa.pub"], _ = pki.EncodePublicKey(sa.Public())
	read := func(p string) ([]byte, error) {
		if b, ok := shared[p]; ok {
			return b, nil
		}
		return nil, os.ErrNotExist
	}
	if _, err := certs.Upload(context.Background(), h.client, testCertKey, nil, read, time.Now()); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cpHost) options(t *testing.T) joinrequest.Options {
	t.Helper()
	o := c.testHost.options(t)
	o.NodeName, o.ControlPlane, o.CertificateKey, o.AdvertiseAddress, o.BindPort = "cp2", true, testCertKey, "10.0.0.12", 6443
	return o
}

// okTransport answers every health probe with 200.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Body: http.NoBody, Request: r, Header: http.Header{}}, nil
}

func hasFlag(manifest []byte, flag string) bool { return strings.Contains(string(manifest), flag) }
