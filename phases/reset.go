package phases

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"

	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/workflow"
)

// ResetOptions configure kjoin reset.
type ResetOptions struct {
	// AllowEtcdQuorumLoss removes this node's etcd member even when that leaves etcd without
	// quorum (or without members), and lets its data go even when the member could not be
	// removed. (kubeadm's --force only skips the confirmation prompt; so does kjoin's.)
	AllowEtcdQuorumLoss bool
	// DeleteNode deletes the Node object with admin credentials (Kubeconfig).
	DeleteNode bool
	Kubeconfig string
	// DryRun changes nothing: every check runs (the etcd quorum check, the admin credentials
	// with a server-side dry-run delete), and each step is reported as planned.
	DryRun bool
}

// ResetReport says what reset did.
type ResetReport struct {
	Changed           bool
	Node              string
	Role              string
	EtcdMemberRemoved string
	NodeDeleted       bool
	KubeletStopped    bool
	KubeletDisabled   bool
	// ApproverStopped: kjoin-approver.service was running and was stopped.
	ApproverStopped bool
	RemovedFiles    []string
	// RemovedPods are the pod sandboxes removed through the CRI (namespace/name).
	RemovedPods []string
	// DryRun: nothing was changed; PlannedActions is what the reset would do, in order.
	DryRun         bool
	PlannedActions []string
	// Leave is what kjoin leave did besides the reset (nil for kjoin reset).
	Leave    *LeaveReport
	Phases   []PhaseResult
	Warnings []string
}

// ResetState is what the reset phases read and write.
type ResetState struct {
	Opts   ResetOptions
	Report *ResetReport
	// Journal is the node's join journal (empty when the node has none).
	Journal *Journal
	// Journaled reports that the node holds a join journal: then reset removes exactly the
	// files it lists, else (a node kubeadm joined) kubeadm's exact file list.
	Journaled bool
	// EtcdManifest is this node's etcd static pod manifest, read before anything is removed.
	EtcdManifest []byte
	// APIServerPort is the local kube-apiserver's --secure-port (6443 when unknown).
	APIServerPort int
	// EtcdDataMayGo is set once this node's etcd member is out of the cluster (or never was
	// in it), or with --allow-etcd-quorum-loss: only then is the etcd data wiped.
	EtcdDataMayGo bool
	// kubeletStopping: the kubelet was stopped (or, in a dry run, would be), so the Node is
	// marked not ready.
	kubeletStopping bool
	// holdsJoin: the node holds a join (a journal, or a kubelet kubeconfig kubeadm wrote).
	holdsJoin bool
	// leave is kjoin leave's part (nil for kjoin reset).
	leave *leaveState
	Record
}

// Change records one change reset makes to the cluster (host.EffectAPI) or through the
// container runtime (host.EffectRuntime) in the run's effects: made (the caller made it), or
// in a dry run planned, and said. "Changed" and a dry run's plan are views of that one log.
func (s *ResetState) Change(e *host.Env, phase string, kind host.EffectKind, format string, args ...any) {
	what := sprintf(format, args...)
	fx := e.Fx()
	if kind == host.EffectRuntime {
		fx.Runtime(what)
	} else {
		fx.API(what)
	}
	if fx.Planning() {
		e.Logf(phase, "would %s", what)
	}
}

// remove removes hostPath through the run's effects and reports whether it did; a dry run
// plans it instead (once: several phases reach the same static pod manifests) and says so.
func (s *ResetState) remove(e *host.Env, phase, hostPath string) (bool, error) {
	fx := e.Fx()
	if !fx.Planning() {
		return true, fx.Remove(hostPath)
	}
	for _, f := range s.log() {
		if f.Kind == host.EffectRemove && f.Path == hostPath {
			return false, nil
		}
	}
	e.Logf(phase, "would remove %s", hostPath)
	return false, fx.Remove(hostPath)
}

// plannedActions is a dry run's plan, in order: its effect log but for the requests its
// clients sent as server-side dry runs (the phase's own line says each of those changes).
func (s *ResetState) plannedActions() []string {
	out := []string{}
	for _, f := range s.log() {
		if f.Sent || (f.Kind == host.EffectRecord && f.Action != "remove") {
			continue
		}
		out = append(out, f.String())
	}
	return out
}

