package workflow

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

type state struct {
	ran     []string
	changes int
}

func env() *host.Env {
	return &host.Env{Out: io.Discard, Clock: clocktesting.NewFakeClock(time.Unix(0, 0))}
}

func flow(fail string) []Phase[*state] {
	step := func(name string, change bool) func(context.Context, *host.Env, *state) error {
		return func(_ context.Context, _ *host.Env, s *state) error {
			s.ran = append(s.ran, name)
			if change {
				s.changes++
			}
			if name == fail {
				return errors.New("boom")
			}
			return nil
		}
	}
	return []Phase[*state]{
		{Name: "check", ReadOnly: true, Run: step("check", false)},
		{Name: "write", Needs: []string{"check"}, Run: step("write", true)},
		{Name: "noop", Run: step("noop", false)},
		{Name: "cond", Skip: func(*state) string { return "not needed" }, Run: step("cond", true)},
		{Name: "last", Run: step("last", true)},
	}
}

func statuses(rs []Result) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name+"="+r.Status)
	}
	return strings.Join(out, " ")
}

// Run reports each phase as ran, unchanged (a writing phase that recorded no change) or
// skipped (by --skip-phases or by the phase's own reason), and calls Done after each phase
// that completed, in order.
func TestRunStatuses(t *testing.T) {
	s := &state{}
	var done []string
	rs, err := Run(context.Background(), env(), s, flow(""), Options{Skip: []string{"last"}},
		Hooks[*state]{Changes: func(s *state) int { return s.changes }, Done: func(p Phase[*state]) error { done = append(done, p.Name); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statuses(rs), "check=ran write=ran noop=unchanged cond=skipped last=skipped"; got != want {
		t.Fatalf("statuses %q, want %q", got, want)
	}
	if rs[3].Reason != "not needed" || rs[4].Reason != "--skip-phases" {
		t.Fatalf("skip reasons %q, %q", rs[3].Reason, rs[4].Reason)
	}
	if got := strings.Join(done, ","); got != "check,write,noop" {
		t.Fatalf("Done called for %s", got)
	}
}

// A phase run alone brings the read-only phases it needs, and nothing else.
func TestRunOnlyWithNeeds(t *testing.T) {
	s := &state{}
	rs, err := Run(context.Background(), env(), s, flow(""), Options{Only: []string{"write"}}, Hooks[*state]{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.ran, ","); got != "check,write" || len(rs) != 2 {
		t.Fatalf("ran %s (%d results)", got, len(rs))
	}
}

// The first failure stops the run, is wrapped with the phase's name and is the last result.
func TestRunStopsAtFailure(t *testing.T) {
	s := &state{}
	rs, err := Run(context.Background(), env(), s, flow("write"), Options{}, Hooks[*state]{})
	if err == nil || !strings.Contains(err.Error(), "phase write: boom") {
		t.Fatalf("err %v", err)
	}
	if got := statuses(rs); got != "check=ran write=failed" || strings.Join(s.ran, ",") != "check,write" {
		t.Fatalf("statuses %q, ran %v", got, s.ran)
	}
}

// Unknown phase names are a usage error before any phase (or the Before hook) runs.
func TestRunRefusesUnknownPhase(t *testing.T) {
	s := &state{}
	before := false
	_, err := Run(context.Background(), env(), s, flow(""), Options{Skip: []string{"wirte"}}, Hooks[*state]{Before: func() error { before = true; return nil }})
	var oe *operr.Error
	if !errors.As(err, &oe) || oe.Code != operr.Usage || !strings.Contains(oe.What, "want one of check, write") {
		t.Fatalf("err %#v", err)
	}
	if before || len(s.ran) > 0 {
		t.Fatalf("ran %v before refusing (Before called: %v)", s.ran, before)
	}
}

// An interrupted context stops the run between phases, naming the phase it did not start.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &state{}
	_, err := Run(ctx, env(), s, flow(""), Options{}, Hooks[*state]{Again: "run it again"})
	if err == nil || !strings.Contains(err.Error(), "before phase check") || len(s.ran) > 0 {
		t.Fatalf("err %v, ran %v", err, s.ran)
	}
}
