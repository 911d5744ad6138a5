package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	gosync "sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// waitAll waits for every Pending and fails the test for each that did not
// store its item.
func waitAll(t *testing.T, ctx context.Context, ps []*queue.Pending) {
	t.Helper()
	for i, p := range ps {
		if err := p.Wait(ctx); err != nil {
			t.Errorf("PutAsync %d: Wait() = %v; want nil", i, err)
		}
	}
}

// TestPutAsync: a goroutine's PutAsyncs, more than one request holds,
// store every item once; with one request in flight at a time, in the
// order of the calls.
func TestPutAsync(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		for _, n := range []int{0, 1} {
			t.Run(fmt.Sprintf("inflight=%d", n), func(t *testing.T) {
				ctx := ctxT(t)
				var opts []queue.Option
				if n > 0 {
					opts = append(opts, queue.WithPutsInFlight(n))
				}
				q := queue.New(be.Open(t), qpath(t), opts...)
				const items = 2*store.MaxBatchNodes + 50
				want, data := strs("a", items)
				ps := make([]*queue.Pending, items)
				buf := make([]byte, 0, 16)
				for i, d := range data {
					// One buffer for every call: PutAsync copies it.
					buf = append(buf[:0], d...)
					ps[i] = q.PutAsync(ctx, buf, 0)
				}
				waitAll(t, ctx, ps)
				got := drainAll(t, ctx, q, items)
				if n != 1 {
					slices.Sort(got)
					slices.Sort(want)
				}
				if !slices.Equal(got, want) {
					t.Errorf("took %q; want %q", got, want)
				}
			})
		}
	})
}

// TestPutAsyncCoalesce: while the cap's requests are in flight, PutAsyncs
// join the next request and return at once; it goes, with all of them,
// when one returns; a PutAsync whose ctx ends leaves it, and a request that
// every item left is called off and adds nothing.
func TestPutAsyncCoalesce(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx := ctxT(t)
		st := be.Open(t)
		g := &gateStore{Store: st, arrived: make(chan int), release: make(chan struct{})}
		var once gosync.Once
		releaseAll := func() { once.Do(func() { close(g.release) }) }
		defer releaseAll()
		q := queue.New(g, qpath(t), queue.WithPutsInFlight(1))
		if _, err := q.Settings(ctx); err != nil { // the first check, before the gate matters
			t.Fatalf("Settings() = %v; want nil", err)
		}
		arrived := func() int {
			t.Helper()
			select {
			case k := <-g.arrived:
				return k
			case <-ctx.Done():
				t.Fatal("no request arrived")
				return 0
			}
		}
		first := q.PutAsync(ctx, []byte("first"), 0)
		if k := arrived(); k != 1 {
			t.Fatalf("the first PutAsync's request carries %d items; want 1", k)
		}
		left := make(chan struct{}, 2)
		queue.OnPutLeave(q, func() { left <- struct{}{} })
		leaver, leave := context.WithCancelCause(ctx)
		errLeft := errors.New("left")
		ps := []*queue.Pending{
			q.PutAsync(ctx, []byte("a"), 0),
			q.PutAsync(leaver, []byte("b"), 0),
			q.PutAsync(ctx, []byte("c"), 0),
		}
		for _, p := range append(ps, first) {
			if p.Err() != nil {
				t.Errorf("Err() of a put in flight = %v; want nil", p.Err())
			}
		}
		leave(errLeft)
		releaseOne(t, ctx, g) // the first request returns
		if k := arrived(); k != 3 {
			t.Errorf("the waiting PutAsyncs' request carries %d items; want 3", k)
		}
		releaseOne(t, ctx, g)
		waitAll(t, ctx, append(ps, first))

		// A request every item left is called off.
		hold := q.PutAsync(ctx, []byte("hold"), 0)
		if k := arrived(); k != 1 {
			t.Fatalf("request of %d items; want 1", k)
		}
		gone, goneCancel := context.WithCancelCause(ctx)
		lost := q.PutAsync(gone, []byte("gone"), 0)
		goneCancel(errLeft)
		for range 2 { // b's leave and gone's, before gone's request may go
			select {
			case <-left:
			case <-ctx.Done():
				t.Fatal("a PutAsync whose ctx ended did not leave its request")
			}
		}
		releaseAll()
		if err := lost.Wait(ctx); !errors.Is(err, context.Canceled) || !errors.Is(err, errLeft) {
			t.Errorf("Wait() of a put whose ctx ended before its request = %v; want %v with its cause", err, context.Canceled)
		}
		waitAll(t, ctx, []*queue.Pending{hold})
		got := drainAll(t, ctx, queue.New(st, q.Path()), 5)
		if want := []string{"first", "a", "b", "c", "hold"}; !slices.Equal(got, want) {
			t.Errorf("took %q; want %q (b's ctx ended after its request was formed: it goes with the others)", got, want)
		}
	})
}

