// Package clusterconfig reads the cluster's kubeadm ClusterConfiguration
// (kube-system/kubeadm-config, kubeadm.k8s.io/v1beta4) and applies kubeadm's defaults. It owns
// that type, its defaults and the one read of it; it does not know what a join does with it.
package clusterconfig

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/versions"
)

// Arg is a component flag (v1beta4 extraArgs).
type Arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HostPathMount is an extra volume of a control-plane component.
type HostPathMount struct {
	Name      string              `json:"name"`
	HostPath  string              `json:"hostPath"`
	MountPath string              `json:"mountPath"`
	ReadOnly  bool                `json:"readOnly,omitempty"`
	PathType  corev1.HostPathType `json:"pathType,omitempty"`
}

// Component is the common part of a control-plane component's configuration.
type Component struct {
	ExtraArgs    []Arg           `json:"extraArgs,omitempty"`
	ExtraVolumes []HostPathMount `json:"extraVolumes,omitempty"`
	ExtraEnvs    []corev1.EnvVar `json:"extraEnvs,omitempty"`
}

// LocalEtcd configures the stacked etcd.
type LocalEtcd struct {
	ImageRepository string          `json:"imageRepository,omitempty"`
	ImageTag        string          `json:"imageTag,omitempty"`
	DataDir         string          `json:"dataDir,omitempty"`
	ExtraArgs       []Arg           `json:"extraArgs,omitempty"`
	ExtraEnvs       []corev1.EnvVar `json:"extraEnvs,omitempty"`
	ServerCertSANs  []string        `json:"serverCertSANs,omitempty"`
	PeerCertSANs    []string        `json:"peerCertSANs,omitempty"`
}

// ExternalEtcd configures an external etcd.
type ExternalEtcd struct {
	Endpoints []string `json:"endpoints"`
	CAFile    string   `json:"caFile"`
	CertFile  string   `json:"certFile"`
	KeyFile   string   `json:"keyFile"`
}

// ClusterConfiguration is kubeadm's ClusterConfiguration, the fields a control-plane join uses.
type ClusterConfiguration struct {
	KubernetesVersion           string `json:"kubernetesVersion"`
	ControlPlaneEndpoint        string `json:"controlPlaneEndpoint"`
	CertificatesDir             string `json:"certificatesDir"`
	ImageRepository             string `json:"imageRepository"`
	ClusterName                 string `json:"clusterName"`
	EncryptionAlgorithm         string `json:"encryptionAlgorithm"`
	CertificateValidityPeriod   string `json:"certificateValidityPeriod"`
	CACertificateValidityPeriod string `json:"caCertificateValidityPeriod"`
	APIServer                   struct {
		Component
		CertSANs []string `json:"certSANs,omitempty"`
	} `json:"apiServer"`
	ControllerManager Component `json:"controllerManager"`
	Scheduler         Component `json:"scheduler"`
	Etcd              struct {
		Local    *LocalEtcd    `json:"local,omitempty"`
		External *ExternalEtcd `json:"external,omitempty"`
	} `json:"etcd"`
	Networking struct {
		ServiceSubnet string `json:"serviceSubnet"`
		PodSubnet     string `json:"podSubnet"`
		DNSDomain     string `json:"dnsDomain"`
	} `json:"networking"`
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
}

// Minor is the minor of the cluster's kubernetesVersion (the newest supported one when it
// cannot be read): the kubeadm whose rules a join renders by.
func (c *ClusterConfiguration) Minor() int {
	m, err := versions.Minor(c.KubernetesVersion)
	if err != nil {
		return versions.MaxMinor
	}
	return m
}

// FeatureGate reports a kubeadm feature gate, def when the cluster does not set it.
func (c *ClusterConfiguration) FeatureGate(name string, def bool) bool {
	if v, ok := c.FeatureGates[name]; ok {
		return v
	}
	return def
}

