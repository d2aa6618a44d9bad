package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Client builds a Kubernetes client for cfg through the environment's effects. In a plan (a
// dry run) every request that would change the cluster is sent as a server-side dry run
// (dryRun=All: the API server authorizes, validates and admits it, and stores nothing) and
// recorded as a planned API effect, so a dry run leaves the cluster as it was whatever a
// phase asks; reads pass as they are. Applied, the client is cfg's own.
func (e *Env) Client(cfg *rest.Config) (kubernetes.Interface, error) {
	if fx := e.Fx(); fx.Planning() {
		cfg = rest.CopyConfig(cfg)
		// JSON bodies (client-go sends protobuf by default), so that a DELETE's options can
		// be made a dry run.
		cfg.ContentType = "application/json"
		log, ok := fx.(interface{ add(Effect) })
		if !ok {
			return nil, fmt.Errorf("a plan's effects must keep host's effect log (Plan())")
		}
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &planTransport{next: rt, fx: log} })
	}
	return e.NewClient(cfg)
}

// planTransport sends every mutating request as a server-side dry run, and records it.
type planTransport struct {
	next http.RoundTripper
	fx   interface{ add(Effect) }
}

func (t *planTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !mutates(req) {
		return t.next.RoundTrip(req)
	}
	r, err := dryRunRequest(req)
	if err != nil {
		return nil, err
	}
	t.fx.add(Effect{Kind: EffectAPI, Detail: fmt.Sprintf("%s %s (server-side dry run)", req.Method, req.URL.Path), Changed: true, Sent: true})
	return t.next.RoundTrip(r)
}

// mutates reports whether req would change the cluster: a write that is not a review (a
// TokenReview, SubjectAccessReview or SelfSubjectReview stores nothing).
func mutates(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return !strings.HasSuffix(req.URL.Path, "reviews")
}

// dryRunRequest is req as a server-side dry run: dryRun=All in its query, and for a DELETE
// also in its DeleteOptions body (the API server reads a DELETE's options from its body when
// it has one, and then ignores the query). A body that is not JSON is refused rather than
// sent as a real change.
func dryRunRequest(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	q := r.URL.Query()
	q.Set("dryRun", metav1.DryRunAll)
	r.URL.RawQuery = q.Encode()
	if req.Method != http.MethodDelete || req.Body == nil || req.Body == http.NoBody {
		return r, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("dry run of %s %s: read its body: %w", req.Method, req.URL.Path, err)
	}
	if len(bytes.TrimSpace(b)) > 0 {
		opts := map[string]any{}
		if err := json.Unmarshal(b, &opts); err != nil {
			return nil, fmt.Errorf("dry run of %s %s: its options are not JSON, so it cannot be sent as a server-side dry run: %w", req.Method, req.URL.Path, err)
		}
		opts["dryRun"] = []string{metav1.DryRunAll}
		if b, err = json.Marshal(opts); err != nil {
			return nil, err
		}
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return r, nil
}
