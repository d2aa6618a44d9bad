package operr

import (
	"fmt"
	"strings"
)

// Problems collects every bad input of one command, so that all of them are reported at once,
// before anything on the host is touched, in kjoin's one shape for bad input (Invalid).
type Problems struct {
	list []string
}

// Add records one problem, e.g. `--ttl "1x": want a duration (24h, 90m, 0)`.
func (p *Problems) Add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

// Bad records a flag (or field) given value, and what it should be; a missing value (empty)
// is said to be missing.
func (p *Problems) Bad(from, value, want string) {
	if value == "" {
		p.Add("%s: missing; want %s", from, want)
		return
	}
	p.Add("%s %q: want %s", from, value, want)
}

// List is the problems recorded so far.
func (p *Problems) List() []string { return p.list }

// Err is nil without problems, else Invalid(command, problems...).
func (p *Problems) Err(command string) error {
	if len(p.list) == 0 {
		return nil
	}
	return Invalid(command, p.list...)
}

// Invalid is the usage error (exit 2) for bad input found by command (its path, kjoin join),
// every problem named: "invalid input: P", or "N invalid inputs:" with one problem a line,
// hinted "fix the values above (COMMAND --help); nothing on this host was touched".
func Invalid(command string, problems ...string) *Error {
	what := "invalid input: " + strings.Join(problems, "")
	if len(problems) > 1 {
		what = fmt.Sprintf("%d invalid inputs:\n\t%s", len(problems), strings.Join(problems, "\n\t"))
	}
	hint := "fix the values above; nothing on this host was touched"
	if command != "" {
		hint = "fix the values above (" + command + " --help); nothing on this host was touched"
	}
	return New(Usage, what, hint)
}

// IsInvalid reports whether err is an Invalid error.
func IsInvalid(err error) bool {
	e, ok := As(err)
	return ok && e.Code == Usage && (strings.HasPrefix(e.What, "invalid input: ") || strings.Contains(e.What, " invalid inputs:\n"))
}
