package discovery

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
)

// Pin returns kubeadm's CA pin of a certificate: "sha256:" + hex SHA-256 of its DER
// SubjectPublicKeyInfo.
func Pin(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Pins is a set of accepted CA pins.
type Pins map[string]bool

// ParsePin validates one "sha256:<64 hex>" pin (format name case-insensitive, as kubeadm)
// and returns it in canonical form.
func ParsePin(s string) (string, error) {
	format, value, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(value, ":") {
		return "", fmt.Errorf("expected \"sha256:<64 hex characters>\"")
	}
	if !strings.EqualFold(format, "sha256") {
		return "", fmt.Errorf("unknown hash format %q, only sha256 is known", format)
	}
	b, err := hex.DecodeString(value)
	if err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("expected 32 bytes of hex (64 characters), got %d characters", len(value))
	}
	return "sha256:" + strings.ToLower(value), nil
}

// ParsePins validates pins with ParsePin.
func ParsePins(in []string) (Pins, error) {
	p := Pins{}
	for _, s := range in {
		pin, err := ParsePin(s)
		if err != nil {
			return nil, fmt.Errorf("invalid CA cert hash %q: %w", s, err)
		}
		p[pin] = true
	}
	return p, nil
}

// Select splits a CA bundle into the certificates whose pin is in the set and those whose
// pin is not. Only the first may ever be trusted: a bundle is accepted only when the second
// is empty (a rotation bundle works when every CA in it is pinned).
func (p Pins) Select(certs []*x509.Certificate) (pinned, unpinned []*x509.Certificate) {
	for _, c := range certs {
		if p[Pin(c)] {
			pinned = append(pinned, c)
		} else {
			unpinned = append(unpinned, c)
		}
	}
	return pinned, unpinned
}

// PinsOf returns the pins of every certificate, joined for messages.
// At most five are named: the bundle may come from an unauthenticated answer.
func PinsOf(certs []*x509.Certificate) string {
	var s []string
	for i, c := range certs {
		if i == 5 {
			s = append(s, fmt.Sprintf("and %d more", len(certs)-5))
			break
		}
		s = append(s, Pin(c))
	}
	return strings.Join(s, ", ")
}
