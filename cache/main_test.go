package cache_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

func TestMain(m *testing.M) { backends.Main(m) }

// timeout bounds every wait of the tests.
const timeout = 20 * time.Second

// dir returns a fresh path for one test.
func dir(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/cachetest/%s-%08x", name, rand.Uint32())
}

// open opens a session that is closed when the test ends.
func open(t testing.TB, b storetest.Backend) store.Store {
	t.Helper()
	st := b.Open(t)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// must fails the test on an error and returns the value.
func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// next receives from ch within timeout, and fails if ch is closed.
func next[T any](t testing.TB, what string, ch <-chan T, stopped func() error) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: stopped: %v", what, stopped())
		}
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing after %v", what, timeout)
	}
	panic("unreachable")
}

// view is what a receiver of a Tree's events holds.
type view struct {
	t       testing.TB
	nodes   map[string]store.Node
	current bool
}

func newView(t testing.TB) *view { return &view{t: t, nodes: map[string]store.Node{}} }

// apply takes in e, checking that it follows from what the view holds.
func (v *view) apply(e cache.Event) {
	v.t.Helper()
	old, had := v.nodes[e.Path]
	switch e.Type {
	case cache.Stale:
		if !v.current {
			v.t.Errorf("Stale while not current")
		}
		v.current = false
	case cache.Current:
		if v.current {
			v.t.Errorf("Current while current")
		}
		v.current = true
	case cache.Created:
		if had {
			v.t.Errorf("created %s, which the view holds", e.Path)
		}
		v.nodes[e.Path] = e.Node
	case cache.Changed:
		if !had || !sameNode(old, e.Old) || sameNode(old, e.Node) {
			v.t.Errorf("changed %s from %+v to %+v; the view holds %+v (%v)", e.Path, e.Old, e.Node, old, had)
		}
		if old.Seq == e.Node.Seq && old.Created.Equal(e.Node.Created) && e.Node.Version < old.Version {
			v.t.Errorf("changed %s back from version %d to %d", e.Path, old.Version, e.Node.Version)
		}
		v.nodes[e.Path] = e.Node
	case cache.Deleted:
		if !had || !sameNode(old, e.Old) {
			v.t.Errorf("deleted %s (%+v); the view holds %+v (%v)", e.Path, e.Old, old, had)
		}
		delete(v.nodes, e.Path)
	default:
		v.t.Errorf("event of type %v", e.Type)
	}
	if e.Path != "" && e.Path != e.Node.Path && e.Path != e.Old.Path {
		v.t.Errorf("event %+v: path and nodes disagree", e)
	}
}

func sameNode(a, b store.Node) bool {
	return a.Path == b.Path && string(a.Data) == string(b.Data) && a.Seq == b.Seq &&
		a.Version == b.Version && a.Owner == b.Owner && a.Created.Equal(b.Created)
}

// equal reports whether the view holds exactly want, and is current.
func (v *view) equal(want map[string]store.Node) bool {
	if !v.current || len(v.nodes) != len(want) {
		return false
	}
	for p, n := range want {
		if m, ok := v.nodes[p]; !ok || !sameNode(m, n) {
			return false
		}
	}
	return true
}

// until takes the events of tr until the view holds want and is current.
func (v *view) until(tr *cache.Tree, want map[string]store.Node) {
	v.t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for !v.equal(want) {
		select {
		case e, ok := <-tr.Events():
			if !ok {
				v.t.Fatalf("tree stopped: %v; view %v; want %v", tr.Err(), keys(v.nodes), keys(want))
			}
			v.apply(e)
		case <-timer.C:
			v.t.Fatalf("view %v (current %v) after %v; want %v", keys(v.nodes), v.current, timeout, keys(want))
		}
	}
}

// snapshotUntil takes the snapshots of tr until one holds want, not stale.
func snapshotUntil(t testing.TB, tr *cache.Tree, want map[string]store.Node) cache.Snapshot {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var s cache.Snapshot
	for {
		if !s.Stale() && s.Len() == len(want) && snapshotHolds(s, want) && s.Path() != "" {
			return s
		}
		select {
		case got, ok := <-tr.Snapshots():
			if !ok {
				t.Fatalf("tree stopped: %v", tr.Err())
			}
			s = got
		case <-timer.C:
			t.Fatalf("snapshot %v (stale %v) after %v; want %v", s.Paths(), s.Stale(), timeout, keys(want))
		}
	}
}

func snapshotHolds(s cache.Snapshot, want map[string]store.Node) bool {
	for p, n := range want {
		if m, ok := s.Get(p); !ok || !sameNode(m, n) {
			return false
		}
	}
	return true
}

func keys(m map[string]store.Node) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// subtree reads the nodes at and below p down to depth, as Get finds them.
func subtree(t testing.TB, ctx context.Context, st store.Store, p string, depth int) map[string]store.Node {
	t.Helper()
	out := map[string]store.Node{}
	var walk func(p string, d int)
	walk = func(p string, d int) {
		n, err := st.Get(ctx, p)
		if errors.Is(err, store.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		n.Token = 0
		out[p] = n
		if d == depth {
			return
		}
		kids, err := st.Children(ctx, p)
		if errors.Is(err, store.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			walk(store.Join(p, k.Name), d+1)
		}
	}
	walk(p, 0)
	return out
}
