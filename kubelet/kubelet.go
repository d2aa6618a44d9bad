// Package kubelet renders the kubelet's files the way kubeadm does (config.yaml from the
// cluster's kubelet-config ConfigMap, instance-config.yaml, kubeadm-flags.env), so kubeadm
// upgrade and reset keep working on a node joined by kjoin.
package kubelet

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/clusterconfig"
)

// Config renders /var/lib/kubelet/config.yaml: the cluster's KubeletConfiguration with the
// node's container runtime endpoint merged in (as kubeadm merges instance-config.yaml), the
// resolv.conf of systemd-resolved when that is active, and the operator's patches.
func Config(clusterConfig []byte, criSocket string, resolvedActive bool, patches [][]byte) ([]byte, error) {
	doc, err := yaml.YAMLToJSON(clusterConfig)
	if err != nil {
		return nil, fmt.Errorf("parse the cluster's KubeletConfiguration: %w", err)
	}
	for _, p := range patches {
		if doc, err = applyPatch(doc, p); err != nil {
			return nil, err
		}
	}
	var m map[string]any
	if err := yaml.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("parse the cluster's KubeletConfiguration: %w", err)
	}
	if m == nil || m["kind"] != "KubeletConfiguration" {
		return nil, fmt.Errorf("the cluster's kubelet-config is not a KubeletConfiguration (kind %v)", m["kind"])
	}
	if resolvedActive {
		if _, set := m["resolvConf"]; !set {
			m["resolvConf"] = "/run/systemd/resolve/resolv.conf"
		}
	}
	m["containerRuntimeEndpoint"] = criSocket
	return yaml.Marshal(m)
}

// InstanceConfig renders /var/lib/kubelet/instance-config.yaml, byte for byte as kubeadm.
func InstanceConfig(criSocket string) []byte {
	return fmt.Appendf(nil, "containerRuntimeEndpoint: %q\n", criSocket)
}

// FlagsEnv renders /var/lib/kubelet/kubeadm-flags.env: defaults with extra flags overriding
// or added, sorted by name, as kubeadm's ArgumentsToCommand.
func FlagsEnv(defaults, extra []clusterconfig.Arg) []byte {
	return fmt.Appendf(nil, "KUBELET_KUBEADM_ARGS=%q\n", strings.Join(clusterconfig.Command(defaults, extra), " "))
}

var patchSuffix = regexp.MustCompile(`^[^+.]*(\+(strategic|merge|json))?\.(yaml|yml|json)$`)

// Patches reads kubeadm-style patch files for target from dir ("<target>[suffix][+type].yaml"),
// sorted by name. Patch type "strategic" is applied as a merge patch (a KubeletConfiguration
// has no list merge keys that differ).
func Patches(dir, target string) ([][]byte, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read patches directory: %w", err)
	}
	var out [][]byte
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), target)
		m := patchSuffix.FindStringSubmatch(rest)
		if !ok || m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(b)
		if err != nil {
			return nil, fmt.Errorf("patch %s: %w", e.Name(), err)
		}
		if m[2] == "json" {
			j = append([]byte("json:"), j...)
		}
		out = append(out, j)
	}
	return out, nil
}

func applyPatch(doc, patch []byte) ([]byte, error) {
	if rest, ok := strings.CutPrefix(string(patch), "json:"); ok {
		p, err := jsonpatch.DecodePatch([]byte(rest))
		if err != nil {
			return nil, fmt.Errorf("decode JSON patch: %w", err)
		}
		return p.Apply(doc)
	}
	return jsonpatch.MergePatch(doc, patch)
}
