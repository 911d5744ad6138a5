package recipe

import (
	"context"
	"reflect"
	gosync "sync"

	"github.com/corral-go/corral/store"
)

// Engine is what the recipes keep for one session: its cleaner (see
// Remove) and the values a primitive shares between the calls of one
// session (a queue's view of a queue). There is one Engine per session,
// whatever wraps the store: [Of] looks through store.Wrapper, as store.Find
// does, so that a wrapped store and the store it wraps share their
// cleaner, and a node handed over through one is found by a Flush through
// the other. An Engine goes when its session ends, with everything it
// holds.
type Engine struct {
	mu      gosync.Mutex
	cleaner *cleaner    // nil while no node is pending
	values  map[any]any // by a primitive's key; see Value
	ended   bool        // the session ended: keep nothing more
	stops   []func()    // of the values, called at the session's end
}

// engines maps a session (its key, see sessionKey) to its *Engine while
// the session lives.
var engines gosync.Map

// Of returns the Engine of st's session, making it on first use. It is
// safe for concurrent use.
func Of(st store.Store) *Engine {
	k := sessionKey(st)
	if e, ok := engines.Load(k); ok {
		return e.(*Engine)
	}
	e, loaded := engines.LoadOrStore(k, &Engine{})
	if !loaded {
		context.AfterFunc(st.Context(), func() {
			engines.CompareAndDelete(k, e)
			e.(*Engine).end()
		})
	}
	return e.(*Engine)
}

// sessionKey returns what the engines know st's session by: the store at
// the bottom of its wrappers or, for a store whose value cannot be a map
// key (a struct value that holds a slice, as an outside adapter may be),
// the Done channel of its session's Context, which is as much that
// session's own.
func sessionKey(st store.Store) any {
	for {
		w, ok := st.(store.Wrapper)
		if !ok {
			break
		}
		st = w.Unwrap()
	}
	if reflect.ValueOf(st).Comparable() {
		return st
	}
	return st.Context().Done()
}

// Value returns the value the session keeps under key, making it with make
// on first use; stop, when make returns one, is called once the session has
// ended. key must be comparable, and of a type of the caller's own so that
// keys of two primitives never meet. Value is safe for concurrent use; make
// is called with no lock held by the Engine, at most once per key while
// the session lives (a call that loses the race for a key drops what its
// make returned, after calling its stop).
func (e *Engine) Value(key any, make func() (v any, stop func())) any {
	e.mu.Lock()
	if v, ok := e.values[key]; ok {
		e.mu.Unlock()
		return v
	}
	e.mu.Unlock()
	v, stop := make()
	e.mu.Lock()
	if old, ok := e.values[key]; ok {
		e.mu.Unlock()
		if stop != nil {
			stop()
		}
		return old
	}
	if e.ended {
		e.mu.Unlock()
		if stop != nil {
			stop()
		}
		return v
	}
	if e.values == nil {
		e.values = map[any]any{}
	}
	e.values[key] = v
	if stop != nil {
		e.stops = append(e.stops, stop)
	}
	e.mu.Unlock()
	return v
}

// end drops what the Engine keeps, once its session has ended, and stops
// its values.
func (e *Engine) end() {
	e.mu.Lock()
	e.ended = true
	stops := e.stops
	e.values, e.stops = nil, nil
	e.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// cleanerFor returns the session's cleaner, making one that deletes
// through st when there is none (started then reports that the caller
// must run it).
func (e *Engine) cleanerFor(st store.Store) (c *cleaner, started bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cleaner != nil {
		return e.cleaner, false
	}
	e.cleaner = &cleaner{st: st, eng: e, pending: map[nodeKey]*pendingNode{}}
	return e.cleaner, true
}

// pending returns the session's cleaner, or nil when it has none.
func (e *Engine) pending() *cleaner {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cleaner
}

// dropCleaner forgets c, which has ended.
func (e *Engine) dropCleaner(c *cleaner) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cleaner == c {
		e.cleaner = nil
	}
}
