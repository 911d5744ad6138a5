package recipe

import (
	"testing"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// wrapper is a store.Wrapper, as a caller's instrumentation is.
type wrapper struct{ store.Store }

func (w wrapper) Unwrap() store.Store { return w.Store }

// TestEngineLooksThroughWrappers: a store and a wrapper of it (of a
// wrapper of it) are one session: they share one Engine, so a node handed
// to the cleaner through one is removed by a Flush through the other.
func TestEngineLooksThroughWrappers(t *testing.T) {
	inner := memstore.New()
	defer inner.Close()
	outer := wrapper{wrapper{inner}}
	if Of(inner) != Of(outer) {
		t.Fatal("Of(wrapper) != Of(its store): a second engine for one session")
	}
	n, err := inner.Create(t.Context(), "/engine/n", nil, store.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	RemoveLater(outer, n.Path, 0)
	if err := Flush(t.Context(), inner, "/engine"); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	select {
	case <-Pending(outer, n):
	case <-time.After(10 * time.Second):
		t.Fatal("removal still pending through the wrapper after a Flush through its store")
	}
	if _, err := inner.Get(t.Context(), n.Path); err == nil {
		t.Errorf("node %q still there after Flush", n.Path)
	}
}

type valueKey struct{}

// TestEngineValue: a value is made once per session, stopped when the
// session ends, and the Engine forgotten then (nothing grows with the
// sessions of a process).
func TestEngineValue(t *testing.T) {
	st := memstore.New()
	made, stopped := 0, make(chan struct{})
	mk := func() (any, func()) {
		made++
		return made, func() { close(stopped) }
	}
	e := Of(st)
	if v := e.Value(valueKey{}, mk); v != 1 {
		t.Fatalf("Value = %v; want 1", v)
	}
	if v := Of(st).Value(valueKey{}, mk); v != 1 || made != 1 {
		t.Fatalf("second Value = %v (made %d times); want the first", v, made)
	}
	st.Close()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("value not stopped at the session's end")
	}
	if _, ok := engines.Load(sessionKey(st)); ok {
		t.Error("engine of an ended session still kept")
	}
	// A value asked for after the end is made and stopped at once.
	stopped = make(chan struct{})
	e.Value(valueKey{}, mk)
	select {
	case <-stopped:
	default:
		t.Error("value made after the session's end was not stopped")
	}
}
