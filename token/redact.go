package token

import "regexp"

var (
	// tokenShape is a bootstrap token ([a-z0-9]{6}.[a-z0-9]{16}) standing on its own.
	tokenShape = regexp.MustCompile(`(^|[^a-z0-9])([a-z0-9]{6})\.[a-z0-9]{16}($|[^a-z0-9])`)
	// hexRun is a run of hex digits: one of exactly 64 is shaped like a certificate key.
	hexRun = regexp.MustCompile(`[0-9a-fA-F]+`)
)

// Redact hides anything in s shaped like a bootstrap token (its secret) or a certificate key
// (64 hex digits, unless a sha256: pin), for every message that echoes an input: a secret
// passed by mistake as the endpoint or a pin is never printed.
func Redact(s string) string {
	// A match consumes the character on each side, so a token one character after another is
	// not seen in the same pass: repeat until nothing is left (each pass hides at least one).
	for r := tokenShape.ReplaceAllString(s, "${1}${2}.<hidden>${3}"); r != s; r = tokenShape.ReplaceAllString(s, "${1}${2}.<hidden>${3}") {
		s = r
	}
	out, last := []byte(nil), 0
	for _, ix := range hexRun.FindAllStringIndex(s, -1) {
		if ix[1]-ix[0] != 64 || (ix[0] >= 7 && s[ix[0]-7:ix[0]] == "sha256:") {
			continue
		}
		out = append(append(out, s[last:ix[0]]...), "<hidden: 64 hex digits>"...)
		last = ix[1]
	}
	if out == nil {
		return s
	}
	return string(append(out, s[last:]...))
}
