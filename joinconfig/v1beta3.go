package joinconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	sigsjson "sigs.k8s.io/json"

	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/joinrequest"
)

// APIVersionV1beta3 is the older JoinConfiguration version kubeadm v1.35 and v1.36 still read
// (v1.37's no longer does): kjoin reads it too, with a deprecation warning, converted as
// kubeadm converts it.
const APIVersionV1beta3 = "kubeadm.k8s.io/v1beta3"

// joinConfigurationV1beta3 is kubeadm's v1beta3 JoinConfiguration, every field (strict).
type joinConfigurationV1beta3 struct {
	APIVersion       string `json:"apiVersion"`
	Kind             string `json:"kind"`
	CACertPath       string `json:"caCertPath,omitempty"`
	NodeRegistration struct {
		Name                  string            `json:"name,omitempty"`
		CRISocket             string            `json:"criSocket,omitempty"`
		Taints                *[]taintV1beta3   `json:"taints,omitempty"`
		KubeletExtraArgs      map[string]string `json:"kubeletExtraArgs,omitempty"`
		IgnorePreflightErrors []string          `json:"ignorePreflightErrors,omitempty"`
		ImagePullPolicy       string            `json:"imagePullPolicy,omitempty"`
	} `json:"nodeRegistration,omitempty"`
	Discovery struct {
		BootstrapToken    *bootstrapTokenDiscovery `json:"bootstrapToken,omitempty"`
		File              *fileDiscovery           `json:"file,omitempty"`
		TLSBootstrapToken string                   `json:"tlsBootstrapToken,omitempty"`
		Timeout           *Duration                `json:"timeout,omitempty"`
	} `json:"discovery"`
	ControlPlane *ControlPlane `json:"controlPlane,omitempty"`
	SkipPhases   []string      `json:"skipPhases,omitempty"`
	Patches      *struct {
		Directory string `json:"directory,omitempty"`
	} `json:"patches,omitempty"`
}

type taintV1beta3 struct {
	Key       string `json:"key"`
	Value     string `json:"value,omitempty"`
	Effect    string `json:"effect"`
	TimeAdded string `json:"timeAdded,omitempty"`
}

// decodeV1beta3 reads a v1beta3 JoinConfiguration and converts it to v1beta4 as kubeadm's
// conversion does: kubeletExtraArgs (a map) become name/value pairs sorted by name, and
// discovery.timeout becomes timeouts.discovery.
func decodeV1beta3(j []byte) (*JoinConfiguration, error) {
	in := &joinConfigurationV1beta3{}
	strict, err := sigsjson.UnmarshalStrict(j, in)
	if err != nil {
		return nil, fmt.Errorf("JoinConfiguration %s: %w", APIVersionV1beta3, err)
	}
	if len(strict) > 0 {
		var msgs []string
		for _, e := range strict {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("JoinConfiguration %s: %s", APIVersionV1beta3, strings.Join(msgs, "; "))
	}
	out := &JoinConfiguration{APIVersion: APIVersion, Kind: "JoinConfiguration", CACertPath: in.CACertPath,
		ControlPlane: in.ControlPlane, SkipPhases: in.SkipPhases, Patches: in.Patches}
	nr := in.NodeRegistration
	out.NodeRegistration = NodeRegistration{Name: nr.Name, CRISocket: nr.CRISocket, IgnorePreflightErrors: nr.IgnorePreflightErrors, ImagePullPolicy: nr.ImagePullPolicy}
	if nr.Taints != nil {
		taints := []joinrequest.Taint{}
		for _, t := range *nr.Taints {
			taints = append(taints, joinrequest.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
		out.NodeRegistration.Taints = &taints
	}
	for _, name := range slices.Sorted(maps.Keys(nr.KubeletExtraArgs)) {
		out.NodeRegistration.KubeletExtraArgs = append(out.NodeRegistration.KubeletExtraArgs, clusterconfig.Arg{Name: name, Value: nr.KubeletExtraArgs[name]})
	}
	out.Discovery = Discovery{BootstrapToken: in.Discovery.BootstrapToken, File: in.Discovery.File, TLSBootstrapToken: in.Discovery.TLSBootstrapToken}
	if in.Discovery.Timeout != nil {
		out.Timeouts = &Timeouts{Discovery: in.Discovery.Timeout}
	}
	return out, nil
}
