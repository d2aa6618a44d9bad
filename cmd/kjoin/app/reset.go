package app

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/phases"
	"kjoin.dev/kjoin/workflow"
)

// ResetOptions are the flags of kjoin reset.
type ResetOptions struct {
	phases.ResetOptions
	// Force skips the confirmation question (as kubeadm's -f/--force); nothing else.
	Force      bool
	SkipPhases []string
	g          *Globals
}

// NewCmdReset builds kjoin reset.
func NewCmdReset(deps *Deps, g *Globals) *cobra.Command {
	o := &ResetOptions{g: g}
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Undo a join on this node (kjoin's or kubeadm's): etcd member, static pods, kubelet, files",
		Long: `Undo what a join did on this node, as a workflow of phases (` + strings.Join(workflow.Names(phases.ResetWorkflow), ", ") + `).
A control plane first removes its own etcd member (refused, with the reason, when that would
cost etcd its quorum; --allow-etcd-quorum-loss overrides) and its static pods; then the kubelet
is stopped, the Node is marked not ready and the files the join wrote are removed: those in the
join journal, or kubeadm's exact file list on nodes kubeadm joined, never outside the join's
directories. Once the kubelet is stopped, the pods it left in the container runtime are removed
through the CRI (as kubeadm reset does); the runtime, its images and its data stay.
--delete-node also deletes the Node object with admin credentials. On a terminal it asks for
confirmation first, as kubeadm reset does; -f/--force skips the question (and only that).
--dry-run changes nothing and lists every step it would take, after the same checks (the etcd
quorum check, a server-side dry-run delete of the Node). Running it again does nothing.`,
		Example: `  kjoin reset                          # asks first on a terminal
  kjoin reset --dry-run                # what it would do, changing nothing
  kjoin reset -f -o json               # from automation
  kjoin reset --allow-etcd-quorum-loss # a control plane whose etcd peers are gone for good`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runReset(cmd.Context(), deps, o) },
	}
	f := cmd.Flags()
	f.BoolVarP(&o.Force, "force", "f", false, "do not ask for confirmation (as kubeadm reset -f)")
	f.BoolVar(&o.AllowEtcdQuorumLoss, "allow-etcd-quorum-loss", false, "remove this node's etcd member (and let its data go) even if etcd then loses quorum or its last member")
	f.BoolVar(&o.DryRun, "dry-run", false, "change nothing: run the checks and list every step the reset would take")
	f.BoolVar(&o.DeleteNode, "delete-node", false, "also delete the Node object (admin credentials)")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "admin kubeconfig for --delete-node (default /etc/kubernetes/admin.conf)")
	bindSkipPhases(cmd, &o.SkipPhases, "reset", workflow.Names(phases.ResetWorkflow))
	return cmd
}

func runReset(ctx context.Context, deps *Deps, o *ResetOptions) error {
	var bad operr.Problems
	checkSkipPhases(&bad, o.SkipPhases, workflow.Names(phases.ResetWorkflow))
	if err := bad.Err("kjoin reset"); err != nil {
		return err
	}
	env, err := undoEnv(deps, o.g, "reset", o.DryRun, o.Force,
		"This node leaves the cluster: its etcd member, static pods, kubelet and the files the join wrote are removed.")
	if err != nil {
		return err
	}
	rep, err := phases.Reset(ctx, env, o.ResetOptions, o.SkipPhases)
	if !o.g.Output.Text() {
		return printResult(deps, o.g, resetResultOf(rep, err), err)
	}
	if err != nil {
		return err
	}
	if rep.DryRun {
		return printResetPlan(deps, rep, "Resetting")
	}
	if !rep.Changed {
		_, err = fmt.Fprintln(deps.Out, "Nothing to reset: this node holds no join.")
		return err
	}
	_, err = fmt.Fprintf(deps.Out, "Node %q (%s) reset: %d files removed, %d pods removed from the container runtime.\n", rep.Node, rep.Role, len(rep.RemovedFiles), len(rep.RemovedPods))
	return err
}

// printResetPlan prints a dry run's plan; doing is "Resetting" or "Leaving".
func printResetPlan(deps *Deps, rep *phases.ResetReport, doing string) error {
	if len(rep.PlannedActions) == 0 {
		_, err := fmt.Fprintln(deps.Out, "Dry run: nothing to reset: this node holds no join.")
		return err
	}
	var b strings.Builder
	node := "this node"
	if rep.Node != "" {
		node = fmt.Sprintf("node %q", rep.Node)
	}
	fmt.Fprintf(&b, "Dry run: nothing was changed. %s %s (%s) would:\n", doing, node, rep.Role)
	for _, a := range rep.PlannedActions {
		fmt.Fprintf(&b, "  - %s\n", a)
	}
	_, err := fmt.Fprint(deps.Out, b.String())
	return err
}

// undoEnv is the host environment of reset and leave: root checked, the operator asked on a
// terminal (as kubeadm reset does) unless --force or a dry run, progress off for machine output.
// checkSkipPhases adds a problem for each --skip-phases name that is not one of known.
func checkSkipPhases(bad *operr.Problems, skip, known []string) {
	for _, n := range skip {
		if !slices.Contains(known, n) {
			bad.Bad("--skip-phases", n, "one of "+strings.Join(known, ", "))
		}
	}
}

func undoEnv(deps *Deps, g *Globals, command string, dryRun, force bool, what string) (*host.Env, error) {
	env := deps.NewEnv(g.Root, g.Verbosity)
	if err := phases.RequireRoot(env, "kjoin "+command); err != nil {
		return nil, err
	}
	if !dryRun && !force && deps.InIsTerminal != nil && deps.InIsTerminal() {
		fmt.Fprintf(deps.Err, "[%s] %s\n[%s] Are you sure you want to proceed? [y/N]: ", command, what, command)
		answer, _ := bufio.NewReader(deps.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return nil, operr.New(operr.Other, command+" aborted: not confirmed", "answer y, or pass -f/--force to skip the question")
		}
	}
	if !g.Output.Text() && g.Verbosity == 0 {
		env.Out = nil
	}
	return env, nil
}
