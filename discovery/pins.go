package discovery

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
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

// ParsePins validates "sha256:<64 hex>" pins (format name case-insensitive, as kubeadm).
func ParsePins(in []string) (Pins, error) {
	p := Pins{}
	for _, s := range in {
		format, value, ok := strings.Cut(s, ":")
		if !ok || strings.Contains(value, ":") {
			return nil, fmt.Errorf("invalid CA cert hash %q: expected \"sha256:<64 hex characters>\"", s)
		}
		if !strings.EqualFold(format, "sha256") {
			return nil, fmt.Errorf("invalid CA cert hash %q: unknown hash format %q, only sha256 is known", s, format)
		}
		b, err := hex.DecodeString(value)
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("invalid CA cert hash %q: expected 32 bytes of hex (64 characters), got %d characters", s, len(value))
		}
		p["sha256:"+strings.ToLower(value)] = true
	}
	return p, nil
}

// Match returns the pin of the first certificate that is in the set.
func (p Pins) Match(certs []*x509.Certificate) (string, bool) {
	for _, c := range certs {
		if pin := Pin(c); p[pin] {
			return pin, true
		}
	}
	return "", false
}

// ParseCerts parses every PEM certificate in data.
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no PEM certificate found")
	}
	return out, nil
}

// PinsOf returns the pins of every certificate, joined for messages.
func PinsOf(certs []*x509.Certificate) string {
	var s []string
	for _, c := range certs {
		s = append(s, Pin(c))
	}
	return strings.Join(s, ", ")
}
