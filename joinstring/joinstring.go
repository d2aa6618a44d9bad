// Package joinstring encodes and checks kjoin's join string: one opaque, versioned string
// that carries everything a join needs (the API server endpoints, the CA pins, the bootstrap
// token and, for a control plane, the certificate key), each part with its own checksum and
// the whole with another, so that a truncated or mistyped string is refused before any
// network use, naming the part that is wrong.
//
// Version 1 (docs/JOIN-STRING.md):
//
//	kjoin1.<endpoints>.<pins>.<token>[.<certificate-key>].<checksum>
//
// Each part between the version and the checksum is base64url without padding (RFC 4648 §5,
// canonical: unused bits zero) of the part's bytes followed by the big-endian CRC-32C of its
// one-letter label and those bytes (e endpoints: comma-separated host:port; p pins: the
// SHA-256 values, 32 bytes each; t token: its 23 characters; k certificate key: its 32
// bytes). The checksum is the base64url CRC-32C of everything before it, the last dot
// included. A CRC-32C catches every change of up to 32 adjacent bits, so any one changed
// character is caught by its part's check (a base64 character is 6 bits).
package joinstring

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/token"
)

// Version is the prefix of the strings this package writes and reads.
const Version = "kjoin1"

// MaxLen bounds a join string (a thousand endpoints would not reach it).
const MaxLen = 16384

// JoinString is what a join string carries.
type JoinString struct {
	// Endpoints are the API server endpoints (host:port), tried in order.
	Endpoints []string
	// Pins are the CA pins ("sha256:<64 hex>").
	Pins []string
	// Token is the bootstrap token (abcdef.0123456789abcdef).
	Token string
	// CertificateKey is the control-plane certificate key (64 hex), empty for a worker.
	CertificateKey string
}

// ControlPlane reports whether the string joins a control plane (it has a certificate key).
func (j JoinString) ControlPlane() bool { return j.CertificateKey != "" }

var (
	table = crc32.MakeTable(crc32.Castagnoli)
	b64   = base64.RawURLEncoding.Strict()
)

// part names, in their order in the string.
var parts = []struct {
	label byte
	name  string
}{{'e', "endpoints"}, {'p', "CA pins"}, {'t', "token"}, {'k', "certificate key"}}

// Encode writes j as a version 1 join string, after checking every value.
func Encode(j JoinString) (string, error) {
	if err := j.check(); err != nil {
		return "", err
	}
	var pins []byte
	for _, p := range j.Pins {
		c, _ := discovery.ParsePin(p)
		b, _ := hex.DecodeString(strings.TrimPrefix(c, "sha256:"))
		pins = append(pins, b...)
	}
	values := [][]byte{[]byte(strings.Join(j.Endpoints, ",")), pins, []byte(j.Token)}
	if j.CertificateKey != "" {
		k, _ := hex.DecodeString(j.CertificateKey)
		values = append(values, k)
	}
	var b strings.Builder
	b.WriteString(Version)
	for i, v := range values {
		b.WriteByte('.')
		b.WriteString(b64.EncodeToString(binary.BigEndian.AppendUint32(bytes.Clone(v), sum(parts[i].label, v))))
	}
	b.WriteByte('.')
	b.WriteString(b64.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum([]byte(b.String()), table))))
	return b.String(), nil
}

func sum(label byte, v []byte) uint32 {
	return crc32.Update(crc32.Checksum([]byte{label}, table), table, v)
}

// Error is a join string refused: every problem found, each naming its part.
type Error struct{ Problems []string }

func (e *Error) Error() string {
	return "the join string is not valid: " + strings.Join(e.Problems, "; ")
}

