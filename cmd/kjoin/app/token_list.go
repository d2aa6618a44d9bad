package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"kjoin.dev/kjoin/token"
)

// TokenListOptions are the flags of kjoin token list.
type TokenListOptions struct{ AdminOptions }

func newCmdTokenList(deps *Deps) *cobra.Command {
	o := &TokenListOptions{}
	cmd := &cobra.Command{
		Use: "list", Short: "List bootstrap tokens", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTokenList(cmd.Context(), deps, o) },
	}
	bindAdminFlags(cmd, &o.AdminOptions, "text, json or yaml")
	return cmd
}

// runTokenList prints the cluster's bootstrap tokens.
func runTokenList(ctx context.Context, deps *Deps, o *TokenListOptions) error {
	if err := checkOutput(o.Output, "text", "json", "yaml"); err != nil {
		return err
	}
	ac, err := newAdminClient(deps, &o.AdminOptions)
	if err != nil {
		return err
	}
	tokens, err := token.List(ctx, ac.client)
	if err != nil {
		return apiError(err, "list", "secrets in kube-system")
	}
	type row struct {
		token.Info
		Token string `json:"token"`
	}
	rows := []row{}
	for _, t := range tokens {
		rows = append(rows, row{Info: t, Token: t.Token.Full()})
	}
	if o.Output != "text" {
		return printObject(deps.Out, o.Output, rows)
	}
	fmt.Fprintf(deps.Out, "%-24s %-22s %-26s %s\n", "TOKEN", "EXPIRES", "USAGES", "GROUPS")
	for _, r := range rows {
		exp := "never"
		if r.Expires != nil {
			exp = r.Expires.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(deps.Out, "%-24s %-22s %-26s %s\n", r.Token, exp, strings.Join(r.Usages, ","), strings.Join(r.Groups, ","))
	}
	return nil
}
