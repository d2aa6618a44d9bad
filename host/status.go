package host

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/token"
)

// Status says what a command waits for, once a wait has lasted a second: on a terminal as one
// live line, rewritten every second with the time left ("[tls-bootstrap] waiting for CSR
// csr-x to be signed (4m31s left)"); elsewhere as a line when the wait starts to show and one
// every 15 s while it lasts, so logs stay readable. Progress lines printed meanwhile go above
// the live line.
type Status struct {
	Out      io.Writer
	Terminal bool
	// Clock drives the updates (a fake one in tests).
	Clock clock.Clock
	// Width is the terminal's width in columns, asked at each update (nil or 0: 80). The live
	// line is fitted to it, its middle cut: a line that wraps leaves a stale row each second.
	Width func() int
}

// fit shortens line to at most width-1 columns (the cursor's column stays free), cutting its
// middle: the phase in front and the elapsed and remaining time at the end stay whole.
func fit(line string, width int) string {
	if width <= 0 {
		width = 80
	}
	r := []rune(line)
	max := width - 1
	if len(r) <= max || max < 10 {
		return line
	}
	tail := max / 2
	head := max - tail - 1
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// Status's timing: a wait shows after showAfter; a non-terminal repeats every every.
const (
	showAfter = time.Second
	every     = 15 * time.Second
)

// liveLine is the live status line on the terminal, "" when none is shown (guarded by logMu).
var liveLine string

// notes are the last thing each phase's current wait met (guarded by logMu): shown in its line.
var notes = map[string]string{}

// Note records what a phase's wait last met (an error, a refusal, who it waits for), shown
// quoted and short in that wait's status line; "" clears it. Retry loops call it with each
// failed attempt, so a wait says why it still waits, not only that it does.
func (e *Env) Note(phase, what string) {
	logMu.Lock()
	defer logMu.Unlock()
	if what == "" {
		delete(notes, phase)
		return
	}
	r := []rune(strings.Join(strings.Fields(token.Redact(what)), " ")) // an echoed input never shows a secret
	if len(r) > 100 {
		r = append(r[:99], '…')
	}
	notes[phase] = string(r)
}

// clearLive removes the live line before other output (logMu held).
func clearLive(w io.Writer) {
	if liveLine != "" {
		fmt.Fprint(w, "\r\033[K")
		liveLine = ""
	}
}

// Waiting shows that phase waits for what, with budget as its limit, until the returned
// function is called (at once, or when the wait ends). Without a Status it does nothing.
func (e *Env) Waiting(phase, what string, budget time.Duration) (done func()) {
	st := e.Status
	if st == nil || st.Out == nil {
		return func() {}
	}
	start := st.Clock.Now()
	stop, stopped := make(chan struct{}), make(chan struct{})
	line := func() string {
		since := st.Clock.Since(start)
		left := budget - since
		if left < 0 {
			left = 0
		}
		last := ""
		if n := notes[phase]; n != "" {
			last = "; last: " + strconv.Quote(n)
		}
		return fmt.Sprintf("[%s] waiting for %s (%s, %s left%s)", phase, what, since.Round(time.Second), left.Round(time.Second), last)
	}
	go func() {
		defer close(stopped)
		next := showAfter
		for {
			select {
			case <-stop:
				return
			case <-st.Clock.After(next):
			}
			logMu.Lock()
			if st.Terminal {
				width := 0
				if st.Width != nil {
					width = st.Width()
				}
				liveLine = fit(line(), width)
				fmt.Fprint(st.Out, "\r\033[K"+liveLine)
				next = time.Second
			} else {
				fmt.Fprintln(st.Out, line())
				next = every
			}
			logMu.Unlock()
		}
	}()
	return func() {
		close(stop)
		<-stopped
		logMu.Lock()
		delete(notes, phase)
		if st.Terminal {
			clearLive(st.Out)
		}
		logMu.Unlock()
	}
}

// PollFor is Poll, shown as a wait for what (Waiting) while it lasts.
func (e *Env) PollFor(ctx context.Context, phase, what string, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	defer e.Waiting(phase, what, timeout)()
	return e.Poll(ctx, interval, timeout, cond)
}
