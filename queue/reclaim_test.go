package queue_test

import (
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TestDirectoriesKept: a queue keeps its settings and its directories for
// its life, empty or not; what an item leaves (its claim, its count of
// deliveries) goes with it.
func TestDirectoriesKept(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s := b.Open(t)
				ctx, path := ctxT(t), qpath(t)
				q := newQueue(t, s, path, d)
				put(t, ctx, q, "a", 0)
				if got := take(t, ctx, q); got != "a" {
					t.Fatalf("Take() = %q; want a", got)
				}
				kids, err := s.Children(ctx, path)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, k := range kids {
					names = append(names, k.Name)
					sub, err := s.Children(ctx, store.Join(path, k.Name))
					if err != nil {
						t.Fatal(err)
					}
					if len(sub) != 0 {
						t.Errorf("%s/%s holds %v after the only item was taken; want nothing", path, k.Name, sub)
					}
				}
				for _, want := range []string{"config", "items"} {
					found := false
					for _, n := range names {
						found = found || n == want
					}
					if !found {
						t.Errorf("%q holds %q; want %q kept", path, names, want)
					}
				}
			})
		}
	})
}
