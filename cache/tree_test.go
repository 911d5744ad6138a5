package cache_test

import (
	"errors"
	"testing"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// A Tree on a path that does not exist follows it into its creation, its
// changes, its deletion and its making again; its events bring a receiver
// to the store's state, and so do its snapshots.
func TestTreeLifecycle(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st, w := open(t, b), open(t, b)
		ctx, p := ctxFor(t), dir(t)
		tr := cache.NewTree(ctx, st, p, cache.WithDepth(2))
		defer tr.Close()
		v := newView(t)
		v.until(tr, map[string]store.Node{})
		snapshotUntil(t, tr, map[string]store.Node{})

		must[store.Node](t)(w.Create(ctx, p, []byte("root"), store.Persistent))
		must[store.Node](t)(w.Create(ctx, p+"/a", []byte("1"), store.Persistent))
		must[store.Node](t)(w.Create(ctx, p+"/a/b", nil, store.Persistent))
		must[store.Node](t)(w.Create(ctx, p+"/a/b/deep", nil, store.Persistent)) // below the depth
		for i := range 5 {
			must[store.Node](t)(w.Set(ctx, p+"/a", []byte{byte('2' + i)}, store.AnyVersion))
		}
		want := subtree(t, ctx, w, p, 2)
		v.until(tr, want)
		snapshotUntil(t, tr, want)

		must[store.Node](t)(w.Create(ctx, p+"/e-", []byte("e"), store.EphemeralSequential))
		must[store.Node](t)(w.Set(ctx, p, []byte("root2"), store.AnyVersion))
		want = subtree(t, ctx, w, p, 2)
		v.until(tr, want)

		// The whole tree goes, and comes back.
		b.Expire(t, w)
		w = open(t, b)
		for _, q := range []string{p + "/a/b/deep", p + "/a/b", p + "/a", p} {
			if err := w.Delete(ctx, q); err != nil && !errors.Is(err, store.ErrNoNode) {
				t.Fatal(err)
			}
		}
		v.until(tr, map[string]store.Node{})
		snapshotUntil(t, tr, map[string]store.Node{})
		must[store.Node](t)(w.Create(ctx, p+"/again", []byte("x"), store.Persistent))
		want = subtree(t, ctx, w, p, 2)
		v.until(tr, want)
		snapshotUntil(t, tr, want)
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		if err := tr.Err(); !errors.Is(err, cache.ErrClosed) {
			t.Errorf("Err() after Close = %v; want %v", err, cache.ErrClosed)
		}
	})
}
