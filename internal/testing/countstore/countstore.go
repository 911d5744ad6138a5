// Package countstore wraps a store.Store and counts what goes through it:
// the calls per method (round trips, as a recipe pays them) and the
// wakeups, watch events that fired on a node some other session created. A
// recipe's tests use it to show that a release wakes only the waiters it
// unblocks, and its benchmarks to count round trips per operation.
//
// The wrapper is a store.Wrapper: store.Find looks through it to the
// wrapped store, so that a recipe finds over the wrapper exactly the
// capabilities it finds without it, and takes the same path. The wrapper
// implements every optional capability of package store and counts each
// call of one as one call of its method (a store.Find over a store without
// the capability never returns the wrapper's, and a direct call then fails
// with errors.ErrUnsupported). What a capability returns is counted too: a
// lease's Renew and Revoke ("Lease.Renew", "Lease.Revoke") and a follow's
// Sync ("ChildrenFollow.Sync") are requests. The changes a follow delivers
// are not counted: the server pushes them as a stream, which no request
// asks for and no waiter parks on (they are no wakeups either).
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package countstore

import (
	"context"
	"fmt"
	"maps"
	gosync "sync"

	"github.com/corral-go/corral/store"
)

// Counts is a snapshot of the counters of a Store.
type Counts struct {
	// Calls counts the calls per method name ("Create", "Children", ...).
	Calls map[string]int
	// Wakeups counts the watch events that reported a change (not an
	// error) of a node this session did not create.
	Wakeups int
}

// Total returns the sum of Calls.
func (c Counts) Total() int {
	n := 0
	for _, v := range c.Calls {
		n += v
	}
	return n
}

// NodeWatches returns the number of watches set on single nodes: ExistsW
// and NodeW calls (a waiter has parked once its count grows).
func (c Counts) NodeWatches() int { return c.Calls["ExistsW"] + c.Calls["NodeW"] }

// Store is a counting store.Store. It is safe for concurrent use.
type Store struct {
	inner store.Store

	mu      gosync.Mutex
	counts  Counts
	created map[string]bool // paths created through this wrapper
	changed chan struct{}   // closed and replaced on every count change
	pending map[*forwarder]struct{}
	wg      gosync.WaitGroup
}

// forwarder relays the one event of a watch.
type forwarder struct {
	in   <-chan store.Event
	done chan struct{} // closed once the event is counted and relayed
}

var _ store.Wrapper = (*Store)(nil)

// New returns a Store that counts the calls made to st. Close the wrapper,
// not st: it waits for the wrapper's watch forwarders.
func New(st store.Store) *Store {
	return &Store{
		inner:   st,
		counts:  Counts{Calls: map[string]int{}},
		created: map[string]bool{},
		changed: make(chan struct{}),
		pending: map[*forwarder]struct{}{},
	}
}

// Unwrap implements store.Wrapper: it returns the wrapped store.
func (s *Store) Unwrap() store.Store { return s.inner }

// Counts returns a snapshot of the counters.
func (s *Store) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Counts{Calls: maps.Clone(s.counts.Calls), Wakeups: s.counts.Wakeups}
}

// Reset sets every counter to zero.
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = Counts{Calls: map[string]int{}}
	s.notify()
}

// Wait blocks until cond holds for the counters or ctx is done.
func (s *Store) Wait(ctx context.Context, cond func(Counts) bool) error {
	for {
		s.mu.Lock()
		c := Counts{Calls: maps.Clone(s.counts.Calls), Wakeups: s.counts.Wakeups}
		ch := s.changed
		s.mu.Unlock()
		if cond(c) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("countstore: wait: %w", ctx.Err())
		}
	}
}

// notify wakes Wait; s.mu must be held.
func (s *Store) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Store) count(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Calls[method]++
	s.notify()
}

func (s *Store) remember(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created[p] = true
}

// made remembers n, the node of a create that returned err, if it was made.
func (s *Store) made(n store.Node, err error) {
	if err == nil {
		s.remember(n.Path)
	}
}

// forward relays the one event of ev, a watch on path, counting it as a
// wakeup when it reports a change and path is not a node this session
// created.
func (s *Store) forward(path string, ev <-chan store.Event) <-chan store.Event {
	out := make(chan store.Event, 1)
	f := &forwarder{in: ev, done: make(chan struct{})}
	s.mu.Lock()
	s.pending[f] = struct{}{}
	s.mu.Unlock()
	s.wg.Go(func() {
		e, ok := <-ev
		s.mu.Lock()
		if ok && e.Err == nil && !s.created[path] {
			s.counts.Wakeups++
			s.notify()
		}
		delete(s.pending, f)
		s.mu.Unlock()
		if ok {
			out <- e
		}
		close(out)
		close(f.done)
	})
	return out
}

// Flush waits until every event that the wrapped store has already
// delivered to a watch of this session is counted. On a store that delivers
// events as part of the change (memstore) a change made before Flush is
// therefore counted when Flush returns; events still on their way over a
// network are not waited for.
func (s *Store) Flush(ctx context.Context) error {
	s.mu.Lock()
	var wait []*forwarder
	for f := range s.pending {
		if len(f.in) > 0 {
			wait = append(wait, f)
		}
	}
	s.mu.Unlock()
	for _, f := range wait {
		select {
		case <-f.done:
		case <-ctx.Done():
			return fmt.Errorf("countstore: flush: %w", ctx.Err())
		}
	}
	return nil
}

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, path string, data []byte, mode store.Mode) (store.Node, error) {
	s.count("Create")
	n, err := s.inner.Create(ctx, path, data, mode)
	s.made(n, err)
	return n, err
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, path string) (store.Node, error) {
	s.count("Get")
	return s.inner.Get(ctx, path)
}

// Set implements store.Store.
func (s *Store) Set(ctx context.Context, path string, data []byte, version int64) (store.Node, error) {
	s.count("Set")
	return s.inner.Set(ctx, path, data, version)
}

// Children implements store.Store.
func (s *Store) Children(ctx context.Context, path string) ([]store.Child, error) {
	s.count("Children")
	return s.inner.Children(ctx, path)
}

// ExistsW implements store.Store.
func (s *Store) ExistsW(ctx context.Context, path string) (bool, store.Stat, <-chan store.Event, error) {
	s.count("ExistsW")
	ok, stat, ev, err := s.inner.ExistsW(ctx, path)
	if err != nil {
		return ok, stat, nil, err
	}
	return ok, stat, s.forward(path, ev), nil
}

// ChildrenW implements store.Store.
func (s *Store) ChildrenW(ctx context.Context, path string) ([]store.Child, <-chan store.Event, error) {
	s.count("ChildrenW")
	kids, ev, err := s.inner.ChildrenW(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	return kids, s.forward(path, ev), nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, path string) error {
	s.count("Delete")
	return s.inner.Delete(ctx, path)
}

// SessionID implements store.Store.
func (s *Store) SessionID() int64 { return s.inner.SessionID() }

// Context implements store.Store.
func (s *Store) Context() context.Context { return s.inner.Context() }

// Disconnected implements store.Store.
func (s *Store) Disconnected() <-chan struct{} { return s.inner.Disconnected() }

// Close implements store.Store: it closes the wrapped store and waits for
// the wrapper's forwarders, which end when their watches do.
func (s *Store) Close() error {
	err := s.inner.Close()
	s.wg.Wait()
	return err
}
