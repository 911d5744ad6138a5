package queue_test

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

const (
	producers   = 4
	consumers   = 4
	perProducer = 50
)

// delivery is one item received by a consumer.
type delivery struct {
	consumer, producer, n int
}

// tally records deliveries and reports when every item was delivered.
type tally struct {
	mu    gosync.Mutex
	seen  map[[2]int]int     // (producer, n) -> times delivered
	log   map[int][]delivery // by consumer
	all   chan struct{}
	count int
}

func newTally() *tally {
	return &tally{seen: map[[2]int]int{}, log: map[int][]delivery{}, all: make(chan struct{})}
}

func (tl *tally) add(d delivery) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	k := [2]int{d.producer, d.n}
	tl.seen[k]++
	tl.log[d.consumer] = append(tl.log[d.consumer], d)
	if tl.seen[k] == 1 {
		tl.count++
		if tl.count == producers*perProducer {
			close(tl.all)
		}
	}
}

// runLoad runs 4 producers and n consumers, each on its own session, on one
// queue. kill, if set, is called by consumer 0 with its first item, which it
// never acks.
func runLoad(t *testing.T, b storetest.Backend, d queue.Delivery, n int, kill func(s store.Store)) *tally {
	ctx := ctxT(t)
	path := qpath(t)
	tl := newTally()
	cctx, stop := context.WithCancel(ctx)
	defer stop()

	var wg gosync.WaitGroup
	errs := make(chan error, producers+n)
	var killedDone <-chan struct{}
	// With a kill, the others consume only once consumer 0 has its first
	// item in hand: on a busy machine they could take every item before it
	// starts, and nobody would be killed.
	gate := make(chan struct{})
	if kill == nil {
		close(gate)
	}
	for c := range n {
		s := b.Open(t)
		defer s.Close()
		q := newQueue(t, s, path, d)
		con := q.Consume(cctx)
		if c == 0 {
			killedDone = con.Done()
		}
		wg.Go(func() {
			if c > 0 {
				select {
				case <-gate:
				case <-cctx.Done():
				}
			}
			dead := false
			for it := range con.Items() {
				var dv delivery
				if _, err := fmt.Sscanf(string(it.Data), "%d-%d", &dv.producer, &dv.n); err != nil {
					errs <- fmt.Errorf("consumer %d: item %q: %v", c, it.Data, err)
					return
				}
				dv.consumer = c
				if c == 0 && kill != nil {
					// Killed with its first item in hand; anything still
					// handed over after that cannot be acked either.
					if !dead {
						kill(s)
						dead = true
						close(gate)
					}
					continue // never acked, never counted
				}
				if err := it.Ack(ctx); err != nil {
					errs <- fmt.Errorf("consumer %d: Ack(%q) = %v", c, it.Data, err)
					return
				}
				tl.add(dv)
			}
			err := con.Err()
			switch {
			case c == 0 && kill != nil:
				if !errors.Is(err, store.ErrSessionExpired) {
					errs <- fmt.Errorf("killed consumer: Err() = %v; want %v", err, store.ErrSessionExpired)
				}
			case !errors.Is(err, context.Canceled):
				errs <- fmt.Errorf("consumer %d: Err() = %v; want %v", c, err, context.Canceled)
			}
		})
	}
	for p := range producers {
		s := b.Open(t)
		defer s.Close()
		q := newQueue(t, s, path, d)
		wg.Go(func() {
			for n := range perProducer {
				if err := q.Put(ctx, fmt.Appendf(nil, "%d-%d", p, n)); err != nil {
					errs <- fmt.Errorf("producer %d: Put(%d) = %v", p, n, err)
					return
				}
			}
		})
	}
	select {
	case <-tl.all:
	case err := <-errs:
		t.Error(err)
	case <-ctx.Done():
		tl.mu.Lock()
		t.Errorf("delivered %d of %d items before the timeout", tl.count, producers*perProducer)
		tl.mu.Unlock()
	}
	if kill != nil {
		// The killed consumer stops once its client learns of the expiry,
		// which on a real store may come after the others are done.
		select {
		case <-killedDone:
		case <-ctx.Done():
			t.Error("killed consumer still running")
		}
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return tl
}

func TestLoadAtMostOnce(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, tt := range []struct{ consumers, slack int }{
			{1, 0}, // one consumer: exact FIFO per producer
			{consumers, queue.MaxSpread - 1},
		} {
			t.Run(fmt.Sprintf("consumers=%d", tt.consumers), func(t *testing.T) {
				tl := runLoad(t, b, queue.AtMostOnce, tt.consumers, nil)
				for k, n := range tl.seen {
					if n != 1 {
						t.Errorf("item %d-%d delivered %d times; want once", k[0], k[1], n)
					}
				}
				checkFIFO(t, tl, tt.slack)
			})
		}
	})
}

func TestLoadAtLeastOnceWithKill(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		killed := false
		tl := runLoad(t, b, queue.AtLeastOnce, consumers, func(s store.Store) {
			killed = true
			b.Expire(t, s)
		})
		if !killed {
			t.Error("consumer 0 received no item to be killed with")
		}
		dups := 0
		for _, n := range tl.seen {
			dups += n - 1
		}
		// Only consumer 0's unacked items can come twice, and those were
		// not counted: a duplicate means an acked item came back.
		if dups != 0 {
			t.Errorf("%d items acked more than once; want 0", dups)
		}
	})
}

// checkFIFO checks that each consumer received each producer's items in the
// order they were put, up to the spread of competing consumers: an item can
// overtake fewer than queue.MaxSpread items. With one consumer the order is
// exact.
func checkFIFO(t *testing.T, tl *tally, slack int) {
	t.Helper()
	for c, log := range tl.log {
		last := map[int]int{}
		for _, d := range log {
			prev, ok := last[d.producer]
			if ok && (d.n == prev || d.n < prev-slack) {
				t.Errorf("consumer %d got item %d-%d after %d-%d; want FIFO per producer (slack %d)", c, d.producer, d.n, d.producer, prev, slack)
			}
			if !ok || d.n > prev {
				last[d.producer] = d.n
			}
		}
	}
}
