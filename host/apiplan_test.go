package host

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// seen is one request as the API server got it: method, path, dryRun from its query and,
// for a DELETE, from its options body.
type seen struct {
	method, path, queryDryRun string
	bodyDryRun                []string
}

// apiServer answers every request with an empty object of the right shape and records it.
func apiServer(t *testing.T) (*httptest.Server, func() []seen) {
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, path: r.URL.Path, queryDryRun: r.URL.Query().Get("dryRun")}
		if r.Method == http.MethodDelete {
			b, _ := io.ReadAll(r.Body)
			var opts metav1.DeleteOptions
			_ = json.Unmarshal(b, &opts)
			s.bodyDryRun = opts.DryRun
		}
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "selfsubjectreviews"):
			_, _ = w.Write([]byte(`{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1"}`))
		case r.Method == http.MethodDelete:
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
		default:
			_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"w1"}}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen { mu.Lock(); defer mu.Unlock(); return append([]seen(nil), got...) }
}

// clientOf is a client of srv built through e, as kjoin builds its clients (client-go's
// defaults: protobuf bodies).
func clientOf(t *testing.T, e *Env, srv *httptest.Server) kubernetes.Interface {
	t.Helper()
	e.NewClient = func(cfg *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(cfg) }
	c, err := e.Client(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// calls makes one read, one review and three changes (create, patch, delete).
func calls(ctx context.Context, c kubernetes.Interface) []error {
	_, e1 := c.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
	_, e2 := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	_, e3 := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, metav1.CreateOptions{})
	_, e4 := c.CoreV1().Nodes().Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	e5 := c.CoreV1().Nodes().Delete(ctx, "w1", metav1.DeleteOptions{})
	return []error{e1, e2, e3, e4, e5}
}

// In a plan every change reaches the API server as a server-side dry run (a DELETE's options
// body says so too, since the server then ignores the query) and is recorded; reads and
// reviews pass as they are. Applied, nothing is added.
func TestPlannedClientSendsChangesAsServerSideDryRuns(t *testing.T) {
	ctx := context.Background()
	for _, planning := range []bool{true, false} {
		srv, got := apiServer(t)
		e := &Env{Paths: Paths{Root: t.TempDir()}}
		if planning {
			e.Effects = Plan()
		}
		for i, err := range calls(ctx, clientOf(t, e, srv)) {
			if err != nil {
				t.Fatalf("planning %v: call %d: %v", planning, i, err)
			}
		}
		want := map[string]bool{"GET": false, "POST /api/v1/nodes": planning, "PATCH": planning, "DELETE": planning}
		for _, s := range got() {
			key := s.method
			if s.method == http.MethodPost {
				key = "POST " + s.path
			}
			dry := s.queryDryRun == metav1.DryRunAll
			if strings.Contains(s.path, "selfsubjectreviews") {
				if dry {
					t.Errorf("planning %v: a review was sent as a dry run", planning)
				}
				continue
			}
			if w, ok := want[key]; !ok || dry != w {
				t.Errorf("planning %v: %s %s dryRun=%q, want dry run %v", planning, s.method, s.path, s.queryDryRun, w)
			}
			if s.method == http.MethodDelete && (len(s.bodyDryRun) == 1) != planning {
				t.Errorf("planning %v: the DELETE's options say dryRun %v", planning, s.bodyDryRun)
			}
		}
		var recorded []string
		for _, f := range e.Fx().Log() {
			recorded = append(recorded, f.Detail)
			if !f.Sent || f.Kind != EffectAPI {
				t.Errorf("planning %v: %+v is not marked as a request sent as a dry run", planning, f)
			}
		}
		if n := len(recorded); (planning && n != 3) || (!planning && n != 0) {
			t.Errorf("planning %v: recorded %q", planning, recorded)
		}
	}
}

// A change whose options are not JSON cannot be made a dry run: it is refused, never sent.
func TestPlannedClientRefusesWhatItCannotDryRun(t *testing.T) {
	srv, got := apiServer(t)
	req, err := http.NewRequest(http.MethodDelete, srv.URL+"/api/v1/nodes/w1", strings.NewReader("k8s\x00protobuf"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&planTransport{next: http.DefaultTransport, fx: &planned{}}).RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "cannot be sent as a server-side dry run") {
		t.Fatalf("err %v", err)
	}
	for _, s := range got() {
		if s.method == http.MethodDelete {
			t.Errorf("the DELETE reached the API server: %+v", s)
		}
	}
}
