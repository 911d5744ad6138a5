package cache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// Bad input never panics or hangs: a cache that cannot run has stopped
// already, with a typed error, and the zero values have stopped too.
func TestMisuse(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	ctx := t.Context()
	other := cache.NewTree(ctx, st, "/other")
	var base cache.Snapshot
	select {
	case base = <-other.Snapshots():
	case <-time.After(timeout):
		t.Fatal("no snapshot")
	}
	other.Close()
	for _, c := range []struct {
		name string
		node bool
		st   store.Store
		path string
		opts []cache.Option
		want error
	}{
		{"nil store", true, nil, "/a", nil, store.ErrInvalidArgument},
		{"bad path", true, st, "a", nil, store.ErrInvalidPath},
		{"nil option", true, st, "/a", []cache.Option{nil}, store.ErrInvalidArgument},
		{"tree's option", true, st, "/a", []cache.Option{cache.WithDepth(1)}, store.ErrInvalidArgument},
		{"tree's base", true, st, "/a", []cache.Option{cache.WithBase(base)}, store.ErrInvalidArgument},
		{"nil store", false, nil, "/a", nil, store.ErrInvalidArgument},
		{"bad path", false, st, "/a/", nil, store.ErrInvalidPath},
		{"nil option", false, st, "/a", []cache.Option{nil}, store.ErrInvalidArgument},
		{"negative depth", false, st, "/a", []cache.Option{cache.WithDepth(-1)}, store.ErrInvalidArgument},
		{"depth past MaxPathDepth", false, st, "/a", []cache.Option{cache.WithDepth(store.MaxPathDepth + 1)}, store.ErrInvalidArgument},
		{"no nodes", false, st, "/a", []cache.Option{cache.WithMaxNodes(0)}, store.ErrInvalidArgument},
		{"base of another path", false, st, "/a", []cache.Option{cache.WithBase(base)}, store.ErrInvalidArgument},
		{"zero base", false, st, "/a", []cache.Option{cache.WithBase(cache.Snapshot{})}, store.ErrInvalidArgument},
	} {
		var (
			err    error
			closed bool
		)
		if c.node {
			n := cache.NewNode(ctx, c.st, c.path, c.opts...)
			_, open := <-n.Values()
			closed, err = !open, n.Err()
			n.Close()
		} else {
			tr := cache.NewTree(ctx, c.st, c.path, c.opts...)
			_, open := <-tr.Events()
			_, sopen := <-tr.Snapshots()
			closed, err = !open && !sopen, tr.Err()
			tr.Close()
		}
		if !closed || !errors.Is(err, c.want) {
			t.Errorf("node=%v %s: closed %v, Err() = %v; want closed, %v", c.node, c.name, closed, err, c.want)
		}
	}

	// The zero values, and nil pointers, have stopped.
	var zn cache.Node
	var zt cache.Tree
	var nn *cache.Node
	var nt *cache.Tree
	for _, n := range []*cache.Node{&zn, nn} {
		if _, ok := <-n.Values(); ok || !errors.Is(n.Err(), store.ErrInvalidArgument) || n.Close() != nil {
			t.Errorf("zero Node: Values open or Err() = %v", n.Err())
		}
		<-n.Done()
	}
	for _, tr := range []*cache.Tree{&zt, nt} {
		_, ok := <-tr.Events()
		_, sok := <-tr.Snapshots()
		if ok || sok || !errors.Is(tr.Err(), store.ErrInvalidArgument) || tr.Close() != nil {
			t.Errorf("zero Tree: channels open or Err() = %v", tr.Err())
		}
		<-tr.Done()
	}
	var zs cache.Snapshot
	if _, ok := zs.Get("/"); ok || zs.Len() != 0 || len(zs.Paths()) != 0 || len(zs.Nodes()) != 0 || zs.Stale() || zs.Path() != "" {
		t.Errorf("zero Snapshot is not empty")
	}

	// A cancelled ctx, a closed store.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tr := cache.NewTree(cancelled, st, "/a")
	<-tr.Done()
	if !errors.Is(tr.Err(), context.Canceled) {
		t.Errorf("Tree on a cancelled ctx: Err() = %v; want %v", tr.Err(), context.Canceled)
	}
	closedSt := memstore.New()
	closedSt.Close()
	n := cache.NewNode(ctx, closedSt, "/a")
	<-n.Done()
	if !errors.Is(n.Err(), store.ErrClosed) {
		t.Errorf("Node on a closed store: Err() = %v; want %v", n.Err(), store.ErrClosed)
	}
	tr = cache.NewTree(ctx, closedSt, "/a")
	<-tr.Done()
	if !errors.Is(tr.Err(), store.ErrClosed) {
		t.Errorf("Tree on a closed store: Err() = %v; want %v", tr.Err(), store.ErrClosed)
	}
}

// Close with changes in flight, with nothing received, returns at once
// with every goroutine and watch released (TestMain checks goroutines).
func TestCloseInFlight(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st, w := open(t, b), open(t, b)
		ctx, p := ctxFor(t), dir(t)
		stop := make(chan struct{})
		done := backends.Async(func() error {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return nil
				default:
				}
				n, err := w.Create(ctx, p+"/n-", []byte("x"), store.Sequential)
				if err != nil {
					return err
				}
				if err := w.Delete(ctx, n.Path); err != nil {
					return err
				}
			}
		})
		defer func() {
			close(stop)
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		for i := range 10 {
			tr := cache.NewTree(ctx, st, p)
			n := cache.NewNode(ctx, st, p)
			if i%2 == 0 {
				next(t, "event", tr.Events(), tr.Err)
				next(t, "value", n.Values(), n.Err)
			}
			tr.Close()
			n.Close()
			if _, ok := <-tr.Events(); ok {
				t.Fatal("Events open after Close")
			}
		}
	})
}
