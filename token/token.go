// Package token parses and represents bootstrap tokens ("abcdef.0123456789abcdef") in the
// format kubeadm and the API server's bootstrap authenticator use, and manages their Secrets
// (create, list, delete). It knows nothing of joins; a token's String never shows its secret.
package token

import (
	"fmt"
	"regexp"

	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

var tokenRE = regexp.MustCompile(`\A([a-z0-9]{6})\.([a-z0-9]{16})\z`)

// Token is a parsed bootstrap token. Its String method never reveals the secret.
type Token struct {
	ID     string
	Secret string
}

// Parse parses "<6 chars>.<16 chars>" (lower-case letters and digits).
func Parse(s string) (Token, error) {
	m := tokenRE.FindStringSubmatch(s)
	if m == nil {
		return Token{}, fmt.Errorf("the bootstrap token is not of the form [a-z0-9]{6}.[a-z0-9]{16} (got %d characters)", len(s))
	}
	return Token{ID: m[1], Secret: m[2]}, nil
}

// Full returns the token as the API server expects it in a bearer header. Never log it.
func (t Token) Full() string { return bootstraputil.TokenFromIDAndSecret(t.ID, t.Secret) }

// String redacts the secret.
func (t Token) String() string { return t.ID + ".<redacted>" }

// GoString redacts the secret in %#v too.
func (t Token) GoString() string { return t.String() }

// SecretName is the name of the token's Secret in kube-system.
func (t Token) SecretName() string { return bootstraputil.BootstrapTokenSecretName(t.ID) }
