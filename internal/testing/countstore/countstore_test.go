package countstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

func TestMain(m *testing.M) { backends.Main(m) }

func TestCounts(t *testing.T) {
	srv := memstore.NewServer()
	a, b := countstore.New(srv.Open()), countstore.New(srv.Open())
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	own, _, err := a.CreateAndList(ctx, "/d/n-", nil, store.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.Create(ctx, "/d/m", nil, store.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	_, _, evOwn, err := a.ExistsW(ctx, own.Path)
	if err != nil {
		t.Fatal(err)
	}
	_, _, evOther, err := a.ExistsW(ctx, other.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, own.Path); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, other.Path); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []<-chan store.Event{evOwn, evOther} {
		select {
		case e := <-ev:
			if e.Type != store.EventDeleted {
				t.Errorf("event = %+v; want deleted", e)
			}
		case <-ctx.Done():
			t.Fatal("no event")
		}
	}
	got := a.Counts()
	want := map[string]int{"CreateAndList": 1, "ExistsW": 2, "Delete": 1}
	for m, n := range want {
		if got.Calls[m] != n {
			t.Errorf("Calls[%q] = %d; want %d", m, got.Calls[m], n)
		}
	}
	if got.Total() != 4 {
		t.Errorf("Total() = %d; want 4", got.Total())
	}
	if got.Wakeups != 1 {
		t.Errorf("Wakeups = %d; want 1 (the own node's deletion is no wakeup)", got.Wakeups)
	}
	if err := a.Wait(ctx, func(c countstore.Counts) bool { return c.Wakeups == 1 }); err != nil {
		t.Errorf("Wait(met) = %v", err)
	}
	a.Reset()
	if got := a.Counts().Total(); got != 0 {
		t.Errorf("Total() after Reset = %d; want 0", got)
	}
}

// find returns st's capability T, or nil when st has none.
func find[T any](st store.Store) any {
	if c, ok := store.Find[T](st); ok {
		return c
	}
	return nil
}

// capabilities finds every optional capability of package store.
var capabilities = map[string]func(store.Store) any{
	"NodeWatcher":       find[store.NodeWatcher],
	"CreateLister":      find[store.CreateLister],
	"WindowLister":      find[store.WindowLister],
	"SeqDeleter":        find[store.SeqDeleter],
	"FrontDeleter":      find[store.FrontDeleter],
	"GetDeleter":        find[store.GetDeleter],
	"ChildrenFollower":  find[store.ChildrenFollower],
	"ChildCounter":      find[store.ChildCounter],
	"Leaser":            find[store.Leaser],
	"GuardedCreator":    find[store.GuardedCreator],
	"BatchCreator":      find[store.BatchCreator],
	"ImplicitDirLister": find[store.ImplicitDirLister],
}

// TestCapabilities: over every adapter, store.Find finds in the wrapper
// exactly the capabilities of the store it wraps (so that a recipe takes
// the same path with and without it), and finds the wrapper's own (so that
// their calls are counted).
func TestCapabilities(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		inner := be.Open(t)
		cs := countstore.New(inner)
		defer cs.Close()
		for name, find := range capabilities {
			want, got := find(inner) != nil, find(cs)
			if (got != nil) != want {
				t.Errorf("Find[%s](countstore) found %v; the wrapped store: %v", name, got != nil, want)
			}
			if got != nil && got != any(cs) {
				t.Errorf("Find[%s](countstore) = %T; want the countstore, which counts its calls", name, got)
			}
		}
	})
}

// use calls f with st's capability T and reports whether st has one.
func use[T any](st store.Store, f func(T)) bool {
	c, ok := store.Find[T](st)
	if ok {
		f(c)
	}
	return ok
}

