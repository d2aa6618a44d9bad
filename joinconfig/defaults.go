package joinconfig

import (
	"encoding/json"
	"time"

	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/joinrequest"
)

// MarshalJSON writes a Go duration string, as metav1.Duration does.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// PinPlaceholder stands where the printed defaults need the cluster CA's pin. kubeadm's
// defaults skip CA verification instead (unsafeSkipCAVerification: true); kjoin's never do: a
// file used as printed is refused, naming this value, until the pin is filled in.
const PinPlaceholder = "sha256:<the-cluster-CA-pin>"

// Defaults is kubeadm's JoinConfiguration with its defaults (kubeadm config print
// join-defaults): a placeholder token and endpoint, this node's name; where kubeadm's turn CA
// verification off, a placeholder for the pin (PinPlaceholder).
func Defaults(nodeName string) *JoinConfiguration {
	d := func(t time.Duration) *Duration { return &Duration{t} }
	serial := true
	var noTaints []joinrequest.Taint // kubeadm prints "taints: null"
	return &JoinConfiguration{
		APIVersion: "kubeadm.k8s.io/v1beta4", Kind: "JoinConfiguration",
		CACertPath: "/etc/kubernetes/pki/ca.crt",
		Discovery: Discovery{
			BootstrapToken:    &bootstrapTokenDiscovery{APIServerEndpoint: "kube-apiserver:6443", Token: "abcdef.0123456789abcdef", CACertHashes: []string{PinPlaceholder}},
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
