package clockguard

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGuard(t *testing.T) {
	for _, c := range []struct {
		timeout, late, want time.Duration
	}{
		{2 * time.Second, 0, 250 * time.Millisecond},
		{2 * time.Second, 4 * time.Millisecond, 258 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond, 450 * time.Millisecond},
		{2 * time.Second, 200 * time.Millisecond, 500 * time.Millisecond}, // at the limit
		{10 * time.Second, 0, time.Second},                                // the margin's cap
		{30 * time.Second, 50 * time.Millisecond, 1100 * time.Millisecond},
		{time.Second, 0, 125 * time.Millisecond},
	} {
		if got := guard(c.timeout, c.late); got != c.want {
			t.Errorf("guard(%v, %v) = %v; want %v", c.timeout, c.late, got, c.want)
		}
	}
}

func TestWindowP99(t *testing.T) {
	ms := time.Millisecond
	fill := func(n int, d time.Duration, w *window) {
		for range n {
			w.add(d)
		}
	}
	var w window
	if got := w.p99(); got != 0 {
		t.Errorf("p99 of no samples = %v; want 0", got)
	}
	w.add(7 * ms)
	if got := w.p99(); got != 7*ms {
		t.Errorf("p99 of one sample = %v; want 7ms", got)
	}
	// Fewer than 100 samples: the largest.
	fill(50, ms, &w)
	if got := w.p99(); got != 7*ms {
		t.Errorf("p99 of 51 samples = %v; want the largest, 7ms", got)
	}
	// A full window ignores its two largest samples, not three.
	w = window{}
	fill(Window-2, ms, &w)
	fill(2, time.Second, &w)
	if got := w.p99(); got != ms {
		t.Errorf("p99 with 2 outliers in %d = %v; want 1ms", Window, got)
	}
	w.add(time.Second) // pushes a 1ms sample out
	if got := w.p99(); got != time.Second {
		t.Errorf("p99 with 3 outliers in %d = %v; want 1s", Window, got)
	}
	// Old samples leave the window.
	fill(Window, 2*ms, &w)
	if got := w.p99(); got != 2*ms {
		t.Errorf("p99 after a window of 2ms samples = %v; want 2ms", got)
	}
}

// TestUse checks the sampler's lifetime: it runs while anyone uses it, a
// second call of a done function counts for nothing, and the last one
// stops it (goleak checks its goroutine has exited).
func TestUse(t *testing.T) {
	if got := Lateness(); got != 0 {
		t.Errorf("Lateness() with no user = %v; want 0", got)
	}
	a, b := Use(), Use()
	a()
	a()
	sampler.mu.Lock()
	users := sampler.users
	sampler.mu.Unlock()
	if users != 1 {
		t.Errorf("users after one of two stopped twice = %d; want 1", users)
	}
	if got := Lateness(); got < 0 {
		t.Errorf("Lateness() = %v; want at least 0", got)
	}
	b()
	if got := Lateness(); got != 0 {
		t.Errorf("Lateness() after the last user stopped = %v; want 0", got)
	}
	if got := Guard(2 * time.Second); got != Margin(2*time.Second) {
		t.Errorf("Guard(2s) with no user = %v; want the margin, %v", got, Margin(2*time.Second))
	}
}

// TestLatenessCountsStall: a sample that is overdue counts at once, before
// the sampler has run again: a process that was stopped or starved sees
// its stall in the guard on its first look.
func TestLatenessCountsStall(t *testing.T) {
	defer Use()()
	const stall = 300 * time.Millisecond
	// As if the sampler's timer were due stall ago and had not fired;
	// if it fires meanwhile, its sample is at least that late.
	sampler.due.Store(int64(time.Since(epoch) - stall))
	if got := Lateness(); got < stall {
		t.Errorf("Lateness() with a sample %v overdue = %v; want at least %v", stall, got, stall)
	}
	if got, want := Guard(2*time.Second), Limit(2*time.Second); got != want {
		t.Errorf("Guard(2s) after a %v stall = %v; want the limit, %v", stall, got, want)
	}
}

// TestSamplesOutlivePause: samples taken less than a window ago count for
// the next user after a pause with no user; older ones do not.
func TestSamplesOutlivePause(t *testing.T) {
	const stall = 300 * time.Millisecond
	for _, c := range []struct {
		name   string
		pause  time.Duration
		counts bool
	}{
		{"short pause", time.Second, true},
		{"long pause", 2 * SamplePeriod * Window, false},
	} {
		sampler.mu.Lock()
		sampler.w = window{}
		sampler.w.add(stall)
		sampler.stopped = time.Since(epoch) - c.pause
		sampler.mu.Unlock()
		done := Use()
		if got := Lateness() >= stall; got != c.counts {
			t.Errorf("%s: Lateness() = %v after a %v stall; counted %v, want %v", c.name, Lateness(), stall, got, c.counts)
		}
		done()
	}
}
