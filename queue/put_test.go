package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	gosync "sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// drainAll takes every item of q (at-most-once) and returns their data in
// the order taken; it fails unless the queue then holds exactly want items.
func drainAll(t *testing.T, ctx context.Context, q *queue.Queue, want int) []string {
	t.Helper()
	var got []string
	for {
		it, ok, err := q.TryTake(ctx)
		if err != nil {
			t.Fatalf("TryTake() = %v; want nil", err)
		}
		if !ok {
			break
		}
		got = append(got, string(it.Data))
	}
	if len(got) != want {
		t.Fatalf("took %d items %q; want %d", len(got), got, want)
	}
	return got
}

func strs(prefix string, n int) ([]string, [][]byte) {
	var s []string
	var b [][]byte
	for i := range n {
		s = append(s, fmt.Sprintf("%s%d", prefix, i))
		b = append(b, []byte(s[i]))
	}
	return s, b
}

// TestPutBatch: a batch is delivered whole, in its order, after what was
// put before it and before what was put after.
func TestPutBatch(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx := ctxT(t)
		q := newQueue(t, be.Open(t), qpath(t), queue.AtMostOnce)
		put(t, ctx, q, "first", 0)
		want, batch := strs("b", 12)
		if err := q.PutBatch(ctx, batch); err != nil {
			t.Fatalf("PutBatch(%d items) = %v; want nil", len(batch), err)
		}
		put(t, ctx, q, "last", 0)
		if n, err := q.Len(ctx); err != nil || n != len(batch)+2 {
			t.Errorf("Len() = %d, %v; want %d", n, err, len(batch)+2)
		}
		want = slices.Concat([]string{"first"}, want, []string{"last"})
		if got := drainAll(t, ctx, q, len(want)); !slices.Equal(got, want) {
			t.Errorf("took %q; want %q", got, want)
		}
	})
}

// noBatch hides the store's BatchCreator.
type noBatch struct {
	store.Store
}

// TestPutBatchMisuse: bad batches fail before any I/O, with a typed error,
// and add nothing.
func TestPutBatchMisuse(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx := ctxT(t)
		s := be.Open(t)
		path := qpath(t)
		q := newQueue(t, s, path, queue.AtMostOnce)
		many := make([][]byte, store.MaxBatchNodes+1)
		heavy := [][]byte{make([]byte, store.MaxBatchSize/2), make([]byte, store.MaxBatchSize/2)}
		cancelledCtx, cancel := context.WithCancel(ctx)
		cancel()
		hidden := queue.New(noBatch{s}, path)
		for _, c := range []struct {
			what  string
			q     *queue.Queue
			ctx   context.Context
			items [][]byte
			want  error
		}{
			{"nil batch", q, ctx, nil, store.ErrInvalidArgument},
			{"empty batch", q, ctx, [][]byte{}, store.ErrInvalidArgument},
			{"item over MaxDataSize", q, ctx, [][]byte{[]byte("ok"), make([]byte, store.MaxDataSize+1)}, store.ErrTooLarge},
			{"over MaxBatchNodes items", q, ctx, many, store.ErrTooLarge},
			{"over MaxBatchSize bytes", q, ctx, heavy, store.ErrTooLarge},
			{"cancelled ctx", q, cancelledCtx, [][]byte{[]byte("x")}, context.Canceled},
			{"nil Queue", nil, ctx, [][]byte{[]byte("x")}, store.ErrInvalidArgument},
			{"zero Queue", new(queue.Queue), ctx, [][]byte{[]byte("x")}, store.ErrInvalidArgument},
			{"store without BatchCreator", hidden, ctx, [][]byte{[]byte("x")}, queue.ErrNoBatch},
		} {
			if err := c.q.PutBatch(c.ctx, c.items); !errors.Is(err, c.want) {
				t.Errorf("PutBatch(%s) = %v; want %v", c.what, err, c.want)
			}
		}
		if n, err := q.Len(ctx); err != nil || n != 0 {
			t.Errorf("Len() after refused batches = %d, %v; want 0", n, err)
		}
		// A Queue over a store without BatchCreator still puts one by one.
		if err := hidden.Put(ctx, []byte("one")); err != nil {
			t.Errorf("Put() without BatchCreator = %v; want nil", err)
		}
	})
}

