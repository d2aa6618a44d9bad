package joinconfig

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/yamldocs"
)

// APIVersion is the JoinConfiguration version kjoin reads.
const APIVersion = "kubeadm.k8s.io/v1beta4"

// JoinConfiguration is kubeadm's JoinConfiguration (kubeadm.k8s.io/v1beta4), every field, so
// that decoding can be strict: an unknown (misspelled) field is an error naming it.
type JoinConfiguration struct {
	APIVersion       string           `json:"apiVersion"`
	Kind             string           `json:"kind"`
	DryRun           bool             `json:"dryRun,omitempty"`
	CACertPath       string           `json:"caCertPath,omitempty"`
	NodeRegistration NodeRegistration `json:"nodeRegistration,omitempty"`
	Discovery        Discovery        `json:"discovery,omitempty"`
	ControlPlane     *ControlPlane    `json:"controlPlane,omitempty"`
	SkipPhases       []string         `json:"skipPhases,omitempty"`
	Patches          *struct {
		Directory string `json:"directory,omitempty"`
	} `json:"patches,omitempty"`
	Timeouts *Timeouts `json:"timeouts,omitempty"`
}

// NodeRegistration is JoinConfiguration.nodeRegistration.
type NodeRegistration struct {
	Name                  string               `json:"name,omitempty"`
	CRISocket             string               `json:"criSocket,omitempty"`
	Taints                *[]joinrequest.Taint `json:"taints,omitempty"`
	KubeletExtraArgs      []clusterconfig.Arg  `json:"kubeletExtraArgs,omitempty"`
	IgnorePreflightErrors []string             `json:"ignorePreflightErrors,omitempty"`
	ImagePullPolicy       string               `json:"imagePullPolicy,omitempty"`
	ImagePullSerial       *bool                `json:"imagePullSerial,omitempty"`
}

// Discovery is JoinConfiguration.discovery.
type Discovery struct {
	BootstrapToken    *bootstrapTokenDiscovery `json:"bootstrapToken,omitempty"`
	File              *fileDiscovery           `json:"file,omitempty"`
	TLSBootstrapToken string                   `json:"tlsBootstrapToken,omitempty"`
}

type bootstrapTokenDiscovery struct {
	Token                    string   `json:"token,omitempty"`
	APIServerEndpoint        string   `json:"apiServerEndpoint,omitempty"`
	CACertHashes             []string `json:"caCertHashes,omitempty"`
	UnsafeSkipCAVerification bool     `json:"unsafeSkipCAVerification,omitempty"`
}

type fileDiscovery struct {
	KubeConfigPath string `json:"kubeConfigPath,omitempty"`
}

// ControlPlane is JoinConfiguration.controlPlane.
type ControlPlane struct {
	LocalAPIEndpoint struct {
		AdvertiseAddress string `json:"advertiseAddress,omitempty"`
		BindPort         int    `json:"bindPort,omitempty"`
	} `json:"localAPIEndpoint,omitempty"`
	CertificateKey string `json:"certificateKey,omitempty"`
}

// Timeouts is JoinConfiguration.timeouts.
type Timeouts struct {
	ControlPlaneComponentHealthCheck *Duration `json:"controlPlaneComponentHealthCheck,omitempty"`
	KubeletHealthCheck               *Duration `json:"kubeletHealthCheck,omitempty"`
	KubernetesAPICall                *Duration `json:"kubernetesAPICall,omitempty"`
	EtcdAPICall                      *Duration `json:"etcdAPICall,omitempty"`
	TLSBootstrap                     *Duration `json:"tlsBootstrap,omitempty"`
	Discovery                        *Duration `json:"discovery,omitempty"`
	UpgradeManifests                 *Duration `json:"upgradeManifests,omitempty"`
}

// Duration is a metav1.Duration-style string ("5m0s").
type Duration struct{ time.Duration }

// UnmarshalJSON parses a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// Decode reads the JoinConfiguration document of a kubeadm config file. Other documents are
// skipped with a warning, as kubeadm does; unknown fields in the JoinConfiguration are errors,
// all named at once.
func Decode(data []byte, warn func(string)) (*JoinConfiguration, error) {
	docs, err := yamldocs.Split(data)
	if err != nil {
		return nil, err
	}
	var found *JoinConfiguration
	for _, doc := range docs {
		var head struct{ APIVersion, Kind string }
		if err := sigsyaml.Unmarshal(doc, &head); err != nil {
			return nil, err
		}
		if head.Kind != "JoinConfiguration" {
			warn(fmt.Sprintf("ignoring %s %s in the config file", head.APIVersion, head.Kind))
			continue
		}
		if head.APIVersion != APIVersion && head.APIVersion != APIVersionV1beta3 {
			return nil, fmt.Errorf("JoinConfiguration %s is not supported; use %s (kubeadm config migrate converts older files)", head.APIVersion, APIVersion)
		}
		if found != nil {
			return nil, errors.New("more than one JoinConfiguration document")
		}
		j, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if head.APIVersion == APIVersionV1beta3 {
			warn(fmt.Sprintf("the config file uses the deprecated JoinConfiguration %s (kubeadm v1.37 no longer reads it); kubeadm config migrate --old-config FILE --new-config NEW writes %s", APIVersionV1beta3, APIVersion))
			if found, err = decodeV1beta3(j); err != nil {
				return nil, err
			}
			continue
		}
		jc := &JoinConfiguration{}
		strict, err := sigsjson.UnmarshalStrict(j, jc)
		if err != nil {
			return nil, fmt.Errorf("JoinConfiguration: %w", err)
		}
		if len(strict) > 0 {
			var msgs []string
			for _, e := range strict {
				msgs = append(msgs, e.Error())
			}
			return nil, fmt.Errorf("JoinConfiguration: %s", strings.Join(msgs, "; "))
		}
		found = jc
	}
	if found == nil {
		return nil, errors.New("no JoinConfiguration document")
	}
	return found, nil
}
