package discovery

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// maxQuoted is how much of one string from an unauthenticated answer a message may hold.
const maxQuoted = 100

// Quote renders a string that came from an unauthenticated answer (a cluster name, a server
// URL, a certificate subject, a parser's complaint about such bytes) for a message: quoted,
// control characters escaped, at most 100 bytes of it, so no server can flood an error or
// write escape codes onto the operator's terminal.
func Quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s (%d more bytes)", strconv.Quote(s[:cut]), len(s)-cut)
}