// ResetPhase is one step of the reset.
type ResetPhase = workflow.Phase[*ResetState]

// ResetWorkflow undoes a join, in this order: the Node (with --delete-node), the etcd member
// (refused when that would break quorum, unless forced), the static pods, kjoin's approver,
// the kubelet, the pods left in the container runtime, the Node's Ready condition, then the
// files the join wrote.
var ResetWorkflow = []ResetPhase{ResetDeleteNode, ResetEtcdMember, ResetStaticPods, ResetApprover, ResetKubelet, ResetContainers, ResetMarkNode, ResetFiles}

// Reset runs the reset workflow on this node (skipping the named phases) and reports what
// it did. It is idempotent: a second run changes nothing.
func Reset(ctx context.Context, e *host.Env, o ResetOptions, skip []string) (*ResetReport, error) {
	return runReset(ctx, e, o, skip, ResetWorkflow, nil)
}

// runReset runs a reset-like workflow (reset's or leave's); prepare, when given, completes
// the state before the phases run, with the run's environment (its clients go through the
// run's effects: server-side dry runs in a dry run).
func runReset(ctx context.Context, e *host.Env, o ResetOptions, skip []string, wf []ResetPhase, prepare func(*host.Env, *ResetState) error) (*ResetReport, error) {
	r := &ResetReport{Role: "worker", RemovedFiles: []string{}, RemovedPods: []string{}, PlannedActions: []string{}, Warnings: []string{}, DryRun: o.DryRun}
	j, err := LoadJournal(e)
	if err != nil {
		return r, journalError(err)
	}
	r.Node = j.Node
	if r.Node == "" {
		r.Node = host.NodeNameFromCert(e)
	}
	rs := &ResetState{Opts: o, Report: r, Journal: j, EtcdDataMayGo: o.AllowEtcdQuorumLoss, APIServerPort: 6443}
	rs.Journaled = e.Exists(JournalPath)
	rs.holdsJoin = rs.Journaled || e.Exists(host.KubeletKubeconfig) || e.Exists(host.BootstrapKubeconfig)
	etcdManifest := path.Join(host.ManifestsDir, "etcd.yaml")
	if !rs.Journaled || j.Adopted || j.Owns(etcdManifest) {
		// A journaled join that wrote no etcd manifest made no etcd member: not its to remove.
		rs.EtcdManifest, _ = e.ReadFile(etcdManifest)
	}
	if apiserver, err := e.ReadFile(path.Join(host.ManifestsDir, "kube-apiserver.yaml")); err == nil {
		r.Role = "control-plane"
		if p, err := parsePort(staticPodFlags(apiserver)["secure-port"]); err == nil {
			rs.APIServerPort = p
		}
	}
	if j.Role == "control-plane" {
		r.Role = "control-plane"
	}
	e = rs.effects(e, o.DryRun, nil)
	if prepare != nil {
		if err := prepare(e, rs); err != nil {
			return r, err
		}
	}
	results, err := workflow.Run(ctx, e, rs, wf, workflow.Options{Skip: skip}, workflow.Hooks[*ResetState]{
		Changes: func(s *ResetState) int { return s.changeCount() },
		Again:   "run the same command again to finish the reset",
		DryRun:  o.DryRun,
	})
	r.Phases, r.Changed = results, rs.Changed()
	if o.DryRun {
		r.PlannedActions = rs.plannedActions()
	}
	if r.Phases == nil {
		r.Phases = []PhaseResult{}
	}
	r.Warnings = append(r.Warnings, rs.Warnings...)
	return r, err
}

func parsePort(s string) (int, error) {
	var p int
	if _, err := fmt.Sscan(s, &p); err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("not a port: %q", s)
	}
	return p, nil
}

// confined cleans a host path and checks that reset may remove it: absolute, inside one of
// the allowed directories (not the directory itself) and reached without following a
// symlink in any parent.
func confined(e *host.Env, p string, allowed []string) (string, error) {
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