// TestPutBatchLostReply: a batch whose reply was lost is found again by its
// first item and added once.
func TestPutBatchLostReply(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		rl, ok := be.(storetest.ReplyLoser)
		if !ok {
			t.Skip("backend cannot lose replies")
		}
		ctx := ctxT(t)
		s := be.Open(t)
		q := newQueue(t, s, qpath(t), queue.AtMostOnce)
		put(t, ctx, q, "settings", 0) // the first check goes before the lost reply
		want, batch := strs("b", 5)
		rl.LoseNextCreateReply(t, s)
		if err := q.PutBatch(ctx, batch); err != nil {
			t.Fatalf("PutBatch after a lost reply = %v; want nil", err)
		}
		if got := drainAll(t, ctx, q, len(batch)+1); !slices.Equal(got[1:], want) {
			t.Errorf("took %q; want settings then %q", got, want)
		}
	})
}

// TestPutsCoalesce: Puts that wait for a put in flight go in one request,
// in the order they came; one whose ctx ends returns at once and its item
// may still go with the others; a group that every member left is not
// sent.
func TestPutsCoalesce(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx := ctxT(t)
		cs := countstore.New(be.Open(t))
		defer cs.Close()
		q := newQueue(t, cs, qpath(t), queue.AtMostOnce)
		put(t, ctx, q, "settings", 0)
		drainAll(t, ctx, q, 1)

		joined := make(chan struct{})
		queue.OnPutJoin(q, func() { joined <- struct{}{} })
		release := queue.HoldPuts(q)
		var wg gosync.WaitGroup
		errs := make([]error, 5)
		leaver, leave := context.WithCancel(ctx)
		defer leave()
		for i := range errs {
			c := ctx
			if i == len(errs)-1 {
				c = leaver
			}
			wg.Go(func() { errs[i] = q.Put(c, fmt.Appendf(nil, "p%d", i)) })
			select {
			case <-joined:
			case <-ctx.Done():
				t.Fatalf("Put %d did not wait for the put in flight", i)
			}
		}
		leave()
		cs.Reset()
		release()
		wg.Wait()
		for i, err := range errs[:len(errs)-1] {
			if err != nil {
				t.Errorf("Put(p%d) = %v; want nil", i, err)
			}
		}
		if err := errs[len(errs)-1]; !errors.Is(err, context.Canceled) && err != nil {
			t.Errorf("Put whose ctx ended = %v; want %v or nil", err, context.Canceled)
		}
		if c := cs.Counts(); c.Calls["CreateBatch"] != 1 || c.Total() != 1 {
			t.Errorf("calls for 5 waiting Puts = %v; want one CreateBatch", c.Calls)
		}
		want, _ := strs("p", 5)
		if got := drainAll(t, ctx, q, 5); !slices.Equal(got, want) {
			t.Errorf("took %q; want %q", got, want)
		}

		// Every member left: nothing is added.
		release = queue.HoldPuts(q)
		gone, goneCancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- q.Put(gone, []byte("gone")) }()
		select {
		case <-joined:
		case <-ctx.Done():
			t.Fatal("Put did not wait for the put in flight")
		}
		goneCancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Put whose ctx ended while it waited = %v; want %v", err, context.Canceled)
		}
		release()
		drainAll(t, ctx, q, 0)
	})
}

