package token

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// DefaultGroup is the group kubeadm's join RBAC is bound to.
const DefaultGroup = "system:bootstrappers:kubeadm:default-node-token"

// BoundGroup is the extra group of a token bound to one node (kjoin token create --node). No
// binding of kubeadm's covers it, so the controller-manager never approves its CSRs: kjoin's
// approver does, once, for that node's name. BoundControlPlaneGroup is added for a control
// plane's, which may also read kubeadm-certs.
const (
	BoundGroup             = "system:bootstrappers:kjoin:bound"
	BoundControlPlaneGroup = "system:bootstrappers:kjoin:bound-control-plane"
	// NodeLabel names the node a bound token joins (empty: a single-use token, any name);
	// RoleLabel its role (worker, control-plane).
	NodeLabel = "kjoin.dev/bound-node"
	RoleLabel = "kjoin.dev/bound-role"
	// UsedByAnnotation names the CSR the approver approved with the token, UsedAtAnnotation
	// when (RFC 3339): the token joins nothing else, and goes once its node has registered.
	UsedByAnnotation = "kjoin.dev/used-by"
	UsedAtAnnotation = "kjoin.dev/used-at"
	// UsedForAnnotation names the node a single-use token's claim was for.
	UsedForAnnotation = "kjoin.dev/used-for"
)

// DefaultUsages are kubeadm's token usages.
var DefaultUsages = []string{"signing", "authentication"}

// Generate returns a new random token.
func Generate() (Token, error) {
	s, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return Token{}, err
	}
	return Parse(s)
}

// Spec is a bootstrap token to create.
type Spec struct {
	Token       Token
	TTL         time.Duration // 0: never expires
	Usages      []string
	Groups      []string
	Description string
	// Node binds the token to one node (BoundGroup instead of kubeadm's group; kjoin's
	// approver approves one CSR, for this name); ControlPlane with it: a control plane's.
	Node         string
	ControlPlane bool
	// SingleUse: one join, under any name (--uses 1): kjoin's bound groups and approver as for
	// Node, without the name. Implied by Node.
	SingleUse bool
}

// Info describes an existing bootstrap token.
type Info struct {
	Token       Token
	ID          string
	Expires     *time.Time
	Usages      []string
	Groups      []string
	Description string
	// Node, Role and UsedBy describe a bound token: the node it joins, as what, and the CSR
	// it was used for (empty: not yet).
	Node   string
	Role   string
	UsedBy string
	// SingleUse: a token for one join under any name (Node is then empty).
	SingleUse bool
}

// Validate checks usages and groups as the API server's bootstrap authenticator expects them;
// every problem is named (joined, one a line).
func (s *Spec) Validate() error {
	var errs []error
	if s.TTL < 0 {
		errs = append(errs, fmt.Errorf("--ttl must not be negative (0 means the token never expires)"))
	}
	if err := bootstraputil.ValidateUsages(s.Usages); err != nil {
		errs = append(errs, err)
	}
	for _, g := range s.Groups {
		if err := bootstraputil.ValidateBootstrapGroupName(g); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Node != "" {
		if verrs := validation.IsDNS1123Subdomain(s.Node); len(verrs) > 0 {
			errs = append(errs, fmt.Errorf("--node %q is not a node name: %s", s.Node, strings.Join(verrs, "; ")))
		}
		if slices.Contains(s.Groups, DefaultGroup) {
			errs = append(errs, fmt.Errorf("a token bound to a node may not be in %s: the controller-manager would approve any CSR made with it", DefaultGroup))
		}
	} else if s.ControlPlane && !s.SingleUse {
		errs = append(errs, fmt.Errorf("a control plane's bound token needs --node or --uses 1"))
	}
	return errors.Join(errs...)
}

// BoundGroups are the groups of a token bound to a node, as Secret writes them.
func (s *Spec) BoundGroups() []string {
	if s.ControlPlane {
		return []string{BoundGroup, BoundControlPlaneGroup}
	}
	return []string{BoundGroup}
}

// Secret renders the token's Secret exactly as kubeadm writes it.
func (s *Spec) Secret(now time.Time) *corev1.Secret {
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:     []byte(s.Token.ID),
		bootstrapapi.BootstrapTokenSecretKey: []byte(s.Token.Secret),
	}
	if s.Description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(s.Description)
	}
	if s.TTL > 0 {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(now.Add(s.TTL).UTC().Format(time.RFC3339))
	}
	for _, u := range s.Usages {
		data[bootstrapapi.BootstrapTokenUsagePrefix+u] = []byte("true")
	}
	groups := s.Groups
	var labels map[string]string
	if s.Node != "" || s.SingleUse {
		groups = s.BoundGroups()
		role := "worker"
		if s.ControlPlane {
			role = "control-plane"
		}
		labels = map[string]string{NodeLabel: s.Node, RoleLabel: role}
	}
	if len(groups) > 0 {
		data[bootstrapapi.BootstrapTokenExtraGroupsKey] = []byte(strings.Join(groups, ","))
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: s.Token.SecretName(), Namespace: metav1.NamespaceSystem, Labels: labels},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data:       data,
	}
}

