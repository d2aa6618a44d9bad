package discovery

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/cluster-bootstrap/token/jws"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/discovery/discoverytest"
	"kjoin.dev/kjoin/pki"
)

func FuzzParsePin(f *testing.F) {
	for _, s := range []string{"sha256:" + strings.Repeat("ab", 32), "SHA256:" + strings.Repeat("AB", 32), "sha256:", "md5:00", ":", "sha256:a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pin, err := ParsePin(s)
		if err != nil {
			return
		}
		again, err := ParsePin(pin)
		if err != nil || again != pin {
			t.Errorf("canonical pin %q does not re-parse to itself: %q, %v", pin, again, err)
		}
	})
}

// FuzzClusterInfo feeds arbitrary cluster-info answers through what discovery does with an
// unauthenticated answer: decode, JWS check, vetting against a pin. None may panic, and
// nothing unpinned may come out trusted.
func FuzzClusterInfo(f *testing.F) {
	key, _ := pki.NewECKey()
	ca, _ := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "kubernetes"}, key)
	cm := discoverytest.ClusterInfo(f, pki.EncodeCert(ca), "https://10.0.0.1:6443", "abcdef.0123456789abcdef")
	seed, _ := json.Marshal(cm)
	f.Add(seed)
	f.Add([]byte(`{"data":{"kubeconfig":"apiVersion: v1\nclusters:\n- name: a\n- name: b\n","jws-kubeconfig-abcdef":"x..y"}}`))
	f.Add([]byte(`{"data":{"kubeconfig":"clusters: [{name: '', cluster: {server: 'http://x'}}]"}}`))
	f.Add([]byte(`null`))
	pins := Pins{Pin(ca): true}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got corev1.ConfigMap
		if json.Unmarshal(body, &got) != nil {
			return
		}
		kc := got.Data["kubeconfig"]
		for k, sig := range got.Data {
			if id, ok := strings.CutPrefix(k, "jws-kubeconfig-"); ok {
				_ = jws.DetachedTokenIsValid(sig, kc, id, "0123456789abcdef")
			}
		}
		r := &Request{Endpoint: "10.0.0.1:6443", Pins: pins, Clock: clock.RealClock{}}
		tr, err := r.vet([]byte(kc), nil)
		if err == nil {
			t.Fatalf("vetted without a peer certificate: %+v", tr)
		}
		r.Pins = nil
		if tr, err := r.vet([]byte(kc), nil); err == nil && len(tr.cas) == 0 {
			t.Error("vetted with no CA")
		}
	})
}

func FuzzSelectCluster(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {server: 'https://a'}\ncontexts:\n- name: c\n  context: {cluster: missing}\ncurrent-context: c\n"))
	f.Add([]byte("clusters:\n- name: ''\n  cluster: {server: 'https://x'}\n- name: b\n  cluster: {server: 'https://b'}\n"))
	f.Add([]byte("clusters:\n- name: x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := clientcmd.Load(data)
		if err != nil {
			return
		}
		cl, err := SelectCluster(cfg)
		if err == nil && cl == nil {
			t.Error("no error and no cluster")
		}
		if err == nil {
			_ = CheckServerURL(cl.Server)
		}
	})
}

func FuzzCheckEndpoint(f *testing.F) {
	for _, s := range []string{"10.0.0.1:6443", ":6443", "[::1]:0", "h:99999", "a b:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { _ = CheckEndpoint(s) })
}
