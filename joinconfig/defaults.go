package joinconfig

import (
	"encoding/json"
	"time"

	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/phases"
)

// MarshalJSON writes a Go duration string, as metav1.Duration does.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// Defaults is kubeadm's JoinConfiguration with its defaults (kubeadm config print
// join-defaults): a placeholder token and endpoint, this node's name.
func Defaults(nodeName string) *JoinConfiguration {
	d := func(t time.Duration) *Duration { return &Duration{t} }
	serial := true
	var noTaints []phases.Taint // kubeadm prints "taints: null"
	return &JoinConfiguration{
		APIVersion: "kubeadm.k8s.io/v1beta4", Kind: "JoinConfiguration",
		CACertPath: "/etc/kubernetes/pki/ca.crt",
		Discovery: Discovery{
			BootstrapToken:    &bootstrapTokenDiscovery{APIServerEndpoint: "kube-apiserver:6443", Token: "abcdef.0123456789abcdef", UnsafeSkipCAVerification: true},
			TLSBootstrapToken: "abcdef.0123456789abcdef",
		},
		NodeRegistration: NodeRegistration{Name: nodeName, CRISocket: "unix:///var/run/containerd/containerd.sock",
			ImagePullPolicy: "IfNotPresent", ImagePullSerial: &serial, Taints: &noTaints},
		Timeouts: &Timeouts{
			ControlPlaneComponentHealthCheck: d(4 * time.Minute), Discovery: d(5 * time.Minute), EtcdAPICall: d(2 * time.Minute),
			KubeletHealthCheck: d(4 * time.Minute), KubernetesAPICall: d(time.Minute), TLSBootstrap: d(5 * time.Minute),
			UpgradeManifests: d(5 * time.Minute),
		},
	}
}

// YAML is the configuration as kubeadm prints it (keys sorted).
func (c *JoinConfiguration) YAML() ([]byte, error) { return yaml.Marshal(c) }
