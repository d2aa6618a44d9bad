package lab

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// InitConfig is the kubeadm configuration the lab gives `kubeadm init` on cp1. It leaves every
// image to that kubeadm's defaults (the etcd and pause images differ between minors).
func (l *Lab) InitConfig(ip string) string {
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: %[1]s
  ttl: 24h0m0s
localAPIEndpoint:
  advertiseAddress: %[2]s
  bindPort: %[3]d
nodeRegistration:
  name: cp1
  criSocket: unix:///run/containerd/containerd.sock
  imagePullPolicy: Never
  ignorePreflightErrors:
  - all
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: %[4]s
controlPlaneEndpoint: %[5]s:%[3]d
networking:
  podSubnet: %[6]s
  serviceSubnet: %[7]s
dns:
  disabled: true
proxy:
  disabled: true
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
localStorageCapacityIsolation: false
`, Token, ip, APIPort, l.K8sVersion, ControlPlaneName, families[l.family()].pods, families[l.family()].services)
}

// InitControlPlane runs real `kubeadm init` on cp1 and records the CA pin.
func (l *Lab) InitControlPlane(ctx context.Context, logf func(string, ...any)) error {
	h, ok := l.Hosts["cp1"]
	if !ok {
		return fmt.Errorf("host cp1 is not up")
	}
	if _, err := os.Stat(l.HostPath("cp1", "/etc/kubernetes/admin.conf")); err == nil && l.CAHash != "" {
		return nil
	}
	cfg := l.HostPath("cp1", "/run/lab/kubeadm-init.yaml")
	if err := os.WriteFile(cfg, []byte(l.InitConfig(h.IP)), 0o600); err != nil {
		return err
	}
	start := time.Now()
	r := l.Exec(ctx, "cp1", "kubeadm", "init", "--config", "/run/lab/kubeadm-init.yaml",
		"--skip-phases=addon/kube-proxy,addon/coredns")
	_ = os.WriteFile(l.HostPath("cp1", "/run/lab/kubeadm-init.log"), []byte(r.Stdout+r.Stderr), 0o644)
	if r.Err != nil {
		return fmt.Errorf("kubeadm init on cp1: %w", r.Error())
	}
	logf("kubeadm init on cp1 took %s", time.Since(start).Round(100*time.Millisecond))
	ca, err := l.ReadFile("cp1", "/etc/kubernetes/pki/ca.crt")
	if err != nil {
		return err
	}
	if l.CAHash, err = CAHash(ca); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.save()
}

// CAHash returns kubeadm's pin of a PEM CA certificate: sha256 of its SubjectPublicKeyInfo.
func CAHash(caPEM []byte) (string, error) {
	b, _ := pem.Decode(caPEM)
	if b == nil {
		return "", fmt.Errorf("no PEM block in CA certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

var certKeyRE = regexp.MustCompile(`(?m)^([0-9a-f]{64})$`)

// UploadCerts runs `kubeadm init phase upload-certs --upload-certs` on cp1 (with cp1's init
// configuration: without one kubeadm first asks the internet for a version, which the lab
// cannot reach) and returns the certificate key it printed.
func (l *Lab) UploadCerts(ctx context.Context) (string, error) {
	r := l.Exec(ctx, "cp1", "kubeadm", "init", "phase", "upload-certs", "--upload-certs", "--config", "/run/lab/kubeadm-init.yaml")
	if r.Err != nil {
		return "", r.Error()
	}
	m := certKeyRE.FindStringSubmatch(r.Stdout)
	if m == nil {
		return "", fmt.Errorf("no certificate key in kubeadm output:\n%s", r.Stdout)
	}
	return m[1], nil
}

// Endpoint is the cluster's controlPlaneEndpoint as hosts reach it.
func Endpoint() string { return fmt.Sprintf("%s:%d", ControlPlaneName, APIPort) }

// Kubectl runs kubectl as cluster admin on cp1.
func (l *Lab) Kubectl(ctx context.Context, args ...string) Result {
	return l.Exec(ctx, "cp1", append([]string{"kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"}, args...)...)
}

// linkTools fills Root/bin (first on every host's PATH) with the components, the systemctl
// and journalctl stand-ins and any extra programs.
func (l *Lab) linkTools(extra map[string]string) error {
	dir := filepath.Join(l.Root, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	links := map[string]string{}
	for _, p := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubeadm", "kubectl"} {
		links[p] = filepath.Join(l.BinDir, p)
	}
	for k, v := range extra {
		abs, err := filepath.Abs(v)
		if err != nil {
			return err
		}
		links[k] = abs
	}
	for name, target := range links {
		p := filepath.Join(dir, name)
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "journalctl"), journalctlStandIn, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "systemctl"), systemctlStandIn, 0o755)
}

// Logs returns the tail (n lines each) of a host's kubelet, containerd and pod logs.
func (l *Lab) Logs(host string, n int) string {
	var b strings.Builder
	for _, f := range []string{"/run/lab/kubelet.log", "/run/lab/containerd.log"} {
		fmt.Fprintf(&b, "==> %s:%s <==\n%s\n", host, f, tailFile(l.HostPath(host, f), n))
	}
	pods, _ := filepath.Glob(filepath.Join(l.HostPath(host, "/var/log/pods"), "*", "*", "*.log"))
	for _, p := range pods {
		fmt.Fprintf(&b, "==> %s:%s <==\n%s\n", host, strings.TrimPrefix(p, l.hostDir(host)), tailFile(p, n))
	}
	return b.String()
}

// CollectLogs copies a host's full logs into dir/<host>/.
func (l *Lab) CollectLogs(host, dir string) error {
	dst := filepath.Join(dir, host)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	files, _ := filepath.Glob(l.HostPath(host, "/run/lab/*.log"))
	pods, _ := filepath.Glob(filepath.Join(l.HostPath(host, "/var/log/pods"), "*", "*", "*.log"))
	for _, f := range append(files, pods...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		rel := strings.ReplaceAll(strings.TrimPrefix(f, l.hostDir(host)+"/"), "/", "_")
		if err := os.WriteFile(filepath.Join(dst, rel), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// JoinEndpoint is the API server endpoint joins are given: the control-plane name, or on an
// IPv6 single-stack lab cp1's bracketed address ("[fd77::11]:6443"), as operators write it.
func (l *Lab) JoinEndpoint() string {
	if l.family() == "ipv6" {
		if h, ok := l.Hosts["cp1"]; ok {
			return net.JoinHostPort(h.IP, strconv.Itoa(APIPort))
		}
	}
	return Endpoint()
}
