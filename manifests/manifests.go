// Package manifests renders the static-pod manifests of a control-plane node (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) from the cluster's
// ClusterConfiguration, equivalent to what kubeadm writes for the same node. It renders bytes
// only; the phases write them (and apply --patches).
package manifests

import (
	"fmt"
	"maps"
	"math"
	"net"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cc "kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/versions"
)

// Node is what is specific to the joining node.
type Node struct {
	Name             string
	AdvertiseAddress string
	BindPort         int
	// HostDirExists reports whether a host directory exists (for the optional CA volumes).
	HostDirExists func(string) bool
	// ProxyEnv holds the host's *_proxy variables, passed to the components as kubeadm does.
	ProxyEnv []corev1.EnvVar
	// ComponentHealthTimeout sets the startup probe budget (kubeadm: 4m → 24 tries).
	ComponentHealthTimeout time.Duration
}

// Member is an etcd member for --initial-cluster.
type Member struct{ Name, PeerURL string }

const kubernetesDir = "/etc/kubernetes"

// caDirs are the host CA directories kubeadm mounts when they exist (name → path).
var caDirs = map[string]string{
	"etc-pki-ca-trust":                "/etc/pki/ca-trust",
	"etc-pki-tls-certs":               "/etc/pki/tls/certs",
	"etc-ca-certificates":             "/etc/ca-certificates",
	"usr-share-ca-certificates":       "/usr/share/ca-certificates",
	"usr-local-share-ca-certificates": "/usr/local/share/ca-certificates",
}

type volume struct {
	name, hostPath, mountPath string
	readOnly                  bool
	pathType                  corev1.HostPathType
}

