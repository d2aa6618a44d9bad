package token

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

func TestSecretIsKubeadms(t *testing.T) {
	tok, _ := Parse("abcdef.0123456789abcdef")
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	s := (&Spec{Token: tok, TTL: 24 * time.Hour, Usages: DefaultUsages, Groups: []string{DefaultGroup}, Description: "d"}).Secret(now)
	want := map[string]string{
		"token-id": "abcdef", "token-secret": "0123456789abcdef", "expiration": "2026-12-01T00:00:00Z",
		"usage-bootstrap-signing": "true", "usage-bootstrap-authentication": "true",
		"auth-extra-groups": DefaultGroup, "description": "d",
	}
	if s.Name != "bootstrap-token-abcdef" || s.Namespace != "kube-system" || s.Type != "bootstrap.kubernetes.io/token" || len(s.Data) != len(want) {
		t.Fatalf("secret %s/%s type %s data %v", s.Namespace, s.Name, s.Type, s.Data)
	}
	for k, v := range want {
		if string(s.Data[k]) != v {
			t.Errorf("%s = %q, want %q", k, s.Data[k], v)
		}
	}
	info, ok := FromSecret(s)
	if !ok || info.ID != "abcdef" || info.Expires == nil || len(info.Usages) != 2 || info.Groups[0] != DefaultGroup {
		t.Errorf("round trip: %+v %v", info, ok)
	}
}

func TestNoExpiryAndValidation(t *testing.T) {
	tok, _ := Parse("abcdef.0123456789abcdef")
	if _, ok := (&Spec{Token: tok}).Secret(time.Now()).Data["expiration"]; ok {
		t.Error("TTL 0 must write no expiration")
	}
	for _, bad := range []*Spec{{TTL: -time.Second}, {Usages: []string{"nope"}}, {Groups: []string{"not-a-bootstrap-group"}}} {
		if bad.Validate() == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

func TestCreateListDelete(t *testing.T) {
	c := fake.NewClientset()
	ctx := context.Background()
	tok, _ := Generate()
	if _, err := Create(ctx, c, &Spec{Token: tok, TTL: time.Hour, Usages: DefaultUsages, Groups: []string{DefaultGroup}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	l, err := List(ctx, c)
	if err != nil || len(l) != 1 || l[0].ID != tok.ID {
		t.Fatalf("list %+v %v", l, err)
	}
	if _, err := Delete(ctx, c, tok.Full()); err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(ctx, c, tok.ID); !errors.Is(err, ErrUnknown) {
		t.Errorf("second delete: %v", err)
	}
	if _, err := Delete(ctx, c, "NOPE"); err == nil || errors.Is(err, ErrUnknown) {
		t.Errorf("malformed id: %v", err)
	}
}
