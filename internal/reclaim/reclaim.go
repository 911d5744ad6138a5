// Package reclaim holds, for a store adapter, the directories its session
// emptied until each one's delay is up (see Parents in package store): a
// name in constant use keeps its directory, and pays neither its delete nor
// its create again every cycle; one no longer used is handed back to the
// adapter to remove, and one whose removal failed for a cause that may
// pass is handed back again later.
package reclaim

import (
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// DefaultDelay is the adapters' default reclaim delay.
const DefaultDelay = time.Second

// Later holds the directories a session emptied until each one's Delay is
// up, and then hands them to Remove, from a goroutine of its own; a
// directory whose removal failed for a cause that may pass comes back
// through Again. The zero Later with a Delay of 0 holds only those:
// Emptied hands each directory to Remove at once, on the caller's
// goroutine. Its methods are safe for concurrent use.
type Later struct {
	Delay  time.Duration
	Remove func(dirs []string)

	mu      sync.Mutex
	due     map[string]time.Time
	timer   *time.Timer // armed while due is not empty
	stopped bool
}

// Emptied is told that the session deleted a node in dir, maybe its last.
func (l *Later) Emptied(dir string) {
	if l.Delay == 0 {
		l.Remove([]string{dir})
		return
	}
	l.hold(dir, l.Delay)
}

// RetryDelay is the least time a directory whose removal failed for a
// cause that may pass waits before it is tried again (see Again).
const RetryDelay = time.Second

// Again is told that the removal of dir failed for a cause that may pass
// (a connection lost, a request timed out): dir is due again after the
// delay, and no sooner than RetryDelay, so that a directory left while the
// store could not be reached is removed once it can be (etcd has no
// reaper, and ZooKeeper's never takes a container that never had a
// child). Once Stop is called it holds nothing; so a directory is tried at
// most once per RetryDelay while the session lasts, and never after.
func (l *Later) Again(dir string) { l.hold(dir, max(l.Delay, RetryDelay)) }

// hold makes dir due after wait, unless Stop was called. A timer already
// armed is left as it is: fire arms the next for what is left. So a
// directory emptied while only a retry is pending, with a delay under
// RetryDelay, waits for that retry's timer: at most RetryDelay.
func (l *Later) hold(dir string, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if l.due == nil {
		l.due = make(map[string]time.Time)
	}
	l.due[dir] = time.Now().Add(wait)
	if l.timer == nil {
		l.timer = time.AfterFunc(wait, l.fire)
	}
}

// Keep is told that the session creates in dir: it is no longer due.
func (l *Later) Keep(dir string) {
	if l.Delay == 0 {
		return
	}
	l.mu.Lock()
	delete(l.due, dir)
	l.mu.Unlock()
}

// fire hands the directories whose delay is up to Remove, and arms the
// timer for the rest, no sooner than a quarter of the delay: a directory
// waits at most a quarter more than the delay, and the timer fires at most
// four times per delay however many are due.
func (l *Later) fire() {
	now := time.Now()
	var dirs []string
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	var next time.Time
	for dir, at := range l.due {
		switch {
		case !at.After(now):
			dirs = append(dirs, dir)
			delete(l.due, dir)
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	l.timer = nil
	if !next.IsZero() {
		l.timer = time.AfterFunc(max(next.Sub(now), l.Delay/4), l.fire)
	}
	l.mu.Unlock()
	if len(dirs) > 0 {
		l.Remove(dirs)
	}
}

// Stop ends the holding, for the session's end, and returns the
// directories still due, for the adapter to remove while it can.
func (l *Later) Stop() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
	}
	dirs := make([]string, 0, len(l.due))
	for dir := range l.due {
		dirs = append(dirs, dir)
	}
	l.due = nil
	return dirs
}

// Flush runs remove(dirs) and waits for it at most bound: what is left
// then is the store's to catch (ZooKeeper's container reaper, the next
// one out of the directory on etcd). remove must end on its own once the
// session has.
func Flush(dirs []string, remove func([]string), bound time.Duration) {
	if len(dirs) == 0 {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		remove(dirs)
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// Each runs remove for each of dirs, a few at a time (each is a request of
// the session), and returns once all have returned.
func Each(dirs []string, remove func(dir string)) {
	var g errgroup.Group
	g.SetLimit(8)
	for _, dir := range dirs {
		g.Go(func() error {
			remove(dir)
			return nil
		})
	}
	_ = g.Wait()
}
