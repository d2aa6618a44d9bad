package manifests

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	cc "kjoin.dev/kjoin/clusterconfig"
)

var update = flag.Bool("update", false, "rewrite golden files")

const clusterConfig = `apiServer: {}
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controlPlaneEndpoint: control-plane.lab:6443
controllerManager: {}
encryptionAlgorithm: RSA-2048
etcd:
  local:
    dataDir: /var/lib/etcd
    imageTag: 3.7.0-0
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
networking:
  dnsDomain: cluster.local
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
scheduler: {}
`

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		_ = os.WriteFile(p, got, 0o644)
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\n%s", name, got)
	}
}

func TestRenderMatchesKubeadm(t *testing.T) {
	c, err := cc.Parse([]byte(clusterConfig))
	if err != nil {
		t.Fatal(err)
	}
	debian := map[string]bool{"/etc/ca-certificates": true, "/usr/share/ca-certificates": true, "/usr/local/share/ca-certificates": true}
	n := Node{Name: "cp2", AdvertiseAddress: "10.77.0.12", BindPort: 6443, HostDirExists: func(d string) bool { return debian[d] }}
	cp, err := ControlPlane(c, n)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range cp {
		golden(t, name+".yaml", b)
	}
	e, err := Etcd(c, n, []Member{{"cp1", "https://10.77.0.11:2380"}, {"cp2", "https://10.77.0.12:2380"}})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "etcd.yaml", e)
}

func TestExtraArgsOverrideAndAppend(t *testing.T) {
	c, _ := cc.Parse([]byte(clusterConfig))
	c.APIServer.ExtraArgs = []cc.Arg{{Name: "secure-port", Value: "7443"}, {Name: "audit-log-path", Value: "/var/log/audit.log"}}
	cp, err := ControlPlane(c, Node{Name: "n", AdvertiseAddress: "10.0.0.1", BindPort: 6443})
	if err != nil {
		t.Fatal(err)
	}
	s := string(cp["kube-apiserver"])
	if !bytes.Contains([]byte(s), []byte("--secure-port=7443")) || bytes.Contains([]byte(s), []byte("--secure-port=6443")) || !bytes.Contains([]byte(s), []byte("--audit-log-path=/var/log/audit.log")) {
		t.Errorf("extraArgs not applied:\n%s", s)
	}
}
