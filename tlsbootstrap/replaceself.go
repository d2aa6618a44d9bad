package tlsbootstrap

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ReplaceSelf is the ClusterRole and ClusterRoleBinding that let a node delete its own Node
// object, so that kjoin join --replace on a reinstalled worker can start its name afresh with
// the node's own new credentials. The Node authorizer alone allows a node to create, update
// and patch its Node, never to delete it; RBAC grants the verb, and the NodeRestriction
// admission plugin (on in every kubeadm cluster) limits it to the node's own Node.
const ReplaceSelf = "kjoin:node-replace-self"

// EnsureReplaceSelf creates the ReplaceSelf ClusterRole and binding (group system:nodes) if
// they are missing; created reports whether anything was created.
func EnsureReplaceSelf(ctx context.Context, c kubernetes.Interface) (created bool, err error) {
	labels := map[string]string{"app.kubernetes.io/managed-by": "kjoin"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ReplaceSelf, Labels: labels},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"delete"}}}}
	switch _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); {
	case err == nil:
		created = true
	case !apierrors.IsAlreadyExists(err):
		return false, fmt.Errorf("create ClusterRole %s: %w", ReplaceSelf, err)
	}
	rb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ReplaceSelf, Labels: labels},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ReplaceSelf},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}}}
	switch _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, rb, metav1.CreateOptions{}); {
	case err == nil:
		created = true
	case !apierrors.IsAlreadyExists(err):
		return created, fmt.Errorf("create ClusterRoleBinding %s: %w", ReplaceSelf, err)
	}
	return created, nil
}
