package output

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
)

// Table is a text table whose cells are escaped: any control or format character in a cell
// (a terminal escape, a carriage return, a tab or newline that a kubelet, a node or a token
// holder wrote into its own object's fields) is printed escaped (\x1b, \r, \u202e), so no row
// can hide another, move the cursor or rewrite the screen; kubectl does the same since
// CVE-2021-25743. Columns are aligned by tabwriter.
type Table struct{ tw *tabwriter.Writer }

// NewTable starts a table on w with a header row (written as given: headers are kjoin's own).
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	fmt.Fprintln(t.tw, strings.Join(header, "\t"))
	return t
}

// Row writes one row, each cell escaped.
func (t *Table) Row(cells ...string) {
	esc := make([]string, len(cells))
	for i, c := range cells {
		esc[i] = EscapeCell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(esc, "\t"))
}

// Flush writes the aligned table.
func (t *Table) Flush() error { return t.tw.Flush() }

// EscapeCell escapes every control and format character of s (and invalid UTF-8) as Go
// escapes it; everything else is kept as is.
func EscapeCell(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == unicode.ReplacementChar && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !unsafeRune(r):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar
}
