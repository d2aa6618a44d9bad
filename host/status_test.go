package host

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// step advances the fake clock by d once the status goroutine waits on it.
func step(t *testing.T, c *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !c.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the status line never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	c.Step(d)
}

func waitFor(t *testing.T, b *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %q", want, b.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// On a terminal a wait longer than a second shows as one live line with the time left,
// rewritten every second; a progress line clears it first; the end of the wait clears it.
func TestStatusLineOnATerminal(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	out := &syncBuffer{}
	e := &Env{Out: out, Status: &Status{Out: out, Terminal: true, Clock: clk}}
	done := e.Waiting("tls-bootstrap", "CSR csr-1 to be signed", 5*time.Minute)
	step(t, clk, time.Second)
	waitFor(t, out, "\r\033[K[tls-bootstrap] waiting for CSR csr-1 to be signed (1s, 4m59s left)")
	step(t, clk, time.Second)
	waitFor(t, out, "(2s, 4m58s left)")
	e.Logf("tls-bootstrap", "a progress line")
	if !strings.Contains(out.String(), "left)\r\033[K[tls-bootstrap] a progress line\n") {
		t.Errorf("the progress line did not clear the live line first: %q", out.String())
	}
	done()
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("a terminal's status is not one rewritten line: %q", out.String())
	}
}

// Elsewhere (a log, a pipe) a wait shows as a line when it has lasted a second and one every
// 15 s; a wait shorter than a second shows nothing.
func TestStatusLinesInALog(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	out := &syncBuffer{}
	e := &Env{Out: out, Status: &Status{Out: out, Clock: clk}}
	e.Waiting("discovery", "cluster-info", time.Minute)()
	if out.String() != "" {
		t.Fatalf("a wait of no time printed %q", out.String())
	}
	clk = clocktesting.NewFakeClock(time.Unix(0, 0)) // the first wait's timer stays registered on the old one
	e.Status.Clock = clk
	done := e.Waiting("wait-ready", "Node w1 to be Ready", 4*time.Minute)
	step(t, clk, time.Second)
	waitFor(t, out, "[wait-ready] waiting for Node w1 to be Ready (1s, 3m59s left)\n")
	step(t, clk, 15*time.Second)
	waitFor(t, out, "(16s, 3m44s left)\n")
	done()
	if strings.Contains(out.String(), "\r") || strings.Count(out.String(), "\n") != 2 {
		t.Errorf("log lines: %q", out.String())
	}
}

// syncBuffer is written by the status goroutine and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The live line fits the terminal (its middle cut), so it never wraps into a stale row; the
// phase and the time left stay whole. Without a width it fits 80 columns.
func TestStatusLineFitsTheTerminal(t *testing.T) {
	what := "cluster-info from control-plane.example.internal:6443, verified by the pinned CA and signed for token abcdef"
	for _, width := range []int{0, 60, 200} {
		clk := clocktesting.NewFakeClock(time.Unix(0, 0))
		out := &syncBuffer{}
		w := width
		e := &Env{Out: out, Status: &Status{Out: out, Terminal: true, Clock: clk, Width: func() int { return w }}}
		done := e.Waiting("discovery", what, 5*time.Minute)
		step(t, clk, time.Second)
		waitFor(t, out, "(1s, 4m59s left)")
		done()
		line := strings.TrimPrefix(strings.SplitN(out.String(), "\r\033[K", 3)[1], "")
		cols := width
		if cols == 0 {
			cols = 80
		}
		if n := len([]rune(line)); n > cols-1 || !strings.HasPrefix(line, "[discovery] waiting for ") {
			t.Errorf("width %d: %d columns: %q", width, n, line)
		}
		if width == 200 && strings.Contains(line, "…") {
			t.Errorf("a line that fits was cut: %q", line)
		}
	}
}

// A wait line says what the wait last met (quoted, short); the note ends with the wait.
func TestStatusLineNamesTheLastError(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	out := &syncBuffer{}
	e := &Env{Out: out, Status: &Status{Out: out, Clock: clk}}
	done := e.Waiting("discovery", "cluster-info from cp:6443", 5*time.Minute)
	e.Note("discovery", "cluster-info not readable yet (Get \"https://cp:6443/api\": dial tcp 10.0.0.1:6443: connect: connection refused); retrying")
	step(t, clk, time.Second)
	waitFor(t, out, `(1s, 4m59s left; last: "cluster-info not readable yet (Get \"https://cp:6443/api\": dial tcp 10.0.0.1:6443: connect: connecti…")`)
	done()
	clk2 := clocktesting.NewFakeClock(time.Unix(0, 0))
	e.Status.Clock = clk2
	done2 := e.Waiting("discovery", "again", time.Minute)
	step(t, clk2, time.Second)
	waitFor(t, out, "again (1s, 59s left)\n")
	done2()
}

// A note echoes errors, which may echo inputs: anything shaped like a token is hidden.
func TestNoteNeverShowsASecret(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	out := &syncBuffer{}
	e := &Env{Out: out, Status: &Status{Out: out, Clock: clk}}
	done := e.Waiting("discovery", "cluster-info", time.Minute)
	e.Note("discovery", "bad endpoint abcdef.0123456789abcdef: no such host")
	step(t, clk, time.Second)
	waitFor(t, out, "abcdef.<hidden>")
	done()
	if strings.Contains(out.String(), "0123456789abcdef") {
		t.Errorf("the wait line shows the secret: %q", out.String())
	}
}
