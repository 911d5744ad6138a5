package memstore_test

import (
	"fmt"
	"testing"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// BenchmarkCreate measures an ephemeral sequential create, the first step of
// every recipe.
func BenchmarkCreate(b *testing.B) {
	st := memstore.New()
	defer st.Close()
	ctx := b.Context()
	for b.Loop() {
		if _, err := st.Create(ctx, "/bench/lock-", nil, store.EphemeralSequential); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChildren lists a directory of 10 and of 100 contenders.
func BenchmarkChildren(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st := memstore.New()
			defer st.Close()
			ctx := b.Context()
			for range n {
				if _, err := st.Create(ctx, "/bench/lock-", nil, store.EphemeralSequential); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, err := st.Children(ctx, "/bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCreateDelete measures a create and delete pair, so that the tree
// stays small.
func BenchmarkCreateDelete(b *testing.B) {
	st := memstore.New()
	defer st.Close()
	ctx := b.Context()
	for b.Loop() {
		n, err := st.Create(ctx, "/bench/lock-", nil, store.EphemeralSequential)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Delete(ctx, n.Path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWatchDelivery measures the time from a delete by one session to
// the event in another session's exists-watch, the step of every lock
// handoff.
func BenchmarkWatchDelivery(b *testing.B) {
	srv := memstore.NewServer()
	a, w := srv.Open(), srv.Open()
	defer a.Close()
	defer w.Close()
	ctx := b.Context()
	for b.Loop() {
		n, err := a.Create(ctx, "/bench/lock-", nil, store.EphemeralSequential)
		if err != nil {
			b.Fatal(err)
		}
		_, _, ch, err := w.ExistsW(ctx, n.Path)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Delete(ctx, n.Path); err != nil {
			b.Fatal(err)
		}
		if ev := <-ch; ev.Type != store.EventDeleted {
			b.Fatalf("event %+v; want deleted", ev)
		}
	}
}
