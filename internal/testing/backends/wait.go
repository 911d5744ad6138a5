package backends

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-go/corral/store"
)

// WaitTimeout bounds WaitChildren.
const WaitTimeout = 30 * time.Second

// WaitChildren waits, with watches, until the children of p satisfy done,
// and returns them. A missing p counts as having no children. It fails t
// when WaitTimeout passes first or st fails.
func WaitChildren(t testing.TB, st store.Store, p string, done func([]store.Child) bool) []store.Child {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
	defer cancel()
	var last []store.Child
	for {
		kids, ev, err := st.ChildrenW(ctx, p)
		if errors.Is(err, store.ErrNoNode) {
			var exists bool
			if exists, _, ev, err = st.ExistsW(ctx, p); err == nil && exists {
				continue // made since the listing: list again
			}
		}
		if err != nil {
			t.Fatalf("waiting for the children of %q: %v (last seen %v)", p, err, last)
		}
		if done(kids) {
			return kids
		}
		last = kids
		if e := <-ev; e.Err != nil {
			t.Fatalf("waiting for the children of %q: %v (last seen %v)", p, e.Err, last)
		}
	}
}

// Count returns a WaitChildren condition: exactly n children.
func Count(n int) func([]store.Child) bool {
	return func(kids []store.Child) bool { return len(kids) == n }
}

// WaitGone waits, with watches, until nothing is at p: a store may remove
// a directory Create made some time after its last node went (zkstore's
// reclaim delay). It fails t when WaitTimeout passes first or st fails.
func WaitGone(t testing.TB, st store.Store, p string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
	defer cancel()
	for {
		exists, _, ev, err := st.ExistsW(ctx, p)
		if err != nil {
			t.Fatalf("waiting for %q to go: %v", p, err)
		}
		if !exists {
			return
		}
		if e := <-ev; e.Err != nil {
			t.Fatalf("waiting for %q to go: %v", p, e.Err)
		}
	}
}
