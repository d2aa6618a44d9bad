package app

import (
	"strings"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
)

// The fields --sort-by completes (and names in its help) per list.
var (
	nodeSortFields  = []string{".joinedAt", ".leaseAge.seconds", ".name", ".joinedBy", ".kubeletVersion", ".readyStatus", ".role"}
	tokenSortFields = []string{".expires", ".id", ".description"}
)

// bindSortBy adds kubectl's --sort-by: a JSONPath over the -o json items.
func bindSortBy(cmd *cobra.Command, to *string, fields []string) {
	cmd.Flags().StringVar(to, "sort-by", "", "sort the list by a JSONPath over its -o json items (as kubectl's --sort-by), e.g. "+strings.Join(fields[:min(2, len(fields))], " or "))
	completeFlag(cmd, "sort-by", fields...)
}

// sorterOf parses --sort-by over items shaped like item (nil when unset); a bad expression,
// or a field path that matches nothing in item, is one of bad's problems.
func sorterOf(bad *operr.Problems, expr string, item any) *output.Sorter {
	if expr == "" {
		return nil
	}
	s, err := output.NewSorterFor(expr, item)
	if err != nil {
		bad.Bad("--sort-by", expr, "a JSONPath over the -o json items, e.g. .joinedAt or {.leaseAge.seconds} ("+err.Error()+")")
	}
	return s
}

// sortList orders a list's items by --sort-by (unchanged when it is unset).
func sortList[T any](s *output.Sorter, items []T) error {
	if s == nil {
		return nil
	}
	if err := output.Sort(s, items); err != nil {
		return operr.Wrap(operr.Usage, err, "", "")
	}
	return nil
}