// TestConcurrentPuts: Puts from many goroutines on one session add every
// item once, and each producer's items in the order it put them.
func TestConcurrentPuts(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		ctx := ctxT(t)
		q := newQueue(t, be.Open(t), qpath(t), queue.AtMostOnce)
		const producers, each = 8, 25
		var wg gosync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for i := range each {
					if err := q.Put(ctx, fmt.Appendf(nil, "%d/%d", p, i)); err != nil {
						t.Errorf("Put() = %v; want nil", err)
						return
					}
				}
			})
		}
		wg.Wait()
		next := make([]int, producers)
		for _, s := range drainAll(t, ctx, q, producers*each) {
			var p, i int
			if _, err := fmt.Sscanf(s, "%d/%d", &p, &i); err != nil {
				t.Fatalf("item %q: %v", s, err)
			}
			if i != next[p] {
				t.Errorf("item %q after %d of producer %d; want items in the order each producer put them, once", s, next[p], p)
			}
			next[p] = i + 1
		}
	})
}

// gateStore holds every CreateBatch (a put's request) until released, and
// reports how many items each one carries as it arrives.
type gateStore struct {
	store.Store
	arrived chan int
	release chan struct{}
}

func (g *gateStore) Unwrap() store.Store { return g.Store }

func (g *gateStore) CreateBatch(ctx context.Context, parent string, batch []store.BatchNode, mode store.Mode) ([]store.Node, error) {
	select {
	case g.arrived <- len(batch):
	case <-g.release: // the test has ended: pass
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	bc, _ := store.Find[store.BatchCreator](g.Store)
	return bc.CreateBatch(ctx, parent, batch, mode)
}

// TestPutsInFlight: WithPutsInFlight(n) lets n Puts' requests be in flight
// at once, each alone; the Puts that come meanwhile wait and go together,
// in one request, when one returns. Without the option the cap is 2.
func TestPutsInFlight(t *testing.T) {
	backends.Run(t, func(t *testing.T, be storetest.Backend) {
		for _, n := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
				ctx := ctxT(t)
				st := be.Open(t)
				defer st.Close()
				if _, ok := store.Find[store.BatchCreator](st); !ok {
					t.Skip("the store has no batch create: Puts go alone")
				}
				g := &gateStore{Store: st, arrived: make(chan int), release: make(chan struct{})}
				var opts []queue.Option
				want := n
				if n > 0 {
					opts = append(opts, queue.WithPutsInFlight(n))
				} else {
					want = 2
				}
				q := queue.New(g, qpath(t), opts...)
				joined := make(chan struct{})
				queue.OnPutJoin(q, func() { joined <- struct{}{} })

				// next reports what a Put did: sent a request of k items
				// (k > 0) or joined the next one (0).
				next := func() int {
					t.Helper()
					select {
					case k := <-g.arrived:
						return k
					case <-joined:
						return 0
					case <-ctx.Done():
						t.Fatal("a Put neither sent a request nor waited")
						return 0
					}
				}
				var wg gosync.WaitGroup
				defer wg.Wait()
				var once gosync.Once
				releaseAll := func() { once.Do(func() { close(g.release) }) }
				defer releaseAll() // before wg.Wait, where the test fails early
				errs := make([]error, want+2)
				for i := range errs {
					wg.Go(func() { errs[i] = q.Put(ctx, fmt.Appendf(nil, "p%d", i)) })
					switch k := next(); {
					case i < want && k != 1:
						t.Fatalf("Put %d with %d in flight: request of %d items (0: waited); want 1, alone", i, i, k)
					case i >= want && k != 0:
						t.Fatalf("Put %d with %d in flight: request of %d items; want it to wait", i, want, k)
					}
				}
				select { // one request returns ...
				case g.release <- struct{}{}:
				case <-ctx.Done():
					t.Fatal("no request of the Puts waited to return")
				}
				if k := next(); k != 2 {
					t.Errorf("the waiting Puts' request carries %d items; want 2, together", k)
				}
				releaseAll() // ... and the rest
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Errorf("Put(p%d) = %v; want nil", i, err)
					}
				}
				drainAll(t, ctx, queue.New(st, q.Path()), len(errs))
			})
		}
	})
}