// TestPutAsyncHoldsBack: PutAsync blocks while as many full requests wait
// to be sent as may be in flight, until one of them is sent.
func TestPutAsyncHoldsBack(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx := ctxT(t)
		st := be.Open(t)
		g := &gateStore{Store: st, arrived: make(chan int), release: make(chan struct{})}
		var once gosync.Once
		releaseAll := func() { once.Do(func() { close(g.release) }) }
		defer releaseAll()
		q := queue.New(g, qpath(t), queue.WithPutsInFlight(1))
		ps := []*queue.Pending{q.PutAsync(ctx, []byte("alone"), 0)}
		select {
		case <-g.arrived:
		case <-ctx.Done():
			t.Fatal("no request arrived")
		}
		for range store.MaxBatchNodes { // one full request waits
			ps = append(ps, q.PutAsync(ctx, []byte("x"), 0))
		}
		held := make(chan struct{}, 1)
		queue.OnPutHold(q, func() { held <- struct{}{} })
		waitHeld := func(what string) {
			t.Helper()
			select {
			case <-held:
			case <-ctx.Done():
				t.Fatalf("%s behind a full request did not wait", what)
			}
		}
		// One whose ctx ends while it waits fails with ctx's error.
		waiting, stopWaiting := context.WithCancel(ctx)
		gaveUp := make(chan *queue.Pending, 1)
		go func() { gaveUp <- q.PutAsync(waiting, []byte("y"), 0) }()
		waitHeld("a PutAsync")
		stopWaiting()
		select {
		case p := <-gaveUp:
			if err := p.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("PutAsync whose ctx ended while it waited: Err() = %v; want %v", err, context.Canceled)
			}
		case <-ctx.Done():
			t.Fatal("PutAsync whose ctx ended while it waited did not return")
		}
		// One that waits goes once the full request is sent.
		blocked := make(chan *queue.Pending, 1)
		go func() { blocked <- q.PutAsync(ctx, []byte("z"), 0) }()
		waitHeld("another PutAsync")
		releaseOne(t, ctx, g) // the request in flight returns: the full one goes
		var p *queue.Pending
		select {
		case p = <-blocked:
		case <-ctx.Done():
			t.Fatal("PutAsync still blocked after the full request was sent")
		}
		releaseAll()
		waitAll(t, ctx, append(ps, p))
		drainAll(t, ctx, queue.New(st, q.Path()), store.MaxBatchNodes+2)
	})
}