// TestCapabilityCounts: every call of a capability found in the wrapper,
// and of the lease and follow it returns, counts as one call of its
// method, and as nothing else.
func TestCapabilityCounts(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		cs := countstore.New(be.Open(t))
		defer cs.Close()
		dir := "/" + strings.ReplaceAll(t.Name(), "/", "-")
		n, err := cs.Unwrap().Create(ctx, dir+"/n", nil, store.Ephemeral)
		if err != nil {
			t.Fatal(err)
		}
		missing := dir + "/missing"
		for _, c := range []struct {
			calls []string // the methods counted, once each
			use   func() bool
		}{
			{[]string{"NodeW"}, func() bool {
				return use(cs, func(c store.NodeWatcher) { _, _, _ = c.NodeW(ctx, missing) })
			}},
			{[]string{"CreateAndList"}, func() bool {
				return use(cs, func(c store.CreateLister) { _, _, _ = c.CreateAndList(ctx, dir+"/l-", nil, store.EphemeralSequential) })
			}},
			{[]string{"CreateAndWindow", "ChildrenUpTo"}, func() bool {
				return use(cs, func(c store.WindowLister) {
					_, _, _, _ = c.CreateAndWindow(ctx, dir+"/w-", nil, store.EphemeralSequential, 2)
					_, _, _ = c.ChildrenUpTo(ctx, dir, n.Seq, 2)
				})
			}},
			{[]string{"DeleteSeq"}, func() bool {
				return use(cs, func(c store.SeqDeleter) { _ = c.DeleteSeq(ctx, missing, 1) })
			}},
			{[]string{"DeleteFront", "FollowsFront"}, func() bool {
				return use(cs, func(c store.FrontDeleter) {
					_ = c.DeleteFront(ctx, missing, 1)
					_, _ = c.FollowsFront(ctx, missing, 2, 1)
				})
			}},
			{[]string{"GetDelete"}, func() bool {
				return use(cs, func(c store.GetDeleter) { _, _ = c.GetDelete(ctx, missing) })
			}},
			{[]string{"FollowChildren", "ChildrenFollow.Sync"}, func() bool {
				return use(cs, func(c store.ChildrenFollower) {
					f, _, err := c.FollowChildren(ctx, dir)
					if err != nil {
						t.Errorf("FollowChildren(%q) = %v", dir, err)
						return
					}
					defer f.Stop()
					if err := f.Sync(ctx); err != nil {
						t.Errorf("Sync = %v", err)
					}
				})
			}},
			{[]string{"CountChildren", "ChildrenCounted"}, func() bool {
				return use(cs, func(c store.ChildCounter) {
					_, _ = c.CountChildren(ctx, dir)
					_, _, _ = c.ChildrenCounted(ctx, dir)
				})
			}},
			{[]string{"CreateLeased", "Lease.Renew", "Lease.Revoke"}, func() bool {
				return use(cs, func(c store.Leaser) {
					_, l, err := c.CreateLeased(ctx, dir+"/leased", nil, time.Minute)
					if err != nil {
						t.Errorf("CreateLeased = %v", err)
						return
					}
					if err := l.Renew(ctx); err != nil {
						t.Errorf("Renew = %v", err)
					}
					if err := l.Revoke(ctx); err != nil {
						t.Errorf("Revoke = %v", err)
					}
				})
			}},
			{[]string{"CreateIf"}, func() bool {
				return use(cs, func(c store.GuardedCreator) { _, _ = c.CreateIf(ctx, dir+"/guarded", nil, store.Ephemeral, missing) })
			}},
			{[]string{"CreateBatch"}, func() bool {
				return use(cs, func(c store.BatchCreator) {
					_, _ = c.CreateBatch(ctx, dir+"/b", []store.BatchNode{{Name: "x"}}, store.Persistent)
				})
			}},
			{[]string{"ImplicitDirs"}, func() bool {
				return use(cs, func(c store.ImplicitDirLister) { _, _ = c.ImplicitDirs(ctx, dir) })
			}},
		} {
			cs.Reset()
			if !c.use() {
				continue // the wrapped store has no such capability
			}
			got := cs.Counts()
			if got.Total() != len(c.calls) {
				t.Errorf("calls of %v = %v; want each once", c.calls, got.Calls)
				continue
			}
			for _, m := range c.calls {
				if got.Calls[m] != 1 {
					t.Errorf("calls of %v = %v; want each once", c.calls, got.Calls)
				}
			}
		}
	})
}
