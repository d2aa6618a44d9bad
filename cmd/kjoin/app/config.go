package app

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/phases"
)

// joinConfiguration is kubeadm's JoinConfiguration (kubeadm.k8s.io/v1beta4), the fields kjoin reads.
type joinConfiguration struct {
	APIVersion       string `json:"apiVersion"`
	Kind             string `json:"kind"`
	DryRun           bool   `json:"dryRun"`
	CACertPath       string `json:"caCertPath"`
	NodeRegistration struct {
		Name                  string              `json:"name"`
		CRISocket             string              `json:"criSocket"`
		Taints                *[]phases.Taint     `json:"taints"`
		KubeletExtraArgs      []clusterconfig.Arg `json:"kubeletExtraArgs"`
		IgnorePreflightErrors []string            `json:"ignorePreflightErrors"`
	} `json:"nodeRegistration"`
	Discovery struct {
		BootstrapToken *struct {
			Token                    string   `json:"token"`
			APIServerEndpoint        string   `json:"apiServerEndpoint"`
			CACertHashes             []string `json:"caCertHashes"`
			UnsafeSkipCAVerification bool     `json:"unsafeSkipCAVerification"`
		} `json:"bootstrapToken"`
		File *struct {
			KubeConfigPath string `json:"kubeConfigPath"`
		} `json:"file"`
		TLSBootstrapToken string `json:"tlsBootstrapToken"`
	} `json:"discovery"`
	ControlPlane *struct {
		LocalAPIEndpoint struct {
			AdvertiseAddress string `json:"advertiseAddress"`
			BindPort         int    `json:"bindPort"`
		} `json:"localAPIEndpoint"`
		CertificateKey string `json:"certificateKey"`
	} `json:"controlPlane"`
	SkipPhases []string `json:"skipPhases"`
	Patches    *struct {
		Directory string `json:"directory"`
	} `json:"patches"`
	Timeouts *struct {
		ControlPlaneComponentHealthCheck *duration `json:"controlPlaneComponentHealthCheck"`
		KubeletHealthCheck               *duration `json:"kubeletHealthCheck"`
		KubernetesAPICall                *duration `json:"kubernetesAPICall"`
		EtcdAPICall                      *duration `json:"etcdAPICall"`
		TLSBootstrap                     *duration `json:"tlsBootstrap"`
		Discovery                        *duration `json:"discovery"`
	} `json:"timeouts"`
}

type duration struct{ time.Duration }

func (d *duration) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// loadJoinConfiguration reads the JoinConfiguration document of a kubeadm config file.
// Other documents are ignored with a warning, as kubeadm does.
func loadJoinConfiguration(path string, warn func(string)) (*joinConfiguration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLReader(bufioReader(b))
	var found *joinConfiguration
	for {
		doc, err := dec.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var head struct{ APIVersion, Kind string }
		if err := sigsyaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		if head.Kind != "JoinConfiguration" {
			warn(fmt.Sprintf("ignoring %s %s in %s", head.APIVersion, head.Kind, path))
			continue
		}
		if head.APIVersion != "kubeadm.k8s.io/v1beta4" {
			return nil, fmt.Errorf("%s: JoinConfiguration %s is not supported; use kubeadm.k8s.io/v1beta4 (kubeadm config migrate converts older files)", path, head.APIVersion)
		}
		jc := &joinConfiguration{}
		if err := sigsyaml.Unmarshal(doc, jc); err != nil {
			return nil, fmt.Errorf("parse JoinConfiguration in %s: %w", path, err)
		}
		found = jc
	}
	if found == nil {
		return nil, fmt.Errorf("%s has no JoinConfiguration document", path)
	}
	return found, nil
}
