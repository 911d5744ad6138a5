package proptest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// cacheTimeout bounds every wait of the cache machine.
const cacheTimeout = 10 * time.Second

// cachePaths are the paths the cache machine writes: a small tree, so that
// its changes meet (a node made under one about to go, a root deleted and
// made again).
var cachePaths = []string{"/p", "/p/a", "/p/b", "/p/a/x", "/p/a/y", "/p/b/z", "/p/a/x/deep"}

// cacheMachine drives a cache.Tree on memstore through any history of
// creates, sets, deletes, expiries of the writers' sessions and of the
// Tree's own, and lost connections, while a receiver takes its events
// when it pleases. The model is the receiver's view: it must hold, at
// every event, what the event says it held (events per path in order),
// and, once the store is quiet and the view current, the store; and so
// must the last snapshot.
type cacheMachine struct {
	ctx     context.Context
	srv     *memstore.Server
	writers [2]*memstore.Store
	st      *memstore.Store // the Tree's session
	cut     bool            // st's connection is cut
	depth   int
	tr      *cache.Tree
	snap    cache.Snapshot // the last snapshot received
	view    map[string]store.Node
	current bool // the view is current, as the events said
}

func newCacheMachine(ctx context.Context, depth int) *cacheMachine {
	cm := &cacheMachine{ctx: ctx, srv: memstore.NewServer(), depth: depth, view: map[string]store.Node{}}
	for i := range cm.writers {
		cm.writers[i] = cm.srv.Open()
	}
	cm.st = cm.srv.Open()
	cm.tr = cache.NewTree(ctx, cm.st, "/p", cache.WithDepth(depth))
	return cm
}

func (cm *cacheMachine) close() {
	cm.tr.Close()
	for _, w := range cm.writers {
		w.Close()
	}
	cm.st.Close()
}

func (cm *cacheMachine) writer(t *rapid.T) *memstore.Store {
	return cm.writers[rapid.IntRange(0, len(cm.writers)-1).Draw(t, "writer")]
}

func (cm *cacheMachine) create(t *rapid.T) {
	p := rapid.SampledFrom(cachePaths).Draw(t, "path")
	mode := rapid.SampledFrom([]store.Mode{store.Persistent, store.Ephemeral}).Draw(t, "mode")
	data := rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "data")
	_, err := cm.writer(t).Create(cm.ctx, p, data, mode)
	if err != nil && !errors.Is(err, store.ErrNodeExists) && !errors.Is(err, store.ErrEphemeralParent) {
		t.Fatalf("Create(%s) = %v", p, err)
	}
}

func (cm *cacheMachine) set(t *rapid.T) {
	p := rapid.SampledFrom(cachePaths).Draw(t, "path")
	data := rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "data")
	if _, err := cm.writer(t).Set(cm.ctx, p, data, store.AnyVersion); err != nil && !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Set(%s) = %v", p, err)
	}
}

func (cm *cacheMachine) delete(t *rapid.T) {
	p := rapid.SampledFrom(cachePaths).Draw(t, "path")
	if err := cm.writer(t).Delete(cm.ctx, p); err != nil && !errors.Is(err, store.ErrNoNode) && !errors.Is(err, store.ErrNotEmpty) {
		t.Fatalf("Delete(%s) = %v", p, err)
	}
}

// expireWriter ends a writer's session: its ephemeral nodes go.
func (cm *cacheMachine) expireWriter(t *rapid.T) {
	i := rapid.IntRange(0, len(cm.writers)-1).Draw(t, "writer")
	cm.writers[i].Expire()
	cm.writers[i] = cm.srv.Open()
}

// toggleConnection cuts the Tree's connection, or restores it.
func (cm *cacheMachine) toggleConnection(*rapid.T) {
	if cm.cut {
		cm.st.Reconnect()
	} else {
		cm.st.Disconnect()
	}
	cm.cut = !cm.cut
}

// expire ends the Tree's session: the Tree stops with the session's end,
// and a Tree on a new session starts from the last snapshot received,
// which the receiver takes for its view.
func (cm *cacheMachine) expire(t *rapid.T) {
	cm.st.Expire()
	for e := range cm.tr.Events() {
		cm.apply(t, e)
	}
	if err := cm.tr.Err(); !errors.Is(err, store.ErrSessionExpired) {
		t.Fatalf("Err() after the session expired = %v; want %v", err, store.ErrSessionExpired)
	}
	cm.st, cm.cut = cm.srv.Open(), false
	var opts []cache.Option
	clear(cm.view)
	if cm.snap.Path() != "" {
		opts = append(opts, cache.WithBase(cm.snap))
		for _, n := range cm.snap.Nodes() {
			cm.view[n.Path] = n
		}
	}
	cm.current = false
	cm.tr = cache.NewTree(cm.ctx, cm.st, "/p", append(opts, cache.WithDepth(cm.depth))...)
}

// take receives the events the Tree has ready, up to a few.
func (cm *cacheMachine) take(t *rapid.T) {
	n := rapid.IntRange(1, 5).Draw(t, "events")
	for range n {
		select {
		case e, ok := <-cm.tr.Events():
			if !ok {
				t.Fatalf("tree stopped: %v", cm.tr.Err())
			}
			cm.apply(t, e)
		default:
			return
		}
	}
}

