package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/endpoint"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/phases"
)

// EndpointMoveOptions are the flags of kjoin endpoint move.
type EndpointMoveOptions struct {
	endpoint.Options
	g *Globals
}

// NewCmdEndpoint builds kjoin endpoint (and its move command).
func NewCmdEndpoint(deps *Deps, g *Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "endpoint", Short: "Move this node to a new control-plane endpoint",
		Example: "  kjoin endpoint move api.example.com:6443 --dry-run"}
	o := &EndpointMoveOptions{g: g}
	move := &cobra.Command{
		Use:   "move NEW-HOST:PORT",
		Short: "Re-point this node's kubeconfigs to a new control-plane endpoint, proven first, rolled back on failure",
		Long: `Move this joined node to a new control-plane endpoint (a load balancer, a virtual IP or a new
DNS name in front of the same API servers). The new endpoint must prove first that it is this
cluster's API server for this node: TLS verified by the node's own cluster CA for the new
name, and the node's own identity authenticated there (system:node:NAME). Only then is every
kubeconfig that names the old endpoint rewritten atomically (kubelet.conf; on a control plane
admin.conf, super-admin.conf, controller-manager.conf and scheduler.conf), the kubelet (and a
static pod whose kubeconfig moved) restarted, and the kubelet's Lease renewal through the new
endpoint awaited; if it does not come, every file is restored and the kubelet restarted on it.

--update-cluster (admin credentials: admin.conf or --kubeconfig) also moves the cluster's
records: kube-system/kubeadm-config's controlPlaneEndpoint (later control-plane joins, kubeadm
upgrade) and kube-public/cluster-info's server (later joins' kubelets); the controller-manager
signs cluster-info again for every token. Run it once, then move every node.`,
		Example: `  kjoin endpoint move api.example.com:6443 --dry-run      # proven, nothing changed
  kjoin endpoint move api.example.com:6443                # this node
  kjoin endpoint move api.example.com:6443 --update-cluster -o json   # on a control plane, first`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.To = args[0]
			return runEndpointMove(cmd.Context(), deps, o)
		},
	}
	f := move.Flags()
	f.BoolVar(&o.DryRun, "dry-run", false, "prove the new endpoint and list what would change; change nothing")
	f.BoolVar(&o.UpdateCluster, "update-cluster", false, "also move kubeadm-config's controlPlaneEndpoint and cluster-info's server (admin credentials)")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "admin credentials for --update-cluster (default /etc/kubernetes/admin.conf)")
	f.DurationVar(&o.RenewTimeout, "timeout", 2*time.Minute, "how long to wait for the kubelet to renew its Lease through the new endpoint before rolling back")
	cmd.AddCommand(move)
	return cmd
}

func runEndpointMove(ctx context.Context, deps *Deps, o *EndpointMoveOptions) error {
	env := deps.NewEnv(o.g.Root, o.g.Verbosity)
	if err := phases.RequireRoot(env, "kjoin endpoint move"); err != nil {
		return err
	}
	if !o.g.Output.Text() && o.g.Verbosity == 0 {
		env.Out = nil
	}
	rep, err := endpoint.Move(ctx, env, o.Options)
	if !o.g.Output.Text() {
		return printResult(deps, o.g, endpointMoveResultOf(rep, err), err)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(deps.Err, "warning: %s\n", w)
	}
	if err != nil {
		return err
	}
	var b strings.Builder
	switch {
	case rep.DryRun:
		fmt.Fprintf(&b, "Dry run: nothing was changed. %s is this cluster's API server for %s. Moving would:\n", rep.To, rep.Identity)
		for _, a := range rep.Planned {
			fmt.Fprintf(&b, "  - %s\n", a)
		}
	case len(rep.Files) == 0 && len(rep.ClusterObjects) == 0:
		fmt.Fprintf(&b, "Nothing to do: node %q already uses %s.\n", rep.Node, rep.To)
	default:
		fmt.Fprintf(&b, "Node %q moved from %s to %s: %s rewritten", rep.Node, rep.From, rep.To, strings.Join(rep.Files, ", "))
		if len(rep.Restarted) > 0 {
			fmt.Fprintf(&b, "; restarted %s", strings.Join(rep.Restarted, ", "))
		}
		b.WriteString(".\n")
		if !rep.LeaseRenewed.IsZero() {
			fmt.Fprintf(&b, "The kubelet renewed its Lease through %s at %s.\n", rep.To, rep.LeaseRenewed.Format(time.RFC3339))
		}
		for _, obj := range rep.ClusterObjects {
			fmt.Fprintf(&b, "Moved %s to %s.\n", obj, rep.To)
		}
	}
	_, err = fmt.Fprint(deps.Out, b.String())
	return err
}

func endpointMoveResultOf(r *endpoint.Report, err error) *output.EndpointMoveResult {
	out := &output.EndpointMoveResult{Changed: r.Changed, DryRun: r.DryRun, Node: r.Node, From: r.From, To: r.To, Identity: r.Identity,
		Files: r.Files, Restarted: r.Restarted, ClusterObjects: r.ClusterObjects, RolledBack: r.RolledBack,
		PlannedActions: r.Planned, Warnings: r.Warnings, Error: NewErrorJSON(err)}
	if !r.LeaseRenewed.IsZero() {
		t := r.LeaseRenewed
		out.LeaseRenewed = &t
	}
	return out
}
