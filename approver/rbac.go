package approver

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kjoin.dev/kjoin/token"
)

// binding is one grant a bound token's join needs: kubeadm's own role (or cluster role), bound
// to a kjoin group. Everything kubeadm grants its token group except the auto-approval.
type binding struct {
	name, namespace, role string
	cluster               bool
	group                 string
}

var boundBindings = []binding{
	{name: "kjoin:bound-kubelet-bootstrap", role: "system:node-bootstrapper", cluster: true, group: token.BoundGroup},
	{name: "kjoin:bound-get-nodes", role: "kubeadm:get-nodes", cluster: true, group: token.BoundGroup},
	{name: "kjoin:bound-nodes-kubeadm-config", namespace: metav1.NamespaceSystem, role: "kubeadm:nodes-kubeadm-config", group: token.BoundGroup},
	{name: "kjoin:bound-kubelet-config", namespace: metav1.NamespaceSystem, role: "kubeadm:kubelet-config", group: token.BoundGroup},
	{name: "kjoin:bound-kubeadm-certs", namespace: metav1.NamespaceSystem, role: "kubeadm:kubeadm-certs", group: token.BoundControlPlaneGroup},
}

// EnsureBoundRBAC creates the bindings a bound token's join needs (CSR creation, kubeadm's
// config and kubelet-config, Node reads, and for a control plane kubeadm-certs) to kubeadm's
// own roles, and never the auto-approval. It returns the names it created.
func EnsureBoundRBAC(ctx context.Context, c kubernetes.Interface) ([]string, error) {
	var created []string
	for _, b := range boundBindings {
		meta := metav1.ObjectMeta{Name: b.name, Namespace: b.namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "kjoin"}}
		subjects := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: b.group}}
		var err error
		if b.cluster {
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role}}, metav1.CreateOptions{})
		} else {
			_, err = c.RbacV1().RoleBindings(b.namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: b.role}}, metav1.CreateOptions{})
		}
		switch {
		case err == nil:
			created = append(created, b.name)
		case !apierrors.IsAlreadyExists(err):
			return created, fmt.Errorf("create binding %s (to %s): %w", b.name, b.role, err)
		}
	}
	return created, nil
}
