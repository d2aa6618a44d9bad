package certs

import (
	"context"
	"fmt"
	"path"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"kjoin.dev/kjoin/token"
)

// TTL is how long uploaded certificates live (kubeadm: 2h, through a short-lived token that
// owns the Secret).
const TTL = 2 * time.Hour

// Upload encrypts the shared CAs and keys read by readFile (paths relative to the certificates
// directory, or absolute for external etcd) with certKey and writes kube-system/kubeadm-certs
// in kubeadm's format, owned by a fresh 2-hour token so it is garbage-collected with it, plus
// the Role and RoleBinding that let joining nodes read it. It returns when the upload expires.
func Upload(ctx context.Context, c kubernetes.Interface, certKey string, external *External, readFile func(string) ([]byte, error), now time.Time) (time.Time, error) {
	key, err := ParseCertificateKey(certKey)
	if err != nil {
		return time.Time{}, err
	}
	files := secretFiles(external)
	data := map[string][]byte{}
	for name, p := range files {
		plain, err := readFile(p)
		if err != nil {
			if name == "etcd-ca.crt" || name == "etcd-ca.key" || p == "" {
				data[name] = nil // kubeadm uploads missing optional files as empty values
				continue
			}
			return time.Time{}, fmt.Errorf("read %s: %w", path.Clean(p), err)
		}
		if data[name], err = Encrypt(key, plain); err != nil {
			return time.Time{}, err
		}
	}
	owner, err := token.Generate()
	if err != nil {
		return time.Time{}, err
	}
	spec := &token.Spec{Token: owner, TTL: TTL, Description: "Proxy for managing TTL for the kubeadm-certs secret"}
	ownerSecret, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, spec.Secret(now), metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("create the token that owns %s: %w", SecretName, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: SecretName, Namespace: metav1.NamespaceSystem,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Secret", Name: ownerSecret.Name, UID: ownerSecret.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Data: data,
	}
	if _, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = c.CoreV1().Secrets(metav1.NamespaceSystem).Update(ctx, secret, metav1.UpdateOptions{})
		if err != nil {
			return time.Time{}, fmt.Errorf("update %s: %w", SecretName, err)
		}
	} else if err != nil {
		return time.Time{}, fmt.Errorf("create %s: %w", SecretName, err)
	}
	if err := ensureRBAC(ctx, c); err != nil {
		return time.Time{}, err
	}
	return now.Add(TTL), nil
}

func ensureRBAC(ctx context.Context, c kubernetes.Interface) error {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:kubeadm-certs", Namespace: metav1.NamespaceSystem},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{SecretName}}},
	}
	if _, err := c.RbacV1().Roles(metav1.NamespaceSystem).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Role %s: %w", role.Name, err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:kubeadm-certs", Namespace: metav1.NamespaceSystem},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: token.DefaultGroup}},
	}
	if _, err := c.RbacV1().RoleBindings(metav1.NamespaceSystem).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create RoleBinding %s: %w", rb.Name, err)
	}
	return nil
}