// ControlPlane renders kube-apiserver, kube-controller-manager and kube-scheduler.
func ControlPlane(c *cc.ClusterConfiguration, n Node) (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, pod := range map[string]*corev1.Pod{
		"kube-apiserver":          apiserver(c, n),
		"kube-controller-manager": controllerManager(c, n),
		"kube-scheduler":          scheduler(c, n),
	} {
		b, err := marshal(pod)
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}

func apiserver(c *cc.ClusterConfiguration, n Node) *corev1.Pod {
	pki := c.CertificatesDir
	args := []cc.Arg{
		{Name: "advertise-address", Value: n.AdvertiseAddress},
		{Name: "allow-privileged", Value: "true"},
		{Name: "authorization-mode", Value: "Node,RBAC"},
		{Name: "client-ca-file", Value: path.Join(pki, "ca.crt")},
		{Name: "enable-admission-plugins", Value: "NodeRestriction"},
		{Name: "enable-bootstrap-token-auth", Value: "true"},
		{Name: "kubelet-client-certificate", Value: path.Join(pki, "apiserver-kubelet-client.crt")},
		{Name: "kubelet-client-key", Value: path.Join(pki, "apiserver-kubelet-client.key")},
		{Name: "kubelet-preferred-address-types", Value: "InternalIP,ExternalIP,Hostname"},
		{Name: "proxy-client-cert-file", Value: path.Join(pki, "front-proxy-client.crt")},
		{Name: "proxy-client-key-file", Value: path.Join(pki, "front-proxy-client.key")},
		{Name: "requestheader-allowed-names", Value: "front-proxy-client"},
		{Name: "requestheader-client-ca-file", Value: path.Join(pki, "front-proxy-ca.crt")},
		{Name: "requestheader-extra-headers-prefix", Value: "X-Remote-Extra-"},
		{Name: "requestheader-group-headers", Value: "X-Remote-Group"},
		{Name: "requestheader-username-headers", Value: "X-Remote-User"},
		{Name: "secure-port", Value: strconv.Itoa(n.BindPort)},
		{Name: "service-account-issuer", Value: "https://kubernetes.default.svc." + c.Networking.DNSDomain},
		{Name: "service-account-key-file", Value: path.Join(pki, "sa.pub")},
		{Name: "service-account-signing-key-file", Value: path.Join(pki, "sa.key")},
		{Name: "service-cluster-ip-range", Value: c.Networking.ServiceSubnet},
		{Name: "tls-cert-file", Value: path.Join(pki, "apiserver.crt")},
		{Name: "tls-private-key-file", Value: path.Join(pki, "apiserver.key")},
	}
	for _, a := range c.APIServer.ExtraArgs {
		if a.Name == "authorization-config" {
			args = removeArg(args, "authorization-mode")
		}
	}
	vols := append(commonVolumes(c, n), c.APIServer.ExtraVolumes...)
	if e := c.Etcd.External; e != nil {
		args = append(args, cc.Arg{Name: "etcd-servers", Value: strings.Join(e.Endpoints, ",")})
		for flag, file := range map[string]string{"etcd-cafile": e.CAFile, "etcd-certfile": e.CertFile, "etcd-keyfile": e.KeyFile} {
			if file != "" {
				args = append(args, cc.Arg{Name: flag, Value: file})
			}
		}
		vols = append(vols, externalEtcdVolumes(c, e)...)
	} else {
		args = append(args,
			cc.Arg{Name: "etcd-cafile", Value: path.Join(pki, "etcd", "ca.crt")},
			cc.Arg{Name: "etcd-certfile", Value: path.Join(pki, "apiserver-etcd-client.crt")},
			cc.Arg{Name: "etcd-keyfile", Value: path.Join(pki, "apiserver-etcd-client.key")},
			cc.Arg{Name: "etcd-servers", Value: "https://" + host.JoinHostPort(localhostOf(n.AdvertiseAddress), 2379)})
	}
	probeHost := n.AdvertiseAddress
	p := pod("kube-apiserver", c.Image("kube-apiserver"), cc.Command(args, c.APIServer.ExtraArgs), "250m", "", n, c.APIServer.ExtraEnvs)
	p.Annotations = map[string]string{"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint": host.JoinHostPort(n.AdvertiseAddress, n.BindPort)}
	ctr := &p.Spec.Containers[0]
	ctr.Ports = probePort(n.BindPort)
	ctr.LivenessProbe = probe(probeHost, "/livez", corev1.URISchemeHTTPS, 10, 15, 8, 10)
	ctr.ReadinessProbe = probe(probeHost, "/readyz", corev1.URISchemeHTTPS, 0, 15, 3, 1)
	ctr.StartupProbe = probe(probeHost, "/livez", corev1.URISchemeHTTPS, 10, 15, startupFailures(n), 10)
	setVolumes(p, sortedMounts(vols))
	return p
}

func controllerManager(c *cc.ClusterConfiguration, n Node) *corev1.Pod {
	pki := c.CertificatesDir
	kc := path.Join(kubernetesDir, "controller-manager.conf")
	args := []cc.Arg{
		{Name: "authentication-kubeconfig", Value: kc},
		{Name: "authorization-kubeconfig", Value: kc},
		{Name: "bind-address", Value: "127.0.0.1"},
		{Name: "client-ca-file", Value: path.Join(pki, "ca.crt")},
		{Name: "cluster-name", Value: c.ClusterName},
		{Name: "cluster-signing-cert-file", Value: path.Join(pki, "ca.crt")},
		{Name: "cluster-signing-key-file", Value: path.Join(pki, "ca.key")},
		{Name: "controllers", Value: "*,bootstrapsigner,tokencleaner"},
		{Name: "kubeconfig", Value: kc},
		{Name: "leader-elect", Value: "true"},
		{Name: "requestheader-client-ca-file", Value: path.Join(pki, "front-proxy-ca.crt")},
		{Name: "root-ca-file", Value: path.Join(pki, "ca.crt")},
		{Name: "service-account-private-key-file", Value: path.Join(pki, "sa.key")},
		{Name: "use-service-account-credentials", Value: "true"},
	}
	if c.Networking.PodSubnet != "" {
		args = append(args, cc.Arg{Name: "allocate-node-cidrs", Value: "true"}, cc.Arg{Name: "cluster-cidr", Value: c.Networking.PodSubnet})
	}
	if c.Networking.ServiceSubnet != "" {
		args = append(args, cc.Arg{Name: "service-cluster-ip-range", Value: c.Networking.ServiceSubnet})
	}
	p := pod("kube-controller-manager", c.Image("kube-controller-manager"), cc.Command(args, c.ControllerManager.ExtraArgs), "200m", "", n, c.ControllerManager.ExtraEnvs)
	ctr := &p.Spec.Containers[0]
	ctr.Ports = probePort(10257)
	ctr.LivenessProbe = probe("127.0.0.1", "/healthz", corev1.URISchemeHTTPS, 10, 15, 8, 10)
	ctr.StartupProbe = probe("127.0.0.1", "/healthz", corev1.URISchemeHTTPS, 10, 15, startupFailures(n), 10)
	vols := append(commonVolumes(c, n), cc.HostPathMount{Name: "kubeconfig", HostPath: kc, MountPath: kc, ReadOnly: true, PathType: corev1.HostPathFileOrCreate})
	if versions.FlexVolumeMount(c.Minor()) {
		// Until v1.35 kubeadm mounts the flexvolume plugin directory, writable (plugins talk
		// to their storage through sockets there).
		dir := "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"
		for _, a := range c.ControllerManager.ExtraArgs {
			if a.Name == "flex-volume-plugin-dir" {
				dir = a.Value
			}
		}
		vols = append(vols, cc.HostPathMount{Name: "flexvolume-dir", HostPath: dir, MountPath: dir, PathType: corev1.HostPathDirectoryOrCreate})
	}
	setVolumes(p, sortedMounts(append(vols, c.ControllerManager.ExtraVolumes...)))
	return p
}

func scheduler(c *cc.ClusterConfiguration, n Node) *corev1.Pod {
	kc := path.Join(kubernetesDir, "scheduler.conf")
	args := []cc.Arg{
		{Name: "authentication-kubeconfig", Value: kc},
		{Name: "authorization-kubeconfig", Value: kc},
		{Name: "bind-address", Value: "127.0.0.1"},
		{Name: "kubeconfig", Value: kc},
		{Name: "leader-elect", Value: "true"},
	}
	p := pod("kube-scheduler", c.Image("kube-scheduler"), cc.Command(args, c.Scheduler.ExtraArgs), "100m", "", n, c.Scheduler.ExtraEnvs)
	ctr := &p.Spec.Containers[0]
	ctr.Ports = probePort(10259)
	ctr.LivenessProbe = probe("127.0.0.1", "/livez", corev1.URISchemeHTTPS, 10, 15, 8, 10)
	ctr.ReadinessProbe = probe("127.0.0.1", "/readyz", corev1.URISchemeHTTPS, 0, 15, 3, 1)
	ctr.StartupProbe = probe("127.0.0.1", "/livez", corev1.URISchemeHTTPS, 10, 15, startupFailures(n), 10)
	vols := []cc.HostPathMount{{Name: "kubeconfig", HostPath: kc, MountPath: kc, ReadOnly: true, PathType: corev1.HostPathFileOrCreate}}
	setVolumes(p, sortedMounts(append(vols, c.Scheduler.ExtraVolumes...)))
	return p
}

// Etcd renders the etcd manifest of a member joining existing members (initial-cluster-state
// existing), or of the first member when existing is empty.
func Etcd(c *cc.ClusterConfiguration, n Node, members []Member) ([]byte, error) {
	if c.Etcd.Local == nil {
		return nil, fmt.Errorf("the cluster uses an external etcd")
	}
	e := c.Etcd.Local
	pki := path.Join(c.CertificatesDir, "etcd")
	clientURL := "https://" + host.JoinHostPort(n.AdvertiseAddress, 2379)
	peerURL := "https://" + host.JoinHostPort(n.AdvertiseAddress, 2380)
	local := localhostOf(n.AdvertiseAddress)
	args := []cc.Arg{
		{Name: "name", Value: n.Name},
		{Name: "listen-client-urls", Value: "https://" + host.JoinHostPort(local, 2379) + "," + clientURL},
		{Name: "advertise-client-urls", Value: clientURL},
		{Name: "listen-peer-urls", Value: peerURL},
		{Name: "initial-advertise-peer-urls", Value: peerURL},
		{Name: "data-dir", Value: e.DataDir},
		{Name: "cert-file", Value: path.Join(pki, "server.crt")},
		{Name: "key-file", Value: path.Join(pki, "server.key")},
		{Name: "trusted-ca-file", Value: path.Join(pki, "ca.crt")},
		{Name: "client-cert-auth", Value: "true"},
		{Name: "peer-cert-file", Value: path.Join(pki, "peer.crt")},
		{Name: "peer-key-file", Value: path.Join(pki, "peer.key")},
		{Name: "peer-trusted-ca-file", Value: path.Join(pki, "ca.crt")},
		{Name: "peer-client-cert-auth", Value: "true"},
		{Name: "snapshot-count", Value: "10000"},
		{Name: "listen-metrics-urls", Value: "http://" + host.JoinHostPort(local, 2381)},
	}
	if oldEtcdFlags(c) {
		args = append(args, cc.Arg{Name: "experimental-initial-corrupt-check", Value: "true"}, cc.Arg{Name: "experimental-watch-progress-notify-interval", Value: "5s"})
	} else {
		args = append(args, cc.Arg{Name: "feature-gates", Value: "InitialCorruptCheck=true"}, cc.Arg{Name: "watch-progress-notify-interval", Value: "5s"})
	}
	if len(members) == 0 {
		args = append(args, cc.Arg{Name: "initial-cluster", Value: n.Name + "=" + peerURL})
	} else {
		var ic []string
		for _, m := range members {
			ic = append(ic, m.Name+"="+m.PeerURL)
		}
		args = append(args, cc.Arg{Name: "initial-cluster", Value: strings.Join(ic, ",")}, cc.Arg{Name: "initial-cluster-state", Value: "existing"})
	}
	n.ProxyEnv = nil // kubeadm gives etcd its extraEnvs only, never the host's proxy variables
	p := pod("etcd", c.Image("etcd"), cc.Command(args, e.ExtraArgs), "100m", "100Mi", n, e.ExtraEnvs)
	p.Annotations = map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": clientURL}
	ctr := &p.Spec.Containers[0]
	ctr.Ports = probePort(2381)
	ctr.LivenessProbe = probe(local, "/livez", corev1.URISchemeHTTP, 10, 15, 8, 10)
	ctr.ReadinessProbe = probe(local, "/readyz", corev1.URISchemeHTTP, 0, 15, 3, 1)
	ctr.StartupProbe = probe(local, "/readyz", corev1.URISchemeHTTP, 10, 15, startupFailures(n), 10)
	setVolumes(p, []cc.HostPathMount{
		{Name: "etcd-data", HostPath: e.DataDir, MountPath: e.DataDir, PathType: corev1.HostPathDirectoryOrCreate},
		{Name: "etcd-certs", HostPath: pki, MountPath: pki, PathType: corev1.HostPathDirectoryOrCreate},
	})
	return marshal(p)
}

// EtcdMetricsURL is the plain-HTTP metrics URL of the etcd member Etcd renders for n
// (kubeadm's http://127.0.0.1:2381, or the cluster's etcd extraArgs' listen-metrics-urls):
// "" when the member serves its metrics over TLS only.
func EtcdMetricsURL(c *cc.ClusterConfiguration, n Node) string {
	value := "http://" + host.JoinHostPort(localhostOf(n.AdvertiseAddress), 2381)
	if c.Etcd.Local != nil {
		for _, a := range c.Etcd.Local.ExtraArgs {
			if a.Name == "listen-metrics-urls" {
				value = a.Value
				break
			}
		}
	}
	for _, u := range strings.Split(value, ",") {
		if u = strings.TrimSpace(u); strings.HasPrefix(u, "http://") {
			// A wildcard listener is reached on the loopback address of its family.
			u = strings.Replace(u, "//0.0.0.0:", "//127.0.0.1:", 1)
			return strings.Replace(u, "//[::]:", "//[::1]:", 1)
		}
	}
	return ""
}

// localhostOf is the loopback address of the advertise address's family (kubeadm: etcd and the
// API server's etcd client use [::1] on an IPv6 control plane).
func localhostOf(advertise string) string {
	if ip := net.ParseIP(advertise); ip != nil && ip.To4() == nil {
		return "::1"
	}
	return "127.0.0.1"
}

func removeArg(args []cc.Arg, name string) []cc.Arg {
	out := args[:0]
	for _, a := range args {
		if a.Name != name {
			out = append(out, a)
		}
	}
	return out
}

// oldEtcdFlags: v1.35's kubeadm gives an etcd older than 3.6 its experimental-* flags (later
// kubeadms always give the 3.6 names).
func oldEtcdFlags(c *cc.ClusterConfiguration) bool {
	if c.Minor() > 35 || c.Etcd.Local == nil {
		return false
	}
	v, err := version.ParseSemantic(c.Etcd.Local.ImageTag)
	return err == nil && v.LessThan(version.MustParseSemantic("3.6.0"))
}

func commonVolumes(c *cc.ClusterConfiguration, n Node) []cc.HostPathMount {
	v := []cc.HostPathMount{
		{Name: "k8s-certs", HostPath: c.CertificatesDir, MountPath: c.CertificatesDir, ReadOnly: true, PathType: corev1.HostPathDirectoryOrCreate},
		{Name: "ca-certs", HostPath: "/etc/ssl/certs", MountPath: "/etc/ssl/certs", ReadOnly: true, PathType: corev1.HostPathDirectoryOrCreate},
	}
	for name, dir := range caDirs {
		if n.HostDirExists != nil && n.HostDirExists(dir) {
			v = append(v, cc.HostPathMount{Name: name, HostPath: dir, MountPath: dir, ReadOnly: true, PathType: corev1.HostPathDirectoryOrCreate})
		}
	}
	return v
}

func externalEtcdVolumes(c *cc.ClusterConfiguration, e *cc.ExternalEtcd) []cc.HostPathMount {
	var v []cc.HostPathMount
	seen := map[string]bool{}
	for _, f := range []string{e.CAFile, e.CertFile, e.KeyFile} {
		if f == "" {
			continue
		}
		dir := path.Dir(f)
		if seen[dir] || strings.HasPrefix(dir, c.CertificatesDir) || dir == "/etc/ssl/certs" {
			continue
		}
		seen[dir] = true
		v = append(v, cc.HostPathMount{Name: "etcd-certs-" + strconv.Itoa(len(v)), HostPath: dir, MountPath: dir, ReadOnly: true, PathType: corev1.HostPathDirectoryOrCreate})
	}
	return v
}

func pod(name, image string, command []string, cpu, memory string, n Node, extraEnv []corev1.EnvVar) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	if memory != "" {
		req[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	env := mergeEnv(n.ProxyEnv, extraEnv)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "kube-system",
			Labels: map[string]string{"component": name, "tier": "control-plane"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            name,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         append([]string{name}, command...),
				Resources:       corev1.ResourceRequirements{Requests: req},
				Env:             env,
			}},
			HostNetwork:       true,
			Priority:          ptr.To(int32(2000001000)),
			PriorityClassName: "system-node-critical",
			SecurityContext:   &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		},
	}
}

