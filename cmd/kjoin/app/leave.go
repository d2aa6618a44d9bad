package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/phases"
	"kjoin.dev/kjoin/workflow"
)

// LeaveOptions are the flags of kjoin leave.
type LeaveOptions struct {
	phases.ResetOptions
	Leave phases.LeaveOptions
	// Force skips the confirmation question (as kjoin reset -f); nothing else.
	Force      bool
	SkipPhases []string
	g          *Globals
}

// NewCmdLeave builds kjoin leave.
func NewCmdLeave(deps *Deps, g *Globals) *cobra.Command {
	o := &LeaveOptions{g: g}
	cmd := &cobra.Command{
		Use:   "leave",
		Short: "Take this node out of the cluster gracefully: cordon, drain, delete its Node, then reset",
		Long: `Take this node out of the cluster the graceful way, as a workflow of phases (` + strings.Join(workflow.Names(phases.LeaveWorkflow), ", ") + `).
The Node is cordoned and drained through the eviction API (PodDisruptionBudgets respected;
kubectl drain's options), a control plane's etcd member is removed under reset's quorum check
and its static pods stopped, the kubelet is stopped and its pods removed, then the Node, its
Lease and its certificate signing requests are deleted and the files the join wrote removed
(as kjoin reset). It uses --kubeconfig, else /etc/kubernetes/admin.conf, else the node's own
kubelet.conf (which may cordon but not drain: --skip-phases drain then leaves without moving
pods); what those credentials may not delete is reported with the command that does.
--dry-run changes nothing and lists every step; a run after an interruption continues.`,
		Example: `  kjoin leave                                        # asks first on a terminal
  kjoin leave --dry-run                              # every step, nothing changed
  kjoin leave -f --kubeconfig admin.conf -o json     # from automation, with admin credentials
  kjoin leave -f --delete-emptydir-data --drain-timeout 10m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runLeave(cmd.Context(), deps, o) },
	}
	f := cmd.Flags()
	f.BoolVarP(&o.Force, "force", "f", false, "do not ask for confirmation")
	f.BoolVar(&o.DryRun, "dry-run", false, "change nothing: run the checks and list every step leave would take")
	f.BoolVar(&o.AllowEtcdQuorumLoss, "allow-etcd-quorum-loss", false, "remove this node's etcd member (and let its data go) even if etcd then loses quorum or its last member")
	f.StringVar(&o.Leave.Kubeconfig, "kubeconfig", "", "credentials that may drain and delete nodes (default /etc/kubernetes/admin.conf, else the node's kubelet.conf)")
	f.DurationVar(&o.Leave.DrainTimeout, "drain-timeout", 5*time.Minute, "how long the drain may take (0: no limit, as kubectl drain)")
	f.IntVar(&o.Leave.GracePeriod, "grace-period", -1, "seconds each pod gets to terminate (-1: the pod's own), as kubectl drain")
	f.BoolVar(&o.Leave.IgnoreDaemonSets, "ignore-daemonsets", true, "leave DaemonSet pods alone (they stop with the kubelet), as kubectl drain")
	f.BoolVar(&o.Leave.DeleteEmptyDirData, "delete-emptydir-data", false, "also evict pods with emptyDir data (it is lost), as kubectl drain")
	f.BoolVar(&o.Leave.Force, "drain-force", false, "also delete pods no controller manages (they are not recreated), as kubectl drain --force")
	f.BoolVar(&o.Leave.DisableEviction, "disable-eviction", false, "delete pods instead of evicting them (PodDisruptionBudgets are not respected), as kubectl drain")
	bindSkipPhases(cmd, &o.SkipPhases, "leave", workflow.Names(phases.LeaveWorkflow))
	return cmd
}

func runLeave(ctx context.Context, deps *Deps, o *LeaveOptions) error {
	var bad operr.Problems
	if o.Leave.DrainTimeout < 0 {
		bad.Bad("--drain-timeout", o.Leave.DrainTimeout.String(), "a duration of zero (no limit) or more")
	}
	if o.Leave.GracePeriod < -1 {
		bad.Bad("--grace-period", fmt.Sprint(o.Leave.GracePeriod), "seconds, zero or more, or -1 (the pod's own)")
	}
	checkSkipPhases(&bad, o.SkipPhases, workflow.Names(phases.LeaveWorkflow))
	if err := bad.Err("kjoin leave"); err != nil {
		return err
	}
	env, err := undoEnv(deps, o.g, "leave", o.DryRun, o.Force,
		"This node leaves the cluster: it is drained, its Node deleted, and its etcd member, static pods, kubelet and join files removed.")
	if err != nil {
		return err
	}
	rep, err := phases.Leave(ctx, env, o.ResetOptions, o.Leave, o.SkipPhases)
	if !o.g.Output.Text() {
		return printResult(deps, o.g, leaveResultOf(rep, err), err)
	}
	if err != nil {
		return err
	}
	if rep.DryRun {
		return printResetPlan(deps, rep, "Leaving")
	}
	if !rep.Changed {
		_, err = fmt.Fprintln(deps.Out, "Nothing to do: this node holds no join and its Node is not in the cluster.")
		return err
	}
	l := rep.Leave
	var b strings.Builder
	fmt.Fprintf(&b, "Node %q (%s) left the cluster: %d pods evicted, Node deleted: %v, %d files removed.\n", rep.Node, rep.Role, len(l.EvictedPods), rep.NodeDeleted, len(rep.RemovedFiles))
	for _, left := range l.Left {
		fmt.Fprintf(&b, "Left in the cluster: %s\n", left)
	}
	_, err = fmt.Fprint(deps.Out, b.String())
	return err
}