// Parse reads a ClusterConfiguration document and applies kubeadm's defaults.
func Parse(doc []byte) (*ClusterConfiguration, error) {
	var head struct{ APIVersion, Kind string }
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, fmt.Errorf("parse ClusterConfiguration: %w", err)
	}
	if head.Kind != "ClusterConfiguration" || head.APIVersion != "kubeadm.k8s.io/v1beta4" {
		return nil, fmt.Errorf("kubeadm-config holds %s %s, want kubeadm.k8s.io/v1beta4 ClusterConfiguration", head.APIVersion, head.Kind)
	}
	c := &ClusterConfiguration{}
	if err := yaml.Unmarshal(doc, c); err != nil {
		return nil, fmt.Errorf("parse ClusterConfiguration: %w", err)
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.CertificatesDir, "/etc/kubernetes/pki")
	def(&c.ImageRepository, "registry.k8s.io")
	def(&c.ClusterName, "kubernetes")
	def(&c.EncryptionAlgorithm, "RSA-2048")
	def(&c.CertificateValidityPeriod, "8760h0m0s")
	def(&c.CACertificateValidityPeriod, "87600h0m0s")
	def(&c.Networking.ServiceSubnet, "10.96.0.0/12")
	def(&c.Networking.DNSDomain, "cluster.local")
	if c.Etcd.Local == nil && c.Etcd.External == nil {
		c.Etcd.Local = &LocalEtcd{}
	}
	if c.Etcd.Local != nil {
		def(&c.Etcd.Local.DataDir, "/var/lib/etcd")
		def(&c.Etcd.Local.ImageRepository, c.ImageRepository)
		// The etcd image this cluster's kubeadm defaults to: a v1.36 cluster runs etcd 3.6.
		def(&c.Etcd.Local.ImageTag, versions.EtcdImageTag(c.Minor()))
	}
	return c, nil
}

// CertValidity is certificateValidityPeriod as a duration.
func (c *ClusterConfiguration) CertValidity() time.Duration {
	d, err := time.ParseDuration(c.CertificateValidityPeriod)
	if err != nil || d <= 0 {
		return 365 * 24 * time.Hour
	}
	return d
}

// Image returns the image of a control-plane component.
func (c *ClusterConfiguration) Image(component string) string {
	if component == "etcd" && c.Etcd.Local != nil {
		return c.Etcd.Local.ImageRepository + "/etcd:" + c.Etcd.Local.ImageTag
	}
	return c.ImageRepository + "/" + component + ":" + c.KubernetesVersion
}

// EndpointHost returns the host part of controlPlaneEndpoint.
func (c *ClusterConfiguration) EndpointHost() string {
	h, _, err := net.SplitHostPort(c.ControlPlaneEndpoint)
	if err != nil {
		return c.ControlPlaneEndpoint
	}
	return h
}

// FirstServiceIP returns the first address of the service subnet (the kubernetes Service).
func (c *ClusterConfiguration) FirstServiceIP() (net.IP, error) {
	cidr := strings.Split(c.Networking.ServiceSubnet, ",")[0]
	_, n, err := net.ParseCIDR(strings.TrimSpace(cidr))
	if err != nil {
		return nil, fmt.Errorf("service subnet %q: %w", c.Networking.ServiceSubnet, err)
	}
	ip := make(net.IP, len(n.IP))
	copy(ip, n.IP)
	ip[len(ip)-1]++
	return ip, nil
}

// Command renders flags as kubeadm does: overrides replace base flags of the same name, and
// all flags are sorted by name ("--name=value").
func Command(base, overrides []Arg) []string {
	over := map[string]bool{}
	args := append([]Arg{}, overrides...)
	for _, a := range overrides {
		over[a.Name] = true
	}
	for _, a := range base {
		if !over[a.Name] {
			args = append(args, a)
		}
	}
	sort.SliceStable(args, func(i, j int) bool { return args[i].Name < args[j].Name })
	out := make([]string, 0, len(args))
	for _, a := range args {
		out = append(out, fmt.Sprintf("--%s=%s", a.Name, a.Value))
	}
	return out
}
