package cache_test

import (
	"errors"
	"testing"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// valueUntil receives values of n until one satisfies ok.
func valueUntil(t *testing.T, n *cache.Node, what string, ok func(cache.Value) bool) cache.Value {
	t.Helper()
	for {
		if v := next(t, what, n.Values(), n.Err); ok(v) {
			return v
		}
	}
}

// A Node follows a path into its creation, changes, deletion and making
// again; a value not received is replaced by a newer one; the last one is
// always the node's state.
func TestNode(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st, w := open(t, b), open(t, b)
		ctx, p := ctxFor(t), dir(t)+"/n"
		n := cache.NewNode(ctx, st, p)
		defer n.Close()
		if v := next(t, "first value", n.Values(), n.Err); v.Exists || v.Path != p || v.Stale {
			t.Fatalf("first value = %v; want no node at %s", v, p)
		}
		must[store.Node](t)(w.Create(ctx, p, []byte("a"), store.Persistent))
		if v := next(t, "created", n.Values(), n.Err); !v.Exists || string(v.Data) != "a" || v.Version != 0 {
			t.Fatalf("after create: %v; want a at version 0", v)
		}
		// Not received while b, c and d are set: only d comes, last.
		for _, d := range []string{"b", "c", "d"} {
			must[store.Node](t)(w.Set(ctx, p, []byte(d), store.AnyVersion))
		}
		valueUntil(t, n, "set", func(v cache.Value) bool { return string(v.Data) == "d" && v.Version == 3 })
		if err := w.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		valueUntil(t, n, "deleted", func(v cache.Value) bool { return !v.Exists })
		again := must[store.Node](t)(w.Create(ctx, p, []byte("again"), store.Persistent))
		v := valueUntil(t, n, "made again", func(v cache.Value) bool { return v.Exists })
		if string(v.Data) != "again" || v.Seq != again.Seq || v.Version != 0 {
			t.Errorf("made again: %v; want again at version 0", v)
		}
		// The value is the receiver's own.
		v.Data[0] = 'X'
		must[store.Node](t)(w.Set(ctx, p, []byte("again2"), store.AnyVersion))
		valueUntil(t, n, "set again", func(v cache.Value) bool { return string(v.Data) == "again2" })

		// A lost connection: a stale value, then the node again.
		if d, ok := b.(storetest.Disconnector); ok {
			d.Disconnect(t, st)
			valueUntil(t, n, "stale", func(v cache.Value) bool { return v.Stale && string(v.Data) == "again2" })
			must[store.Node](t)(w.Set(ctx, p, []byte("during"), store.AnyVersion))
			d.Reconnect(t, st)
			valueUntil(t, n, "current", func(v cache.Value) bool { return !v.Stale && string(v.Data) == "during" })
		}

		b.Expire(t, st)
		for range n.Values() {
		}
		if err := n.Err(); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("Err() after the session expired = %v; want %v", err, store.ErrSessionExpired)
		}
	})
}