// snapshot receives the snapshot the Tree has ready, if any.
func (cm *cacheMachine) snapshot(t *rapid.T) {
	select {
	case s, ok := <-cm.tr.Snapshots():
		if !ok {
			t.Fatalf("tree stopped: %v", cm.tr.Err())
		}
		for _, p := range s.Paths() {
			if d, ok := store.Depth("/p", p); !ok || d > cm.depth {
				t.Fatalf("snapshot holds %s, outside the tree", p)
			}
		}
		cm.snap = s
	default:
	}
}

// apply takes the event e into the view, checking that it goes from what
// the view holds.
func (cm *cacheMachine) apply(t *rapid.T, e cache.Event) {
	old, had := cm.view[e.Path]
	switch e.Type {
	case cache.Stale, cache.Current:
		if cm.current == (e.Type == cache.Current) {
			t.Fatalf("%v while current is %v", e.Type, cm.current)
		}
		cm.current = e.Type == cache.Current
		return
	case cache.Created:
		if had {
			t.Fatalf("created %s, which the view holds", e.Path)
		}
	case cache.Changed, cache.Deleted:
		if !had || !equalNode(old, e.Old) {
			t.Fatalf("%v %s from %+v; the view holds %+v (%v)", e.Type, e.Path, e.Old, old, had)
		}
	}
	if d, ok := store.Depth("/p", e.Path); !ok || d > cm.depth {
		t.Fatalf("event of %s, outside the tree", e.Path)
	}
	if e.Type == cache.Deleted {
		delete(cm.view, e.Path)
		return
	}
	if e.Type == cache.Changed && equalNode(old, e.Node) {
		t.Fatalf("changed %s to what the view holds", e.Path)
	}
	cm.view[e.Path] = e.Node
}

func equalNode(a, b store.Node) bool {
	return a.Path == b.Path && string(a.Data) == string(b.Data) && a.Seq == b.Seq &&
		a.Version == b.Version && a.Owner == b.Owner && a.Created.Equal(b.Created)
}

// storeTree reads the tree from the store, down to the machine's depth.
func (cm *cacheMachine) storeTree(t *rapid.T) map[string]store.Node {
	want := map[string]store.Node{}
	r := cm.srv.Open()
	defer r.Close()
	for _, p := range cachePaths {
		if d, _ := store.Depth("/p", p); d > cm.depth {
			continue
		}
		n, err := r.Get(cm.ctx, p)
		if errors.Is(err, store.ErrNoNode) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		want[p] = n
	}
	return want
}

// quiet restores the connection and checks that the events bring the
// view to the store, current, and that a snapshot equals it.
func (cm *cacheMachine) quiet(t *rapid.T) {
	if cm.cut {
		cm.toggleConnection(t)
	}
	want := cm.storeTree(t)
	timeout := time.After(cacheTimeout)
	for !cm.current || !maps.EqualFunc(cm.view, want, equalNode) {
		select {
		case e, ok := <-cm.tr.Events():
			if !ok {
				t.Fatalf("tree stopped: %v", cm.tr.Err())
			}
			cm.apply(t, e)
		case <-timeout:
			t.Fatalf("view %v (current %v) after %v; the store holds %v",
				slices.Sorted(maps.Keys(cm.view)), cm.current, cacheTimeout, slices.Sorted(maps.Keys(want)))
		}
	}
	sorted := slices.SortedFunc(maps.Values(want), func(a, b store.Node) int { return cmpPath(a.Path, b.Path) })
	for {
		// The last snapshot received may be the latest: no other comes.
		s := cm.snap
		if !s.Stale() && s.Path() != "" && slices.EqualFunc(s.Nodes(), sorted, equalNode) {
			return
		}
		select {
		case s, ok := <-cm.tr.Snapshots():
			if !ok {
				t.Fatalf("tree stopped: %v", cm.tr.Err())
			}
			cm.snap = s
		case <-timeout:
			t.Fatalf("last snapshot %v (stale %v) after %v; the store holds %v",
				cm.snap.Paths(), cm.snap.Stale(), cacheTimeout, slices.Sorted(maps.Keys(want)))
		}
	}
}

func cmpPath(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestCache checks a tree cache on memstore against its model: whatever
// the history, events come per path in order and bring a receiver to the
// store, and the last snapshot equals the store once it is quiet.
func TestCache(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		depth := rapid.SampledFrom([]int{0, 1, 2, store.MaxPathDepth}).Draw(rt, "depth")
		cm := newCacheMachine(t.Context(), depth)
		defer cm.close()
		rt.Repeat(map[string]func(*rapid.T){
			"create":           cm.create,
			"set":              cm.set,
			"delete":           cm.delete,
			"expireWriter":     cm.expireWriter,
			"toggleConnection": cm.toggleConnection,
			"expire":           cm.expire,
			"take":             cm.take,
			"snapshot":         cm.snapshot,
			"":                 func(*rapid.T) {},
		})
		cm.quiet(rt)
	})
}
