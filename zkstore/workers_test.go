package zkstore_test

import (
	"errors"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// TestWorkersReused: the goroutines that run a Store's requests are kept
// and used again (a new one per request would grow its stack each time),
// no more than MaxIdle of them wait once the requests are done, and none
// is left after Close.
func TestWorkersReused(t *testing.T) {
	_, b := server(t)
	st := b.Open(t).(*zkstore.Store)
	ctx, root := ctxFor(t), dirFor(t)
	get := func() error {
		if _, err := st.Get(ctx, root); err != nil && !errors.Is(err, store.ErrNoNode) {
			return err
		}
		return nil
	}
	must[store.Node](t)(st.Create(ctx, root, nil, store.Persistent))
	before, _ := zkstore.Workers(st)
	for range 100 {
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	// A caller is answered before its goroutine is back among the idle
	// ones, so one after another may take a second one now and then.
	if started, _ := zkstore.Workers(st); started-before > 2 {
		t.Errorf("100 requests one after another started %d goroutines; want them run on the few kept", started-before)
	}
	var g errgroup.Group
	for range 64 {
		g.Go(func() error {
			for range 5 {
				if err := get(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, idle := zkstore.Workers(st); idle > zkstore.MaxIdle {
		t.Errorf("after 64 callers at once: %d goroutines wait; want at most %d", idle, zkstore.MaxIdle)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, idle := zkstore.Workers(st); idle != 0 {
		t.Errorf("after Close: %d goroutines wait; want none", idle)
	}
}
