// Package clockguard sets the guard of a session clock: how long before
// the server can end a session the client ends it, so that a hold tied to
// the session is over on the client before the server can hand it to
// another session, on a loaded machine too. Both adapters count their
// session's deadline as the send time of the latest contact the server
// acknowledged plus the timeout it granted (the server cannot end the
// session earlier), and end the session at that deadline less Guard.
//
// The guard is a fixed margin plus an allowance for the process's own
// delays. Between the deadline and the moment a holder sees its hold end,
// the process waits for the CPU twice: the timer that ends the session
// fires late, and the goroutine that waits on the hold's context wakes
// late. A busy machine stretches both (on 2 cores with three busy loops
// beside the process, a few milliseconds at the 99th percentile; with the
// race detector and other tests beside it, tens), so the allowance is
// twice the 99th percentile of how late this process's timers fire,
// measured now, by a sampler:
//
//	guard = Margin(timeout) + 2 × Lateness(), at most Limit(timeout)
//	Margin(timeout) = timeout/8, at most 1 s
//	Limit(timeout)  = timeout/4
//
// The sampler is one goroutine for the whole process, whatever the number
// of sessions: it sets a timer every SamplePeriod and records how late it
// fired, keeping the last Window samples (10 s; kept across a pause of
// less than that while no session is open). Lateness is their 99th
// percentile, or how late the pending sample already is, if that is more:
// a process that was stopped (SIGSTOP, a VM pause) or starved counts the
// stall at once, before its sampler runs again. It runs while at least one
// session uses it (Use), and costs 20 timer wake-ups a second.
//
// What the guard assumes: the delays after the deadline stay within the
// margin plus twice the recent 99th percentile (a stall that begins after
// the last sample and outlasts that is not foreseen), and the allowance
// fits under Limit (at a 2 s timeout, a 99th percentile of up to 125 ms).
// Beyond that the guard stays at Limit and the margin shrinks by the
// excess: a session ends earlier still only at the cost of being kept
// alive at all, for the renewals (etcd) and the answers that move the
// deadline (ZooKeeper) must come before the end.
package clockguard

import (
	"slices"
	gosync "sync"
	"sync/atomic"
	"time"
)

const (
	// SamplePeriod is how often the sampler measures the lateness of a
	// timer.
	SamplePeriod = 50 * time.Millisecond
	// Window is how many of the latest samples Lateness looks at: the
	// last 10 s.
	Window = 200
)

// Margin returns the part of the guard of a session of the given timeout
// that does not depend on load: an eighth of the timeout (250 ms at 2 s),
// at most a second.
func Margin(timeout time.Duration) time.Duration { return min(timeout/8, time.Second) }

// Limit returns the most the guard of a session of the given timeout can
// be: a quarter of the timeout.
func Limit(timeout time.Duration) time.Duration { return timeout / 4 }

// Guard returns the guard of a session of the given timeout now:
// Margin(timeout) plus twice Lateness(), at most Limit(timeout).
func Guard(timeout time.Duration) time.Duration { return guard(timeout, Lateness()) }

// guard is Guard for a given lateness.
func guard(timeout, late time.Duration) time.Duration {
	return min(Margin(timeout)+2*late, Limit(timeout))
}

// Lateness returns how late this process's timers fire now: the 99th
// percentile of the latest samples, or how late the pending sample is
// already, whichever is more. It is 0 while no session uses the sampler.
func Lateness() time.Duration {
	late := time.Duration(sampler.p99.Load())
	if due := sampler.due.Load(); due != 0 {
		late = max(late, time.Since(epoch)-time.Duration(due))
	}
	return late
}

// Use starts the sampler, unless it runs already, and returns the function
// that stops using it: the last user's call stops the sampler and waits for
// its goroutine to exit. The function may be called more than once; only
// the first call counts. Use is safe for concurrent use.
func Use() (done func()) {
	sampler.mu.Lock()
	defer sampler.mu.Unlock()
	sampler.users++
	if sampler.users == 1 {
		now := time.Since(epoch)
		// Samples taken less than a window ago still count: sessions
		// that come and go keep what was measured.
		if now-sampler.stopped > SamplePeriod*Window {
			sampler.w = window{}
		}
		sampler.p99.Store(int64(sampler.w.p99()))
		sampler.stop = make(chan struct{})
		sampler.exited = make(chan struct{})
		sampler.due.Store(int64(now + SamplePeriod))
		go sample(&sampler.w, sampler.stop, sampler.exited)
	}
	var once gosync.Once
	return func() { once.Do(leave) }
}

// leave ends one use of the sampler.
func leave() {
	sampler.mu.Lock()
	defer sampler.mu.Unlock()
	sampler.users--
	if sampler.users > 0 {
		return
	}
	close(sampler.stop)
	<-sampler.exited
	sampler.stopped = time.Since(epoch)
	sampler.due.Store(0)
	sampler.p99.Store(0)
}

// epoch is the origin of the sampler's monotonic times.
var epoch = time.Now()

// sampler is the process's one sampler. p99 and due are read without mu:
// p99 in nanoseconds, due in nanoseconds since epoch (0: not sampling).
var sampler struct {
	mu      gosync.Mutex
	users   int
	stop    chan struct{} // closed to stop the goroutine
	exited  chan struct{} // closed when it has exited
	w       window        // the samples: the goroutine's while it runs
	stopped time.Duration // when it last stopped, since epoch

	p99 atomic.Int64
	due atomic.Int64
}

// sample is the sampler's goroutine: it measures how late its timer fires,
// every SamplePeriod, until stop is closed.
func sample(w *window, stop <-chan struct{}, exited chan<- struct{}) {
	defer close(exited)
	t := time.NewTimer(SamplePeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		now := time.Since(epoch)
		w.add(max(now-time.Duration(sampler.due.Load()), 0))
		sampler.p99.Store(int64(w.p99()))
		sampler.due.Store(int64(now + SamplePeriod))
		t.Reset(SamplePeriod)
	}
}

// window holds the latest Window samples.
type window struct {
	samples [Window]time.Duration
	n       int // samples recorded, at most Window
	next    int // where the next one goes
	sorted  [Window]time.Duration
}

func (w *window) add(d time.Duration) {
	w.samples[w.next] = d
	w.next = (w.next + 1) % Window
	w.n = min(w.n+1, Window)
}

// p99 returns the 99th percentile of the samples (the largest while there
// are fewer than 100), or 0 when there are none.
func (w *window) p99() time.Duration {
	if w.n == 0 {
		return 0
	}
	s := w.sorted[:w.n]
	copy(s, w.samples[:w.n])
	slices.Sort(s)
	// The smallest sample that at least 99% of them do not exceed.
	return s[(99*w.n+99)/100-1]
}
