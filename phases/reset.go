package phases

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// ResetOptions configure kjoin reset.
type ResetOptions struct {
	// Force removes the etcd member even when that leaves etcd without quorum.
	Force bool
	// DeleteNode deletes the Node object with admin credentials (Kubeconfig).
	DeleteNode bool
	Kubeconfig string
}

// ResetReport says what reset did.
type ResetReport struct {
	Changed           bool          `json:"changed"`
	Node              string        `json:"node,omitempty"`
	Role              string        `json:"role"`
	EtcdMemberRemoved string        `json:"etcdMemberRemoved,omitempty"`
	NodeDeleted       bool          `json:"nodeDeleted"`
	KubeletStopped    bool          `json:"kubeletStopped"`
	RemovedFiles      []string      `json:"removedFiles"`
	Phases            []PhaseResult `json:"phases"`
	Warnings          []string      `json:"warnings"`
}

// ResetState is what the reset phases read and write, beside the shared State fields
// (Journal, Warnings, Changed).
type ResetState struct {
	Opts   ResetOptions
	Report *ResetReport
	// EtcdManifest is this node's etcd static pod manifest, read before anything is removed.
	EtcdManifest []byte
	// APIServerPort is the local kube-apiserver's --secure-port (6443 when unknown).
	APIServerPort int
	// EtcdDataMayGo is set once this node's etcd member is out of the cluster (or never was
	// in it), or with --force: only then is the etcd data wiped.
	EtcdDataMayGo bool
}

// ResetWorkflow undoes a join, in this order: the Node (with --delete-node), the etcd member
// (refused when that would break quorum, unless forced), the static pods, the kubelet, the
// Node's Ready condition, then the files the join wrote.
var ResetWorkflow = []Phase{ResetDeleteNode, ResetEtcdMember, ResetStaticPods, ResetKubelet, ResetMarkNode, ResetFiles}

// Reset runs the reset workflow on this node (skipping the named phases) and reports what
// it did. It is idempotent: a second run changes nothing.
func Reset(ctx context.Context, e *Env, o ResetOptions, skip []string) (*ResetReport, error) {
	r := &ResetReport{Role: "worker", RemovedFiles: []string{}, Warnings: []string{}}
	if err := checkJournalFile(e); err != nil {
		return r, err
	}
	j, err := LoadJournal(e)
	if err != nil {
		return r, operr.Wrap(operr.Other, err, "cannot read the join journal", "")
	}
	r.Node = j.Node
	if r.Node == "" {
		r.Node = NodeNameFromCert(e)
	}
	rs := &ResetState{Opts: o, Report: r, EtcdDataMayGo: o.Force, APIServerPort: 6443}
	rs.EtcdManifest, _ = e.ReadFile(path.Join(ManifestsDir, "etcd.yaml"))
	if apiserver, err := e.ReadFile(path.Join(ManifestsDir, "kube-apiserver.yaml")); err == nil {
		r.Role = "control-plane"
		if p, err := parsePort(staticPodFlags(apiserver)["secure-port"]); err == nil {
			rs.APIServerPort = p
		}
	}
	if j.Role == "control-plane" {
		r.Role = "control-plane"
	}
	s := &State{Journal: j, Reset: rs}
	results, err := Run(ctx, e, s, ResetWorkflow, RunOptions{Skip: skip, KeepJournal: true})
	r.Phases, r.Changed = results, s.Changed()
	if r.Phases == nil {
		r.Phases = []PhaseResult{}
	}
	r.Warnings = append(r.Warnings, s.Warnings...)
	return r, err
}

func parsePort(s string) (int, error) {
	var p int
	if _, err := fmt.Sscan(s, &p); err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("not a port: %q", s)
	}
	return p, nil
}

// checkJournalFile refuses a journal that someone other than root (this process's user)
// could have written: reset deletes what it lists.
func checkJournalFile(e *Env) error {
	st, err := os.Lstat(e.Paths.Of(JournalPath))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return operr.Wrap(operr.Other, err, "cannot inspect the join journal "+JournalPath, "")
	}
	hint := "check who changed it; if it is the join's own record, restore it with chown root:root " + JournalPath + " && chmod 600 " + JournalPath + " (or remove it: reset then uses kubeadm's file list)"
	if !st.Mode().IsRegular() {
		return operr.Newf(operr.Preflight, "the join journal %s is not a regular file (%s); reset will not act on it", JournalPath, st.Mode().Type()).
			WithHint(hint)
	}
	if st.Mode().Perm() != 0o600 {
		return operr.Newf(operr.Preflight, "the join journal %s has mode %04o, not 0600; reset will not delete what it lists", JournalPath, st.Mode().Perm()).
			WithHint(hint)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return operr.Newf(operr.Preflight, "the join journal %s is owned by uid %d, not root; reset will not delete what it lists", JournalPath, sys.Uid).
			WithHint(hint)
	}
	return nil
}

// confined cleans a host path and checks that reset may remove it: absolute, inside one of
// the allowed directories (not the directory itself) and reached without following a
// symlink in any parent.
func confined(e *Env, p string, allowed []string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("not an absolute path")
	}
	clean := path.Clean(p)
	inside := false
	for _, dir := range allowed {
		if strings.HasPrefix(clean, strings.TrimSuffix(dir, "/")+"/") {
			inside = true
			break
		}
	}
	if !inside {
		return "", fmt.Errorf("outside %s", strings.Join(allowed, ", "))
	}
	for parent := path.Dir(clean); parent != "/"; parent = path.Dir(parent) {
		st, err := os.Lstat(e.Paths.Of(parent))
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("its parent %s is a symlink", parent)
		}
	}
	return clean, nil
}

// NodeNameFromCert is the node name in the kubelet's current client certificate ("" if none).
func NodeNameFromCert(e *Env) string {
	b, err := e.ReadFile(KubeletClientCurrent)
	if err != nil {
		return ""
	}
	c, err := pki.ParseCert(b)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(c.Subject.CommonName, "system:node:")
}

// staticPodFlags reads the command flags of a static pod manifest.
func staticPodFlags(manifest []byte) map[string]string {
	var pod struct {
		Spec struct {
			Containers []struct {
				Command []string `json:"command"`
			} `json:"containers"`
		} `json:"spec"`
	}
	flags := map[string]string{}
	if yaml.Unmarshal(manifest, &pod) != nil || len(pod.Spec.Containers) == 0 {
		return flags
	}
	for _, a := range pod.Spec.Containers[0].Command {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			flags[k] = v
		}
	}
	return flags
}

func etcdDataDir(manifest []byte) string { return staticPodFlags(manifest)["data-dir"] }
