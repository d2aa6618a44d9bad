package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/joinconfig"
	"kjoin.dev/kjoin/operr"
)

// NewCmdConfig builds kjoin config (config print join-defaults, as kubeadm's).
func NewCmdConfig(deps *Deps, g *Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "kubeadm configuration files kjoin reads"}
	printCmd := &cobra.Command{Use: "print", Short: "Print default configuration files"}
	printCmd.AddCommand(&cobra.Command{
		Use: "join-defaults",
		Example: `  kjoin config print join-defaults > join.yaml   # edit, then:
  kjoin join --config join.yaml`,
		Short: "Print kubeadm's default JoinConfiguration (kubeadm.k8s.io/v1beta4), a starting point for kjoin join --config",
		Long: `Print the JoinConfiguration kubeadm config print join-defaults prints: kubeadm's defaults, a
placeholder token and endpoint, this machine's hostname as the node name. Edit it and pass it
to kjoin join --config (or kubeadm join --config).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runConfigPrintJoinDefaults(deps, g) },
	})
	cmd.AddCommand(printCmd)
	return cmd
}

func runConfigPrintJoinDefaults(deps *Deps, g *Globals) error {
	if !g.Output.Text() && g.Output.Format != "yaml" {
		return operr.Invalid("kjoin config print join-defaults", fmt.Sprintf("-o %s: config print join-defaults prints YAML, a kubeadm configuration file; drop -o", g.Output.Format))
	}
	name, err := deps.NewEnv(g.Root, g.Verbosity).Hostname()
	if err != nil {
		return operr.Wrap(operr.Other, err, "cannot read the hostname (the default node name)", "")
	}
	b, err := joinconfig.Defaults(name).YAML()
	if err != nil {
		return err
	}
	_, err = deps.Out.Write(b)
	return err
}
