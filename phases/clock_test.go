package phases

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// autoClock is a fake clock that never sleeps: every wait advances it at once. Phase tests
// run their waits, retries and timeouts on it, fast and deterministic.
type autoClock struct {
	mu  sync.Mutex
	now time.Time
}

func newAutoClock() *autoClock { return &autoClock{now: time.Now()} }

func (c *autoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *autoClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *autoClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

func (c *autoClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.advance(d)
	return ch
}

func (c *autoClock) Sleep(d time.Duration)                 { c.advance(d) }
func (c *autoClock) Tick(d time.Duration) <-chan time.Time { return c.After(d) }
func (c *autoClock) NewTimer(d time.Duration) clock.Timer  { return &autoTimer{c: c.After(d)} }

type autoTimer struct{ c <-chan time.Time }

func (t *autoTimer) C() <-chan time.Time      { return t.c }
func (t *autoTimer) Stop() bool               { return true }
func (t *autoTimer) Reset(time.Duration) bool { return true }
