package tlsbootstrap

import (
	"context"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEnsureReplaceSelfGrantsOnlyNodeDeleteToNodes(t *testing.T) {
	c := fake.NewClientset()
	ctx := context.Background()
	created, err := EnsureReplaceSelf(ctx, c)
	if err != nil || !created {
		t.Fatalf("created %v err %v", created, err)
	}
	role, err := c.RbacV1().ClusterRoles().Get(ctx, ReplaceSelf, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"delete"}}}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("rules %+v, want exactly delete on nodes", role.Rules)
	}
	rb, err := c.RbacV1().ClusterRoleBindings().Get(ctx, ReplaceSelf, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.RoleRef.Name != ReplaceSelf || len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "Group" || rb.Subjects[0].Name != "system:nodes" {
		t.Errorf("binding %+v", rb)
	}
	if created, err := EnsureReplaceSelf(ctx, c); err != nil || created {
		t.Errorf("second call: created %v err %v, want nothing new", created, err)
	}
}
