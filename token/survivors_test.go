package token

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Every 64-hex-digit run is hidden, not only the first hex run of the text (a word such as
// "cafe" or "add" is one, too).
func TestRedactFindsTheKeyAfterOtherHexRuns(t *testing.T) {
	key := strings.Repeat("0a", 32)
	for _, in := range []string{"cafe " + key, "add 1 then " + key + " and " + key} {
		if got := Redact(in); strings.Contains(got, key) {
			t.Errorf("Redact(%q) = %q: the key is still there", in, got)
		}
	}
}

// TTL 0 is a token that never expires (kubeadm's --ttl 0), not an invalid one.
func TestZeroTTLIsValid(t *testing.T) {
	tok, _ := Parse("abcdef.0123456789abcdef")
	if err := (&Spec{Token: tok, Usages: DefaultUsages, Groups: []string{DefaultGroup}}).Validate(); err != nil {
		t.Errorf("TTL 0 refused: %v", err)
	}
}

// A token without extra groups has no auth-extra-groups key at all (an empty value would be
// read by the authenticator as a group list with one empty name).
func TestNoGroupsNoGroupsKey(t *testing.T) {
	tok, _ := Parse("abcdef.0123456789abcdef")
	if v, ok := (&Spec{Token: tok, Usages: DefaultUsages}).Secret(time.Now()).Data["auth-extra-groups"]; ok {
		t.Errorf("auth-extra-groups = %q for a token without groups", v)
	}
}

// Create answers with the token it made, and refuses a token ID that exists.
func TestCreateAnswersWhatItMade(t *testing.T) {
	c := fake.NewClientset()
	tok, _ := Parse("abcdef.0123456789abcdef")
	info, err := Create(context.Background(), c, &Spec{Token: tok, Usages: DefaultUsages, Description: "d"}, time.Now())
	if err != nil || info == nil || info.ID != "abcdef" || info.Description != "d" {
		t.Fatalf("Create: %+v %v", info, err)
	}
	if info, err := Create(context.Background(), c, &Spec{Token: tok, Usages: DefaultUsages}, time.Now()); err == nil {
		t.Errorf("a second token abcdef was accepted: %+v", info)
	}
}

// List sorts by ID and leaves other Secrets out.
func TestListSortsAndFilters(t *testing.T) {
	c := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "kube-system"}, Data: map[string][]byte{"token-id": []byte("aaaaaa")}})
	for _, s := range []string{"zzzzzz.0123456789abcdef", "bbbbbb.0123456789abcdef", "mmmmmm.0123456789abcdef"} {
		tok, _ := Parse(s)
		if _, err := Create(context.Background(), c, &Spec{Token: tok, Usages: DefaultUsages}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	l, err := List(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range l {
		ids = append(ids, i.ID)
	}
	if strings.Join(ids, ",") != "bbbbbb,mmmmmm,zzzzzz" {
		t.Errorf("List = %v, want the three tokens sorted by ID", ids)
	}
}
