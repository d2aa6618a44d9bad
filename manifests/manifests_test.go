package manifests

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	cc "kjoin.dev/kjoin/clusterconfig"
)

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

// TestRenderMatchesRealKubeadm compares kjoin's render with manifests real kubeadm v1.37.2
// wrote in the lab for the same ClusterConfiguration and node (testdata/kubeadm, produced by
// TestWriteGoldenManifests; see testdata/kubeadm/README.md). kjoin never writes these files.
func TestRenderMatchesRealKubeadm(t *testing.T) {
	c, err := cc.Parse([]byte(clusterConfig))
	if err != nil {
		t.Fatal(err)
	}
	// The lab's hosts share this Debian machine's root: these CA directories exist there.
	debian := map[string]bool{"/etc/ca-certificates": true, "/usr/share/ca-certificates": true, "/usr/local/share/ca-certificates": true}
	n := Node{Name: "cp2", AdvertiseAddress: "10.77.0.12", BindPort: 6443, HostDirExists: func(d string) bool { return debian[d] }}
	cp, err := ControlPlane(c, n)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range cp {
		want, err := os.ReadFile(filepath.Join("testdata", "kubeadm", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from kubeadm's:\n--- kjoin\n%s\n--- kubeadm\n%s", name, got, want)
		}
	}
	// etcd: kubeadm init's manifest for cp1 against kjoin's render for cp1, apart from the
	// --initial-cluster flags (a join names every member and the existing state).
	got, err := Etcd(c, Node{Name: "cp1", AdvertiseAddress: "10.77.0.11", BindPort: 6443, HostDirExists: n.HostDirExists}, []Member{{"cp1", "https://10.77.0.11:2380"}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "kubeadm", "etcd-init-cp1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := dropInitialCluster(got), dropInitialCluster(want); a != b {
		t.Errorf("etcd.yaml differs from kubeadm init's beyond --initial-cluster*:\n--- kjoin\n%s\n--- kubeadm\n%s", a, b)
	}
	if !bytes.Contains(got, []byte("--initial-cluster-state=existing")) {
		t.Error("kjoin's etcd does not join the existing cluster")
	}
}

func dropInitialCluster(b []byte) string {
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "--initial-cluster") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
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

// TestRenderMatchesKubeadmOfEachMinor: for a cluster at each supported minor that leaves every
// image to its kubeadm's defaults, kjoin renders byte for byte what that minor's real kubeadm
// writes for the same node (testdata/kubeadm/<version>, from e2e/scripts/golden-manifests.sh):
// v1.35 with its flexvolume mount, each with its own etcd image; and a node whose kubeadm ran
// with proxy variables (v1.37.2-proxy): the control-plane components carry them, etcd not.
func TestRenderMatchesKubeadmOfEachMinor(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "kubeadm", "v1.*"))
	minors := map[string]bool{}
	for _, d := range dirs {
		v, _, _ := strings.Cut(filepath.Base(d), "-")
		minors[v] = true
	}
	if len(minors) < 3 {
		t.Fatalf("golden manifests for %d minors, want every supported one (e2e/scripts/golden-manifests.sh)", len(minors))
	}
	debian := map[string]bool{"/etc/ca-certificates": true, "/usr/share/ca-certificates": true, "/usr/local/share/ca-certificates": true}
	for _, dir := range dirs {
		name := filepath.Base(dir) // v1.37.2, v1.37.2-ipv6, v1.37.2-dual
		v, _, _ := strings.Cut(name, "-")
		t.Run(name, func(t *testing.T) {
			kv, err := os.ReadFile(filepath.Join(dir, "kubeadm-version"))
			if err != nil || strings.TrimSpace(string(kv)) != v {
				t.Fatalf("%s was not written by kubeadm %s (%q, %v)", dir, v, kv, err)
			}
			// The node and the cluster configuration are the ones kubeadm was given.
			cfg, err := os.ReadFile(filepath.Join(dir, "kubeadm-config.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			init, cluster, _ := strings.Cut(string(cfg), "\n---\n")
			adv := regexp.MustCompile(`advertiseAddress: (\S+)`).FindStringSubmatch(init)
			if adv == nil {
				t.Fatalf("%s/kubeadm-config.yaml names no advertiseAddress", dir)
			}
			c, err := cc.Parse([]byte(cluster))
			if err != nil {
				t.Fatal(err)
			}
			n := Node{Name: "cp2", AdvertiseAddress: adv[1], BindPort: 6443, HostDirExists: func(d string) bool { return debian[d] }}
			// <version>-proxy: kubeadm ran with these variables in its environment.
			if env, err := os.ReadFile(filepath.Join(dir, "proxy-env")); err == nil {
				n.ProxyEnv = ProxyEnv(append(strings.Fields(string(env)), "PATH=/usr/bin", "NO_PROXY_X=1", "ftp_proxy="))
				if len(n.ProxyEnv) < 3 {
					t.Fatalf("%s/proxy-env gives %v", dir, n.ProxyEnv)
				}
			}
			cp, err := ControlPlane(c, n)
			if err != nil {
				t.Fatal(err)
			}
			etcd, err := Etcd(c, n, nil)
			if err != nil {
				t.Fatal(err)
			}
			cp["etcd"] = etcd
			for name, got := range cp {
				want, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from kubeadm %s's:\n--- kjoin\n%s\n--- kubeadm\n%s", name, v, got, want)
				}
			}
		})
	}
}

// --authorization-config replaces --authorization-mode: the API server refuses to start with both.
func TestAuthorizationConfigDropsAuthorizationMode(t *testing.T) {
	c, _ := cc.Parse([]byte(clusterConfig))
	c.APIServer.ExtraArgs = []cc.Arg{{Name: "authorization-config", Value: "/etc/kubernetes/authz.yaml"}}
	cp, err := ControlPlane(c, Node{Name: "n", AdvertiseAddress: "10.0.0.1", BindPort: 6443})
	if err != nil {
		t.Fatal(err)
	}
	s := string(cp["kube-apiserver"])
	if strings.Contains(s, "--authorization-mode") || !strings.Contains(s, "--authorization-config=/etc/kubernetes/authz.yaml") {
		t.Errorf("want --authorization-config alone:\n%s", s)
	}
	c.APIServer.ExtraArgs = nil
	cp, _ = ControlPlane(c, Node{Name: "n", AdvertiseAddress: "10.0.0.1", BindPort: 6443})
	if !strings.Contains(string(cp["kube-apiserver"]), "--authorization-mode=Node,RBAC") {
		t.Errorf("without --authorization-config kubeadm's --authorization-mode=Node,RBAC stays:\n%s", cp["kube-apiserver"])
	}
}

// The join reads its learner's metrics where the manifest it wrote serves them.
func TestEtcdMetricsURLIsTheManifests(t *testing.T) {
	for _, tc := range []struct {
		name, advertise string
		extra           []cc.Arg
		want            string
	}{
		{"kubeadm's default", "10.0.0.1", nil, "http://127.0.0.1:2381"},
		{"IPv6 control plane", "fd00::1", nil, "http://[::1]:2381"},
		{"extraArgs, wildcard", "10.0.0.1", []cc.Arg{{Name: "listen-metrics-urls", Value: "https://10.0.0.1:2382,http://0.0.0.0:2390"}}, "http://127.0.0.1:2390"},
		{"extraArgs, TLS only", "10.0.0.1", []cc.Arg{{Name: "listen-metrics-urls", Value: "https://127.0.0.1:2381"}}, ""},
	} {
		c, err := cc.Parse([]byte(clusterConfig))
		if err != nil {
			t.Fatal(err)
		}
		c.Etcd.Local.ExtraArgs = tc.extra
		n := Node{Name: "n", AdvertiseAddress: tc.advertise, BindPort: 6443}
		if got := EtcdMetricsURL(c, n); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if tc.want == "" {
			continue
		}
		b, err := Etcd(c, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		flag := regexp.MustCompile(`--listen-metrics-urls=(\S+)`).FindSubmatch(b)
		if flag == nil || !strings.Contains(strings.NewReplacer("0.0.0.0", "127.0.0.1").Replace(string(flag[1])), strings.TrimPrefix(tc.want, "http://")) {
			t.Errorf("%s: the manifest serves metrics at %s, the join reads %s", tc.name, flag, tc.want)
		}
	}
}
