package output

import (
	"strings"
	"testing"
	"time"
)

// --sort-by orders by the versioned fields: numbers by value (10 after 9), times by instant,
// strings by text, booleans false first, a missing field first; equal keys keep their order.
func TestSortBy(t *testing.T) {
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	nodes := []Node{
		{Name: "a", Ready: true, KubeletVersion: "v1.37.2", JoinedAt: at("2026-12-01T10:00:00Z"), LeaseAge: NewDuration(10 * time.Second)},
		{Name: "b", Ready: false, KubeletVersion: "v1.35.4", JoinedAt: at("2026-11-30T10:00:00Z"), LeaseAge: NewDuration(9 * time.Second)},
		{Name: "c", Ready: true, KubeletVersion: "v1.36.3", JoinedAt: at("2026-12-01T09:00:00Z")},
	}
	names := func(ns []Node) string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return strings.Join(out, ",")
	}
	for expr, want := range map[string]string{
		".leaseAge.seconds":  "c,b,a",
		"{.joinedAt}":        "b,c,a",
		"kubeletVersion":     "b,c,a",
		".ready":             "b,a,c",
		".name":              "a,b,c",
		".no.such.field":     "a,b,c",
		"{.metadata.absent}": "a,b,c",
	} {
		s, err := NewSorter(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		ns := append([]Node{}, nodes...)
		if err := Sort(s, ns); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got := names(ns); got != want {
			t.Errorf("--sort-by %s: %s, want %s", expr, got, want)
		}
	}
	for _, bad := range []string{"", "{.name", ".items[?(@"} {
		if _, err := NewSorter(bad); err == nil {
			t.Errorf("NewSorter(%q) accepted it", bad)
		}
	}
}

// A plain field path that matches nothing in the items' JSON form is refused, as kubectl
// refuses it, naming the fields there are; real paths and other expressions pass.
func TestSorterForRefusesPathsThatMatchNothing(t *testing.T) {
	for _, ok := range []string{".name", "{.leaseAge.seconds}", "joinedAt", ".taints", "{.conditions[0].type}", "{.internalIPs[*]}"} {
		if _, err := NewSorterFor(ok, Node{}); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		".nmae":              `has no field "nmae" (its fields: `,
		".metadata.name":     `an item has no field "metadata"`,
		".leaseAge.secs":     `.leaseAge has no field "secs" (its fields: .leaseAge.seconds, .leaseAge.string)`,
		"{.name.first}":      `.name has no fields`,
		".expires.something": `.expires has no fields`,
	} {
		item := any(Node{})
		if strings.HasPrefix(bad, ".expires") {
			item = Token{}
		}
		_, err := NewSorterFor(bad, item)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", bad, err, want)
		}
	}
	_, err := NewSorterFor(".nmae", Node{})
	if err == nil || !strings.Contains(err.Error(), ".name") || !strings.Contains(err.Error(), ".joinedAt") {
		t.Errorf("the refusal does not list the fields: %v", err)
	}
}
