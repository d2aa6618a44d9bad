package app

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/token"
)

// TokenListOptions are the flags of kjoin token list.
type TokenListOptions struct {
	AdminOptions
	SortBy string
}

func newCmdTokenList(deps *Deps, g *Globals) *cobra.Command {
	o := &TokenListOptions{}
	cmd := &cobra.Command{
		Use: "list", Short: "List bootstrap tokens (-o wide adds ID and description)", Args: cobra.NoArgs,
		Example: `  kjoin token list -o wide
  kjoin token list -o jsonpath='{range .items[*]}{.id}{"\n"}{end}'`,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTokenList(cmd.Context(), deps, o) },
	}
	bindAdminFlags(cmd, &o.AdminOptions, g)
	bindSortBy(cmd, &o.SortBy, tokenSortFields)
	cmd.Annotations = map[string]string{wideTable: "true"}
	return cmd
}

func runTokenList(ctx context.Context, deps *Deps, o *TokenListOptions) error {
	var bad operr.Problems
	sorter := sorterOf(&bad, o.SortBy, output.Token{})
	if err := bad.Err("kjoin token list"); err != nil {
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
	list := &output.TokenList{Items: []output.Token{}}
	for _, t := range tokens {
		list.Items = append(list.Items, tokenOf(t, ac.clock.Now()))
	}
	if err := sortList(sorter, list.Items); err != nil {
		return err
	}
	if !o.g.Output.Text() {
		return printResult(deps, o.g, list, nil)
	}
	head := []string{"TOKEN", "EXPIRES", "USAGES", "GROUPS"}
	bound := slices.ContainsFunc(list.Items, func(t output.Token) bool { return t.Node != "" || t.SingleUse })
	if bound {
		head = append(head, "BOUND TO")
	}
	if o.g.Output.Wide() {
		head = append(head, "ID", "DESCRIPTION")
	}
	w := output.NewTable(deps.Out, head...)
	for _, t := range list.Items {
		exp := "never"
		if t.Expires != nil {
			exp = t.Expires.UTC().Format(time.RFC3339)
			if t.Expired {
				exp += " (expired)"
			}
		}
		cells := []string{t.Token, exp, strings.Join(t.Usages, ","), dash(strings.Join(t.Groups, ","))}
		if bound {
			state := "-"
			if who := t.Node; who != "" || t.SingleUse {
				if who == "" {
					who = "any node, once"
				}
				state = who + " (" + t.Role + ", unused)"
				if t.UsedBy != "" {
					state = who + " (" + t.Role + ", used by CSR " + t.UsedBy + ")"
				}
			}
			cells = append(cells, state)
		}
		if o.g.Output.Wide() {
			cells = append(cells, t.ID, dash(t.Description))
		}
		w.Row(cells...)
	}
	return w.Flush()
}

// tokenOf is a token as every command prints it.
func tokenOf(t token.Info, now time.Time) output.Token {
	return output.Token{Token: t.Token.Full(), ID: t.ID, Expires: t.Expires, Expired: t.Expires != nil && !now.Before(*t.Expires),
		Usages: t.Usages, Groups: t.Groups, Description: t.Description, Node: t.Node, Role: t.Role, UsedBy: t.UsedBy, SingleUse: t.SingleUse}
}