// Parse checks a join string (surrounding white space is ignored) and returns what it
// carries. It touches nothing but s.
func Parse(s string) (JoinString, error) {
	s = strings.TrimSpace(s)
	bad := func(format string, a ...any) (JoinString, error) {
		return JoinString{}, &Error{Problems: []string{fmt.Sprintf(format, a...)}}
	}
	switch {
	case s == "":
		return bad("it is empty")
	case len(s) > MaxLen:
		return bad("it is %d bytes long, more than a join string can be (%d)", len(s), MaxLen)
	case strings.ContainsAny(s, " \t\r\n"):
		return bad("it holds white space at byte %d: a join string is one word (was it wrapped or pasted twice?)", strings.IndexAny(s, " \t\r\n"))
	}
	fields := strings.Split(s, ".")
	if fields[0] != Version {
		if v, ok := strings.CutPrefix(fields[0], "kjoin"); ok && v != "" && strings.Trim(v, "0123456789") == "" {
			return bad("it is version %s; this kjoin reads version %s: use the kjoin that printed it", v, strings.TrimPrefix(Version, "kjoin"))
		}
		return bad("it does not start with %q: it is not a kjoin join string, or its start was lost", Version+".")
	}
	n := len(fields) - 2 // the parts between the version and the checksum
	if n < 3 {
		return bad("it has %d of its parts: it was cut short (a worker's has endpoints, CA pins, token and checksum; a control plane's also a certificate key)", len(fields)-1)
	}
	if n > 4 {
		return bad("it has %d parts, more than a join string has (at most 5): was something appended to it?", len(fields)-1)
	}
	var problems []string
	values := make([][]byte, n)
	for i := range n {
		field, p := fields[i+1], parts[i]
		b, err := b64.DecodeString(field)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("the %s part (part %d) is damaged: %s", p.name, i+1, decodeProblem(field, err)))
			continue
		case len(b) < 4:
			problems = append(problems, fmt.Sprintf("the %s part (part %d) is damaged: too short to hold its check", p.name, i+1))
			continue
		}
		v := b[:len(b)-4]
		if binary.BigEndian.Uint32(b[len(b)-4:]) != sum(p.label, v) {
			problems = append(problems, fmt.Sprintf("the %s part (part %d) is damaged: its check does not match (a character was changed, lost or added)", p.name, i+1))
			continue
		}
		values[i] = v
	}
	last := fields[len(fields)-1]
	want := crc32.Checksum([]byte(s[:len(s)-len(last)]), table)
	if c, err := b64.DecodeString(last); err != nil || len(c) != 4 {
		problems = append(problems, "the checksum part (the last) is damaged or cut short: it must be 6 characters")
	} else if binary.BigEndian.Uint32(c) != want && len(problems) == 0 {
		problems = append(problems, "the checksum does not match the parts: they come from different join strings, or the checksum was changed")
	}
	if len(problems) > 0 {
		return JoinString{}, &Error{Problems: problems}
	}
	j := JoinString{Token: string(values[2])}
	if len(values[0]) > 0 {
		j.Endpoints = strings.Split(string(values[0]), ",")
	}
	if len(values[1])%32 != 0 {
		return bad("the CA pins part holds %d bytes, not 32 for each pin", len(values[1]))
	}
	for p := values[1]; len(p) > 0; p = p[32:] {
		j.Pins = append(j.Pins, "sha256:"+hex.EncodeToString(p[:32]))
	}
	if n == 4 {
		j.CertificateKey = hex.EncodeToString(values[3])
	}
	if err := j.check(); err != nil {
		return JoinString{}, err
	}
	return j, nil
}

// decodeProblem says why a part is not base64url.
func decodeProblem(field string, err error) string {
	if field == "" {
		return "it is empty"
	}
	if i := strings.IndexFunc(field, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}); i >= 0 {
		return fmt.Sprintf("its character %d cannot be in a join string", i+1)
	}
	var ce base64.CorruptInputError
	if errors.As(err, &ce) {
		return "its last character is not one an encoder writes (a character was changed or lost)"
	}
	return err.Error()
}

// check validates every value, naming each bad one.
func (j JoinString) check() error {
	var problems []string
	if len(j.Endpoints) == 0 {
		problems = append(problems, "the endpoints part names no endpoint")
	}
	for _, e := range j.Endpoints {
		if strings.Contains(e, ",") {
			problems = append(problems, fmt.Sprintf("endpoint %q holds a comma", e))
		} else if err := discovery.CheckEndpoint(e); err != nil {
			problems = append(problems, fmt.Sprintf("endpoint %q: %v", e, err))
		}
	}
	if len(j.Pins) == 0 {
		problems = append(problems, "the CA pins part holds no pin")
	}
	for _, p := range j.Pins {
		if _, err := discovery.ParsePin(p); err != nil {
			problems = append(problems, fmt.Sprintf("CA pin %q: %v", p, err))
		}
	}
	if _, err := token.Parse(j.Token); err != nil {
		problems = append(problems, "the token is not a bootstrap token (abcdef.0123456789abcdef)")
	}
	if j.CertificateKey != "" {
		if k, err := hex.DecodeString(j.CertificateKey); err != nil || len(k) != 32 {
			problems = append(problems, "the certificate key is not 64 hex characters")
		}
	}
	if len(problems) > 0 {
		return &Error{Problems: problems}
	}
	return nil
}
