package app

import (
	"strings"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/phases"
	"kjoin.dev/kjoin/verify"
	"kjoin.dev/kjoin/workflow"
)

// addCompletions completes flag values: -o's formats, --skip-phases' phase names, --format,
// --sort-by's fields, and node names (from the cluster, as admin) for verify and nodes.
func addCompletions(root *cobra.Command, deps *Deps, g *Globals) {
	fixed := func(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return values, cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = root.RegisterFlagCompletionFunc("output", fixed(g.Output.Formats()...))
	nodeArgs := func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return nodeNames(cmd, deps, g, prefix), cobra.ShellCompDirectiveNoFileComp
	}
	walk(root, func(c *cobra.Command) {
		switch c.CommandPath() {
		case "kjoin join":
			_ = c.RegisterFlagCompletionFunc("skip-phases", fixed(workflow.Names(phases.Join)...))
		case "kjoin reset":
			_ = c.RegisterFlagCompletionFunc("skip-phases", fixed(workflow.Names(phases.ResetWorkflow)...))
		case "kjoin leave":
			_ = c.RegisterFlagCompletionFunc("skip-phases", fixed(workflow.Names(phases.LeaveWorkflow)...))
		case "kjoin token create":
			_ = c.RegisterFlagCompletionFunc("format", fixed("kjoin", "kubeadm"))
		case "kjoin token list":
			_ = c.RegisterFlagCompletionFunc("sort-by", fixed(tokenSortFields...))
		case "kjoin nodes":
			_ = c.RegisterFlagCompletionFunc("sort-by", fixed(nodeSortFields...))
			c.ValidArgsFunction = nodeArgs
		case "kjoin verify":
			c.ValidArgsFunction = nodeArgs
		}
	})
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

func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, s := range c.Commands() {
		walk(s, f)
	}
}
