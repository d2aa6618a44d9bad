package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/approver"
)

// ApproverOptions are the flags of kjoin approver.
type ApproverOptions struct {
	AdminOptions
	Resync time.Duration
}

// NewCmdApprover builds kjoin approver.
func NewCmdApprover(deps *Deps, g *Globals) *cobra.Command {
	o := &ApproverOptions{}
	cmd := &cobra.Command{
		Use: "approver",
		Example: `  kjoin approver                               # on a control plane, until stopped
  systemd-run --unit kjoin-approver kjoin approver   # as a transient service`,
		Short: "Approve the CSRs of tokens bound to a node or to one use (kjoin token create --node, --uses 1), until stopped; run it on control planes",
		Long: `kjoin approver decides on the kubelet client CSRs made with tokens bound to one node
(kjoin token create --node NAME), which the controller-manager never approves: the first
request for that node's identity (CN system:node:NAME, O system:nodes, client usages, an
ECDSA P-256/P-384 or RSA 2048+ key) is approved and the token claimed for it; a second is
denied as a reuse; one for any other name is denied and the token deleted, since whoever sent
it holds the token. A single-use token (--uses 1) is the same for whichever node's identity
its first request asks for. A used token is deleted once its node has registered. Any number of
approvers may run at once (one per control plane): each decision is taken once. Other CSRs
are left alone. It needs no container image: run it as a service (kjoin-approver.service).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runApprover(cmd.Context(), deps, o) },
	}
	bindAdminFlags(cmd, &o.AdminOptions, g)
	cmd.Flags().DurationVar(&o.Resync, "resync", 30*time.Second, "how often every CSR is looked at again and used tokens swept")
	return cmd
}

func runApprover(ctx context.Context, deps *Deps, o *ApproverOptions) error {
	ac, err := newAdminClient(deps, &o.AdminOptions)
	if err != nil {
		return err
	}
	a := &approver.Approver{Client: ac.client, Clock: ac.clock, Resync: o.Resync, Logf: func(format string, args ...any) {
		fmt.Fprintf(deps.Err, "%s [approver] %s\n", ac.clock.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
	}}
	return a.Run(ctx)
}
