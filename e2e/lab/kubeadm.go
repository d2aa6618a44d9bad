package lab

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
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
cgroupDriver: %[8]s
failCgroupV1: false
failSwapOn: false
localStorageCapacityIsolation: false
`, Token, ip, APIPort, l.K8sVersion, ControlPlaneName, families[l.family()].pods, families[l.family()].services, CgroupDriver)
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

// linkTools fills Root/bin (first on every host's PATH; Root is shared read-only with every
// host) with the components and any extra programs. Extra programs are copied: their own
// paths need not exist in a host.
func (l *Lab) linkTools(extra map[string]string) error {
	dir := filepath.Join(l.Root, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubeadm", "kubectl"} {
		link := filepath.Join(dir, p)
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(l.BinDir, p), link); err != nil {
			return err
		}
	}
	for name, src := range extra {
		if err := copyExecutable(src, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// journal returns a host's journal lines of one unit (all units when unit is empty), the
// last n (all when n is 0).
func (l *Lab) journal(host, unit string, n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	argv := []string{"journalctl", "--no-pager", "-o", "short-precise"}
	if unit != "" {
		argv = append(argv, "-u", unit)
	}
	if n > 0 {
		argv = append(argv, "-n", strconv.Itoa(n))
	}
	r := l.Exec(ctx, host, argv...)
	if r.Err != nil {
		return fmt.Sprintf("(journalctl: %v %s)", r.Err, strings.TrimSpace(r.Stderr))
	}
	return r.Stdout
}

// Logs returns the tail (n lines each) of a host's kubelet journal, containerd log and pod
// logs.
func (l *Lab) Logs(host string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "==> %s: journalctl -u kubelet <==\n%s\n", host, l.journal(host, "kubelet", n))
	fmt.Fprintf(&b, "==> %s:/run/lab/containerd.log <==\n%s\n", host, tailFile(filepath.Join(l.runLabDir(host), "containerd.log"), n))
	root := l.HostPath(host, "/")
	pods, _ := filepath.Glob(filepath.Join(root, "var/log/pods", "*", "*", "*.log"))
	for _, p := range pods {
		fmt.Fprintf(&b, "==> %s:%s <==\n%s\n", host, strings.TrimPrefix(p, root), tailFile(p, n))
	}
	return b.String()
}

// CollectLogs copies a host's full logs into dir/<host>/: its journal (kubelet and the
// whole), /run/lab's logs and the pod logs.
func (l *Lab) CollectLogs(host, dir string) error {
	dst := filepath.Join(dir, host)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for name, unit := range map[string]string{"journal-kubelet.log": "kubelet", "journal.log": ""} {
		if err := os.WriteFile(filepath.Join(dst, name), []byte(l.journal(host, unit, 0)), 0o644); err != nil {
			return err
		}
	}
	root := l.HostPath(host, "/")
	files, _ := filepath.Glob(filepath.Join(l.runLabDir(host), "*.log"))
	pods, _ := filepath.Glob(filepath.Join(root, "var/log/pods", "*", "*", "*.log"))
	for _, f := range append(files, pods...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(f, root), l.hostDir(host))
		if err := os.WriteFile(filepath.Join(dst, strings.ReplaceAll(strings.Trim(rel, "/"), "/", "_")), b, 0o644); err != nil {
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
