// Package patches reads and applies kubeadm-style patch files (--patches,
// JoinConfiguration patches.directory): "<target>[suffix][+strategic|merge|json].<yaml|yml|json>",
// applied in file-name order. It owns the file-name rules and the patch types; it knows
// nothing of where the patched documents go.
package patches

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/yamldocs"
)

// Targets a join applies patches to: the control-plane static pods and the kubelet's
// configuration. kubeadm's "corednsdeployment" target belongs to init and upgrade.
var Targets = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubeletconfiguration"}

// StaticPodTargets are the targets that patch static pod manifests.
var StaticPodTargets = Targets[:4]

// initOnlyTargets are kubeadm targets a join has no use for (reported, not applied).
var initOnlyTargets = []string{"corednsdeployment"}

// Patch types.
const (
	Strategic = "strategic"
	Merge     = "merge"
	JSON      = "json"
)

// File is one patch file, its documents converted to JSON.
type File struct {
	Name   string
	Target string
	Type   string
	Docs   [][]byte
}

// ParseName splits a patch file name into its target and patch type (strategic by default).
func ParseName(name string) (target, patchType string, err error) {
	ext := filepath.Ext(name)
	switch ext {
	case ".yaml", ".yml", ".json":
	default:
		return "", "", fmt.Errorf("extension %q is not .yaml, .yml or .json", ext)
	}
	stem := strings.TrimSuffix(name, ext)
	patchType = Strategic
	if i := strings.LastIndex(stem, "+"); i >= 0 {
		patchType = stem[i+1:]
		stem = stem[:i]
		if patchType != Strategic && patchType != Merge && patchType != JSON {
			return "", "", fmt.Errorf("patch type %q is not strategic, merge or json", patchType)
		}
	}
	if strings.ContainsAny(stem, "+") {
		return "", "", errors.New("more than one '+'")
	}
	// The longest known target that prefixes the stem (kube-apiserver before a shorter one).
	all := append(slices.Clone(Targets), initOnlyTargets...)
	sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	for _, t := range all {
		if strings.HasPrefix(stem, t) {
			return t, patchType, nil
		}
	}
	return "", "", fmt.Errorf("no known target: names start with one of %s", strings.Join(Targets, ", "))
}

// Set is the patch files of a directory.
type Set struct {
	Files []File
	// Ignored names files for kubeadm targets a join does not use.
	Ignored []string
}

// Load reads every file of dir. A file whose name is not a patch file, or whose content does
// not parse, is an error naming it: nothing is dropped silently. An empty dir gives an empty set.
func Load(dir string) (*Set, error) {
	s := &Set{}
	if dir == "" {
		return s, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read patches directory: %w", err)
	}
	var bad []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		target, typ, err := ParseName(e.Name())
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", e.Name(), err))
			continue
		}
		if slices.Contains(initOnlyTargets, target) {
			s.Ignored = append(s.Ignored, e.Name())
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		docs, err := splitDocs(b)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", e.Name(), err))
			continue
		}
		s.Files = append(s.Files, File{Name: e.Name(), Target: target, Type: typ, Docs: docs})
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("unusable patch files in %s: %s", dir, strings.Join(bad, "; "))
	}
	return s, nil
}

func splitDocs(b []byte) ([][]byte, error) {
	docs, err := yamldocs.Split(b)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, doc := range docs {
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	if len(out) == 0 {
		return nil, errors.New("holds no patch")
	}
	return out, nil
}

// For returns the files of one target, in file-name order.
func (s *Set) For(target string) []File {
	var out []File
	for _, f := range s.Files {
		if f.Target == target {
			out = append(out, f)
		}
	}
	return out
}

// Apply applies the target's patches to a YAML or JSON document and returns YAML. Strategic
// patches of static pods use the Pod's merge keys (containers by name, ...); a
// KubeletConfiguration has none that differ, so there strategic means merge. With no patch
// for the target, the document is returned unchanged, byte for byte.
func (s *Set) Apply(target string, doc []byte) ([]byte, error) {
	files := s.For(target)
	if len(files) == 0 {
		return doc, nil
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("parse %s document: %w", target, err)
	}
	for _, f := range files {
		for _, p := range f.Docs {
			if j, err = apply(target, f.Type, j, p); err != nil {
				return nil, fmt.Errorf("apply patch %s to %s: %w", f.Name, target, err)
			}
		}
	}
	return yaml.JSONToYAML(j)
}

func apply(target, typ string, doc, patch []byte) ([]byte, error) {
	switch {
	case typ == JSON:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, err
		}
		return p.Apply(doc)
	case typ == Strategic && slices.Contains(StaticPodTargets, target):
		return strategicpatch.StrategicMergePatch(doc, patch, corev1.Pod{})
	default:
		return jsonpatch.MergePatch(doc, patch)
	}
}
