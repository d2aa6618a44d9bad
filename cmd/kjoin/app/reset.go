package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/phases"
)

// ResetOptions are the flags of kjoin reset.
type ResetOptions struct {
	phases.ResetOptions
	SkipPhases []string
	Output     string
	Root       string
	Verbosity  int
}

// NewCmdReset builds kjoin reset.
func NewCmdReset(deps *Deps) *cobra.Command {
	o := &ResetOptions{}
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Undo a join on this node (kjoin's or kubeadm's): etcd member, static pods, kubelet, files",
		Long: `Undo what a join did on this node, as a workflow of phases (` + joinNames(phases.ResetWorkflow) + `).
A control plane first removes its own etcd member (refused, with the reason, when that would
cost etcd its quorum; --force overrides) and its static pods; then the kubelet is stopped, the
Node is marked not ready and the files the join wrote are removed: those in the join journal,
or kubeadm's list on nodes kubeadm joined, never outside the join's directories.
--delete-node also deletes the Node object with admin credentials. Running it again does nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runReset(cmd.Context(), deps, o) },
	}
	f := cmd.Flags()
	f.BoolVar(&o.Force, "force", false, "remove the etcd member even if etcd then loses quorum")
	f.BoolVar(&o.DeleteNode, "delete-node", false, "also delete the Node object (admin credentials)")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "admin kubeconfig for --delete-node (default /etc/kubernetes/admin.conf)")
	f.StringSliceVar(&o.SkipPhases, "skip-phases", nil, "reset phases to skip ("+joinNames(phases.ResetWorkflow)+")")
	f.StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	f.IntVarP(&o.Verbosity, "v", "v", 0, "log verbosity")
	f.StringVar(&o.Root, "root", "/", "host root directory (for tests)")
	_ = f.MarkHidden("root")
	return cmd
}

func runReset(ctx context.Context, deps *Deps, o *ResetOptions) error {
	if err := checkOutput(o.Output, "text", "json"); err != nil {
		return err
	}
	env := deps.NewEnv(o.Root, o.Verbosity)
	if o.Output == "json" && o.Verbosity == 0 {
		env.Out = nil
	}
	rep, err := phases.Reset(ctx, env, o.ResetOptions, o.SkipPhases)
	if o.Output == "json" {
		out := struct {
			*phases.ResetReport
			Error *ErrorJSON `json:"error,omitempty"`
		}{rep, NewErrorJSON(err)}
		if perr := printObject(deps.Out, "json", out); perr != nil {
			return perr
		}
		if err != nil {
			return &reportedError{code: operr.CodeOf(err), err: err}
		}
		return nil
	}
	if err != nil {
		return err
	}
	if !rep.Changed {
		_, err = fmt.Fprintln(deps.Out, "Nothing to reset: this node holds no join.")
		return err
	}
	_, err = fmt.Fprintf(deps.Out, "Node %q (%s) reset: %d files removed.\n", rep.Node, rep.Role, len(rep.RemovedFiles))
	return err
}

func joinNames(workflow []phases.Phase) string { return strings.Join(phases.Names(workflow), ", ") }
