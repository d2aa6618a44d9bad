package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The state is read from a real etcd's metrics page (testdata: a v3.7.0 learner's, captured in
// the lab on 2026-12-03 while its publish waited, having come inside the leader's snapshot).
func TestMetricsStateReadsARealMetricsPage(t *testing.T) {
	page, err := os.ReadFile("testdata/metrics-stalled-learner-v3.7.0.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(page)
	}))
	defer srv.Close()
	st, err := MetricsState(srv.Client(), srv.URL)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (LocalState{Applied: 368, Pending: 1}); st != want {
		t.Errorf("state %+v, want %+v: the page's applied index and its one pending publish", st, want)
	}
	if _, err := MetricsState(srv.Client(), srv.URL+"/nothing")(context.Background()); err == nil {
		t.Error("a page that is not found was read as a state")
	}
}

func TestParseLocalStateNeedsBothValues(t *testing.T) {
	for _, page := range []string{
		"etcd_server_proposals_applied_total 12\n",
		"etcd_server_proposals_pending 1\n",
		"# HELP etcd_server_proposals_applied_total x\netcd_server_proposals_applied_total nope\netcd_server_proposals_pending 0\n",
	} {
		if st, err := ParseLocalState(strings.NewReader(page)); err == nil {
			t.Errorf("%q read as %+v", page, st)
		}
	}
	st, err := ParseLocalState(strings.NewReader("etcd_server_proposals_applied_total 1.2345e+06\netcd_server_proposals_pending 0\n"))
	if err != nil || st != (LocalState{Applied: 1234500}) {
		t.Errorf("%+v, %v", st, err)
	}
}

// With the learner's own state, a stalled publish is known for certain (no grace period: the
// grace here is an hour), a learner still receiving the snapshot is never restarted however
// long it takes, and a publish applied as a log entry is left alone.
func TestJoinKnowsAStalledPublishFromTheLearnersState(t *testing.T) {
	const voterApplied = 500
	type phase struct {
		until time.Duration // from the first read
		st    LocalState
	}
	for _, tc := range []struct {
		name        string
		states      []phase // the learner's state over time; the last holds
		grace       time.Duration
		readErr     bool
		wantRestart bool
		wantLog     string
	}{
		{name: "publish inside the snapshot", grace: time.Hour, wantRestart: true, wantLog: "inside the leader's snapshot",
			states: []phase{{60 * time.Millisecond, LocalState{0, 1}}, {0, LocalState{520, 1}}}},
		{name: "still receiving the snapshot", grace: 20 * time.Millisecond,
			states: []phase{{300 * time.Millisecond, LocalState{0, 1}}, {0, LocalState{510, 0}}}},
		{name: "published as a log entry, read between apply and answer", grace: 20 * time.Millisecond,
			states: []phase{{50 * time.Millisecond, LocalState{505, 1}}, {0, LocalState{510, 0}}}},
		{name: "state unreadable: judged by time", grace: 40 * time.Millisecond, readErr: true, wantRestart: true, wantLog: "judging it by time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			var logs []string
			j, _ := newJoin(f, &fakeLock{}, &logs)
			j.StallGrace = tc.grace
			j.Logf = func(format string, a ...any) { logs = append(logs, fmt.Sprintf(format, a...)) }
			var mu sync.Mutex
			serving, restarts, reads := false, 0, 0
			var first time.Time
			state := func() LocalState {
				if first.IsZero() {
					first = time.Now()
				}
				for _, p := range tc.states {
					if p.until == 0 || time.Since(first) < p.until {
						return p.st
					}
				}
				return LocalState{}
			}
			j.Local = func(context.Context) (LocalState, error) {
				mu.Lock()
				defer mu.Unlock()
				reads++
				if tc.readErr {
					return LocalState{}, errors.New("connection refused")
				}
				st := state()
				if st.Pending == 0 && st.Applied > 0 {
					serving = true
				}
				return st, nil
			}
			j.Status = func(_ context.Context, ep string) (*clientv3.StatusResponse, error) {
				mu.Lock()
				defer mu.Unlock()
				if ep == "https://10.0.0.2:2379" && !serving {
					return nil, context.DeadlineExceeded
				}
				return &clientv3.StatusResponse{Header: &etcdserverpb.ResponseHeader{}, Leader: 1, RaftAppliedIndex: voterApplied}, nil
			}
			j.Restart = func() error {
				mu.Lock()
				defer mu.Unlock()
				restarts++
				serving = true // the restarted member publishes as a log entry at once
				return nil
			}
			j.Timeout = 10 * time.Second
			if _, err := j.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := restarts == 1; got != tc.wantRestart || restarts > 1 {
				t.Errorf("restarted %d times, want restart: %v; log %q", restarts, tc.wantRestart, logs)
			}
			if reads == 0 {
				t.Error("the learner's state was never read")
			}
			if tc.wantLog != "" && !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, tc.wantLog) }) {
				t.Errorf("no log line says %q: %q", tc.wantLog, logs)
			}
		})
	}
}