func mergeEnv(a, b []corev1.EnvVar) []corev1.EnvVar {
	// kubeadm's MergeKubeadmEnvVars: later lists win, the result sorted by name.
	m := map[string]corev1.EnvVar{}
	for _, list := range [][]corev1.EnvVar{a, b} {
		for _, e := range list {
			m[e.Name] = e
		}
	}
	var out []corev1.EnvVar
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[name])
	}
	return out
}

// ProxyEnv is kubeadm's GetProxyEnvVars: every variable of environ (NAME=value) whose name
// ends in _proxy, any case, with a value, in environ's order.
func ProxyEnv(environ []string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && value != "" && strings.HasSuffix(strings.ToLower(name), "_proxy") {
			out = append(out, corev1.EnvVar{Name: name, Value: value})
		}
	}
	return out
}

func probePort(port int) []corev1.ContainerPort {
	return []corev1.ContainerPort{{Name: "probe-port", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}}
}

func probe(host, p string, scheme corev1.URIScheme, initialDelay, timeout, failures, period int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: host, Path: p, Port: intstr.FromString("probe-port"), Scheme: scheme,
		}},
		InitialDelaySeconds: initialDelay,
		TimeoutSeconds:      timeout,
		FailureThreshold:    failures,
		PeriodSeconds:       period,
	}
}

func startupFailures(n Node) int32 {
	t := n.ComponentHealthTimeout
	if t == 0 {
		t = 4 * time.Minute
	}
	return int32(math.Ceil(t.Seconds() / 10))
}

// setVolumes adds hostPath volumes sorted by name (as kubeadm), and their mounts in the
// given order (kubeadm sorts the control-plane components' mounts, not etcd's).
func setVolumes(p *corev1.Pod, mounts []cc.HostPathMount) {
	for _, m := range mounts {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly})
	}
	sorted := append([]cc.HostPathMount{}, mounts...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, m := range sorted {
		pt := m.PathType
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: m.Name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.HostPath, Type: &pt}}})
	}
}

func sortedMounts(m []cc.HostPathMount) []cc.HostPathMount {
	sort.SliceStable(m, func(i, j int) bool { return m[i].Name < m[j].Name })
	return m
}

func marshal(p *corev1.Pod) ([]byte, error) { return yaml.Marshal(p) }