// TestPutAsyncMisuse: bad input fails the Pending with a typed error
// before any I/O, and never panics; the zero and nil Pending are done and
// report misuse.
func TestPutAsyncMisuse(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx := ctxT(t)
		s := be.Open(t)
		path := qpath(t)
		q := newQueue(t, s, path, queue.AtMostOnce)
		ended, end := context.WithCancel(ctx)
		end()
		closed := be.Open(t)
		closed.Close()
		put(t, ctx, q, "settings", 0) // the queue's settings, stored
		for _, c := range []struct {
			what string
			q    *queue.Queue
			ctx  context.Context
			data []byte
			want error
		}{
			{"nil Queue", nil, ctx, []byte("x"), store.ErrInvalidArgument},
			{"zero Queue", new(queue.Queue), ctx, []byte("x"), store.ErrInvalidArgument},
			{"bad option", queue.New(s, path, queue.WithPutsInFlight(0)), ctx, []byte("x"), store.ErrInvalidArgument},
			{"data over MaxDataSize", q, ctx, make([]byte, store.MaxDataSize+1), store.ErrTooLarge},
			{"ended ctx at the first check", queue.New(s, path), ended, []byte("x"), context.Canceled},
			{"closed session", queue.New(closed, path), ctx, []byte("x"), store.ErrClosed},
			{"other settings", queue.New(s, path, queue.WithDelivery(queue.AtLeastOnce)), ctx, []byte("x"), queue.ErrMismatch},
		} {
			p := c.q.PutAsync(c.ctx, c.data, 0)
			if err := p.Wait(ctx); !errors.Is(err, c.want) {
				t.Errorf("PutAsync(%s): Wait() = %v; want %v", c.what, err, c.want)
			}
		}
		for _, p := range []*queue.Pending{nil, new(queue.Pending)} {
			select {
			case <-p.Done():
			default:
				t.Errorf("Done() of %#v is not closed; want closed", p)
			}
			if err := p.Wait(ctx); !errors.Is(err, store.ErrInvalidArgument) {
				t.Errorf("Wait() of %#v = %v; want %v", p, err, store.ErrInvalidArgument)
			}
		}
		drainAll(t, ctx, q, 1) // the settings' item only
	})
}

// TestPutAsyncSessionEnd: puts in flight when the session ends fail with
// its end, and later ones too.
func TestPutAsyncSessionEnd(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx := ctxT(t)
		st := be.Open(t)
		q := newQueue(t, st, qpath(t), queue.AtMostOnce)
		put(t, ctx, q, "settings", 0)
		ps := make([]*queue.Pending, 50)
		for i := range ps {
			ps[i] = q.PutAsync(ctx, []byte("x"), 0)
		}
		st.Close()
		for i, p := range ps {
			if err := p.Wait(ctx); err != nil && !errors.Is(err, store.ErrClosed) {
				t.Errorf("PutAsync %d as the session closed: Wait() = %v; want nil or %v", i, err, store.ErrClosed)
			}
		}
		if err := q.PutAsync(ctx, []byte("y"), 0).Wait(ctx); !errors.Is(err, store.ErrClosed) {
			t.Errorf("PutAsync after Close: Wait() = %v; want %v", err, store.ErrClosed)
		}
	})
}

// TestPutAsyncLostReply: a request whose reply was lost is found again and
// its items added once.
func TestPutAsyncLostReply(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		rl, ok := be.(storetest.ReplyLoser)
		if !ok {
			t.Skip("backend cannot lose replies")
		}
		ctx := ctxT(t)
		s := be.Open(t)
		q := newQueue(t, s, qpath(t), queue.AtMostOnce)
		put(t, ctx, q, "settings", 0)
		rl.LoseNextCreateReply(t, s)
		if err := q.PutAsync(ctx, []byte("once"), 3).Wait(ctx); err != nil {
			t.Fatalf("PutAsync after a lost reply: Wait() = %v; want nil", err)
		}
		if got := drainAll(t, ctx, q, 2); !slices.Equal(got, []string{"once", "settings"}) {
			t.Errorf("took %q; want once (priority 3), then settings", got)
		}
	})
}

// TestPutAsyncAlone: an item too large for a batch goes in a request of
// its own, and so does every item on a store without a batch create.
func TestPutAsyncAlone(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx := ctxT(t)
		s := be.Open(t)
		path := qpath(t)
		q := newQueue(t, s, path, queue.AtMostOnce)
		big := make([]byte, store.MaxDataSize)
		ps := []*queue.Pending{
			q.PutAsync(ctx, big, 0),
			queue.New(noBatch{s}, path).PutAsync(ctx, []byte("small"), 0),
		}
		waitAll(t, ctx, ps)
		drainAll(t, ctx, q, 2)
	})
}

// releaseOne lets one request held by g return.
func releaseOne(t *testing.T, ctx context.Context, g *gateStore) {
	t.Helper()
	select {
	case g.release <- struct{}{}:
	case <-ctx.Done():
		t.Fatal("no request waited to return")
	}
}
