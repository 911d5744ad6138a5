package proptest

import (
	"context"
	"errors"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// waitChildren waits, with watches on a session of its own, until want
// accepts the children of p (none when p is missing): a contender's node
// appears some time after its call started. On timeout it fails t with
// state(), the model's view.
func waitChildren(t *rapid.T, ctx context.Context, srv *memstore.Server, p string, timeout time.Duration, want func([]store.Child) bool, state func() string) {
	st := srv.Open()
	defer st.Close()
	deadline := time.After(timeout)
	for {
		kids, ev, err := st.ChildrenW(ctx, p)
		if errors.Is(err, store.ErrNoNode) {
			var exists bool
			if exists, _, ev, err = st.ExistsW(ctx, p); err == nil && exists {
				continue // made since the listing: list again
			}
		}
		if err != nil {
			t.Fatalf("watching %q: %v", p, err)
		}
		if want(kids) {
			return
		}
		select {
		case <-ev:
		case <-deadline:
			t.Fatalf("store has %v; model has %s", kids, state())
		}
	}
}