// FromSecret reads a bootstrap token Secret; ok is false for other Secrets.
func FromSecret(sec *corev1.Secret) (Info, bool) {
	if sec.Type != bootstrapapi.SecretTypeBootstrapToken {
		return Info{}, false
	}
	id := string(sec.Data[bootstrapapi.BootstrapTokenIDKey])
	t, err := Parse(id + "." + string(sec.Data[bootstrapapi.BootstrapTokenSecretKey]))
	if err != nil || sec.Name != t.SecretName() {
		return Info{}, false
	}
	info := Info{Token: t, ID: t.ID, Description: string(sec.Data[bootstrapapi.BootstrapTokenDescriptionKey])}
	if exp := string(sec.Data[bootstrapapi.BootstrapTokenExpirationKey]); exp != "" {
		if ts, err := time.Parse(time.RFC3339, exp); err == nil {
			info.Expires = &ts
		}
	}
	for k, v := range sec.Data {
		if u, ok := strings.CutPrefix(k, bootstrapapi.BootstrapTokenUsagePrefix); ok && string(v) == "true" {
			info.Usages = append(info.Usages, u)
		}
	}
	sort.Strings(info.Usages)
	if g := string(sec.Data[bootstrapapi.BootstrapTokenExtraGroupsKey]); g != "" {
		info.Groups = strings.Split(g, ",")
	}
	info.Node, info.Role, info.UsedBy = sec.Labels[NodeLabel], sec.Labels[RoleLabel], sec.Annotations[UsedByAnnotation]
	if node, labelled := sec.Labels[NodeLabel]; labelled && node == "" {
		info.SingleUse = true
	}
	return info, true
}

// Create writes the token's Secret. It fails if a token with the same ID exists.
func Create(ctx context.Context, c kubernetes.Interface, s *Spec, now time.Time) (*Info, error) {
	sec, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s.Secret(now), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	info, _ := FromSecret(sec)
	return &info, nil
}

// List returns the cluster's bootstrap tokens, sorted by ID.
func List(ctx context.Context, c kubernetes.Interface) ([]Info, error) {
	l, err := c.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken)})
	if err != nil {
		return nil, err
	}
	var out []Info
	for i := range l.Items {
		if info, ok := FromSecret(&l.Items[i]); ok {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ErrUnknown is returned when deleting a token that does not exist.
var ErrUnknown = fmt.Errorf("no such bootstrap token")

// IDOf is the token ID idOrToken names: a token ID, or a whole token.
func IDOf(idOrToken string) (string, error) {
	if strings.Contains(idOrToken, ".") {
		t, err := Parse(idOrToken)
		if err != nil {
			return "", err
		}
		return t.ID, nil
	}
	if !bootstraputil.IsValidBootstrapTokenID(idOrToken) {
		return "", fmt.Errorf("%q is neither a token ID ([a-z0-9]{6}) nor a token", idOrToken)
	}
	return idOrToken, nil
}

// Delete removes a token given as "id" or "id.secret".
func Delete(ctx context.Context, c kubernetes.Interface, idOrToken string) (string, error) {
	id, err := IDOf(idOrToken)
	if err != nil {
		return "", err
	}
	err = c.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, bootstraputil.BootstrapTokenSecretName(id), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return id, fmt.Errorf("%w with id %q", ErrUnknown, id)
	}
	return id, err
}
