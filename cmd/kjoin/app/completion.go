package app

import (
	"strings"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/verify"
)

// completeFlag completes a flag of cmd with fixed values (bound where the flag is).
func completeFlag(cmd *cobra.Command, flag string, values ...string) {
	_ = cmd.RegisterFlagCompletionFunc(flag, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	})
}

// completeNodeArgs completes a command's arguments with the cluster's node names (as admin).
func completeNodeArgs(cmd *cobra.Command, deps *Deps, g *Globals) {
	cmd.ValidArgsFunction = func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return nodeNames(cmd, deps, g, prefix), cobra.ShellCompDirectiveNoFileComp
	}
}

// bindSkipPhases adds --skip-phases over a workflow's phase names, completed with them.
func bindSkipPhases(cmd *cobra.Command, to *[]string, what string, names []string) {
	cmd.Flags().StringSliceVar(to, "skip-phases", nil, what+" phases to skip ("+strings.Join(names, ", ")+")")
	completeFlag(cmd, "skip-phases", names...)
}

// nodeNames are the cluster's node names starting with prefix (none when the cluster cannot
// be read: completion never fails loudly).
func nodeNames(cmd *cobra.Command, deps *Deps, g *Globals, prefix string) []string {
	o := &AdminOptions{g: g}
	o.Kubeconfig, _ = cmd.Flags().GetString("kubeconfig")
	o.Context, _ = cmd.Flags().GetString("context")
	ac, err := newAdminClient(deps, o)
	if err != nil {
		return nil
	}
	rows, err := verify.NodeMap(cmd.Context(), ac.client, ac.clock, verify.Selection{})
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range rows {
		if strings.HasPrefix(r.Name, prefix) {
			out = append(out, r.Name)
		}
	}
	return out
}
