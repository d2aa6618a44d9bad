package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/token"
)

// TokenDeleteOptions are the flags and arguments of kjoin token delete.
type TokenDeleteOptions struct {
	AdminOptions
	Tokens []string
}

func newCmdTokenDelete(deps *Deps, g *Globals) *cobra.Command {
	o := &TokenDeleteOptions{}
	cmd := &cobra.Command{
		Use: "delete TOKEN|ID...", Short: "Delete bootstrap tokens", Args: cobra.MinimumNArgs(1),
		Example: `  kjoin token delete abcdef`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Tokens = args
			return runTokenDelete(cmd.Context(), deps, o)
		},
	}
	bindAdminFlags(cmd, &o.AdminOptions, g)
	return cmd
}

func runTokenDelete(ctx context.Context, deps *Deps, o *TokenDeleteOptions) error {
	var bad operr.Problems
	for _, a := range o.Tokens {
		if _, err := token.IDOf(a); err != nil {
			bad.Add("%s", token.Redact(err.Error()))
		}
	}
	if err := bad.Err("kjoin token delete"); err != nil {
		return err
	}
	ac, err := newAdminClient(deps, &o.AdminOptions)
	if err != nil {
		return err
	}
	res := &output.TokenDeleteResult{Deleted: []string{}}
	for _, a := range o.Tokens {
		id, err := token.Delete(ctx, ac.client, a)
		switch {
		case errors.Is(err, token.ErrUnknown):
			return operr.Wrap(operr.Auth, err, "", "kjoin token list shows the existing tokens")
		case err != nil:
			return apiError(err, "delete", "secrets in kube-system")
		}
		res.Deleted = append(res.Deleted, id)
		if o.g.Output.Text() {
			fmt.Fprintf(deps.Out, "bootstrap token %q deleted\n", id)
		}
	}
	if !o.g.Output.Text() {
		return printResult(deps, o.g, res, nil)
	}
	return nil
}
