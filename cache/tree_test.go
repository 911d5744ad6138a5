package cache_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// A Tree on a path that does not exist follows it into its creation, its
// changes, its deletion and its making again; its events bring a receiver
// to the store's state, and so do its snapshots.
//
// The same on one-shot watches, for a store without store.TreeFollower.
func TestTreeLifecycle(t *testing.T) {
	for _, portable := range []bool{false, true} {
		t.Run(fmt.Sprintf("portable=%v", portable), func(t *testing.T) { treeLifecycle(t, portable) })
	}
}

// portable hides the optional capabilities of the store it wraps: it is no
// store.Wrapper, so store.Find finds none.
type portable struct{ store.Store }

func treeLifecycle(t *testing.T, hide bool) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st, w := open(t, b), open(t, b)
		ctx, p := ctxFor(t), dir(t)
		var follow store.Store = st
		if hide {
			follow = portable{st}
		}
		tr := cache.NewTree(ctx, follow, p, cache.WithDepth(2))
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

// A Tree stops when its session ends, with the session's end; a Tree on a
// new session, from the old one's last snapshot (WithBase), tells only what
// changed meanwhile.
func TestTreeSessionEnd(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st, w := open(t, b), open(t, b)
		ctx, p := ctxFor(t), dir(t)
		must[store.Node](t)(w.Create(ctx, p+"/keep", []byte("k"), store.Persistent))
		must[store.Node](t)(w.Create(ctx, p+"/change", []byte("1"), store.Persistent))
		must[store.Node](t)(w.Create(ctx, p+"/drop", nil, store.Persistent))
		tr := cache.NewTree(ctx, st, p)
		defer tr.Close()
		v := newView(t)
		want := subtree(t, ctx, w, p, store.MaxPathDepth)
		v.until(tr, want)
		last := snapshotUntil(t, tr, want)

		b.Expire(t, st)
		for range tr.Events() {
		}
		if err := tr.Err(); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("Err() after the session expired = %v; want %v", err, store.ErrSessionExpired)
		}
		if _, ok := <-tr.Snapshots(); ok {
			t.Errorf("Snapshots() open after the Tree stopped")
		}

		// Meanwhile, in the store.
		must[store.Node](t)(w.Set(ctx, p+"/change", []byte("2"), store.AnyVersion))
		must[store.Node](t)(w.Create(ctx, p+"/new", nil, store.Persistent))
		if err := w.Delete(ctx, p+"/drop"); err != nil {
			t.Fatal(err)
		}

		st2 := open(t, b)
		tr2 := cache.NewTree(ctx, st2, p, cache.WithBase(last))
		defer tr2.Close()
		v.current = false // the receiver's view of the first Tree carries over
		got := map[string]cache.EventType{}
		want = subtree(t, ctx, w, p, store.MaxPathDepth)
		for !v.equal(want) {
			e := next(t, "event", tr2.Events(), tr2.Err)
			v.apply(e)
			got[e.Path] = e.Type
		}
		wantTypes := map[string]cache.EventType{p + "/change": cache.Changed, p + "/new": cache.Created, p + "/drop": cache.Deleted, "": cache.Current}
		if len(got) != len(wantTypes) {
			t.Errorf("events from the base = %v; want %v", got, wantTypes)
		}
		for k, typ := range wantTypes {
			if got[k] != typ {
				t.Errorf("event of %q from the base = %v; want %v", k, got[k], typ)
			}
		}
	})
}

// A Tree rides out a lost connection: it says its view is stale, and then
// current again, with what changed meanwhile between the two.
func TestTreeDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect a session")
		}
		st, w := open(t, b), open(t, b)
		ctx, p := ctxFor(t), dir(t)
		must[store.Node](t)(w.Create(ctx, p+"/n", []byte("1"), store.Persistent))
		mr := metrictest.New(t)
		tr := cache.NewTree(ctx, st, p, cache.WithMeterProvider(mr.Provider()))
		defer tr.Close()
		v := newView(t)
		v.until(tr, subtree(t, ctx, w, p, store.MaxPathDepth))
		const rounds = 3
		defer func() {
			// etcd resumes its watch; the others read the subtree again.
			want := int64(rounds)
			if _, ok := b.(*etcdbackend.Backend); ok {
				want = 0
			}
			if n := mr.Collect().Int("corral.cache.reads", telemetry.KeyCause.String("gap")); n != want {
				t.Errorf("reads of the subtree after a lost connection = %d; want %d", n, want)
			}
		}()
		for round := range rounds {
			d.Disconnect(t, st)
			for v.current {
				v.apply(next(t, "event after the cut", tr.Events(), tr.Err))
			}
			must[store.Node](t)(w.Set(ctx, p+"/n", []byte{byte('2' + round)}, store.AnyVersion))
			must[store.Node](t)(w.Create(ctx, p+"/m-", nil, store.Sequential))
			d.Reconnect(t, st)
			v.until(tr, subtree(t, ctx, w, p, store.MaxPathDepth))
		}
	})
}

// A Tree whose subtree outgrows its limit stops with ErrTooManyNodes, at
// its first read or later.
func TestTreeLimit(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := open(t, b)
		ctx, p := ctxFor(t), dir(t)
		for i := range 3 {
			must[store.Node](t)(st.Create(ctx, p+"/"+string(rune('a'+i)), nil, store.Persistent))
		}
		tr := cache.NewTree(ctx, st, p, cache.WithMaxNodes(3))
		for range tr.Events() {
		}
		if err := tr.Err(); !errors.Is(err, cache.ErrTooManyNodes) || !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("Err() of a tree of 4 nodes, at most 3 = %v; want %v", err, cache.ErrTooManyNodes)
		}
		tr = cache.NewTree(ctx, st, p, cache.WithMaxNodes(4))
		defer tr.Close()
		v := newView(t)
		v.until(tr, subtree(t, ctx, st, p, store.MaxPathDepth))
		must[store.Node](t)(st.Create(ctx, p+"/d", nil, store.Persistent))
		for range tr.Events() {
		}
		if err := tr.Err(); !errors.Is(err, cache.ErrTooManyNodes) {
			t.Errorf("Err() of a tree grown to 5 nodes, at most 4 = %v; want %v", err, cache.ErrTooManyNodes)
		}
	})
}

// A Tree on the root follows the whole store; the root is a node with no
// data.
func TestTreeRoot(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	ctx := ctxFor(t)
	must[store.Node](t)(st.Create(ctx, "/a/b", []byte("x"), store.Persistent))
	tr := cache.NewTree(ctx, st, "/")
	defer tr.Close()
	v := newView(t)
	v.until(tr, subtree(t, ctx, st, "/", store.MaxPathDepth))
	if _, ok := v.nodes["/"]; !ok || len(v.nodes) != 3 {
		t.Errorf("tree of the root = %v; want /, /a and /a/b", keys(v.nodes))
	}
	must[store.Node](t)(st.Create(ctx, "/c", nil, store.Persistent))
	v.until(tr, subtree(t, ctx, st, "/", store.MaxPathDepth))
}
