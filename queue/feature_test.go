package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

func newQueueOpts(t *testing.T, s store.Store, path string, opts ...queue.Option) *queue.Queue {
	t.Helper()
	return queue.New(s, path, opts...)
}

func mustTake(t *testing.T, ctx context.Context, q *queue.Queue) *queue.Item {
	t.Helper()
	it, err := q.Take(ctx)
	if err != nil {
		t.Fatalf("Take() = %v; want nil", err)
	}
	return it
}

func wantEmpty(t *testing.T, ctx context.Context, q *queue.Queue) {
	t.Helper()
	if it, ok, err := q.TryTake(ctx); ok || err != nil {
		t.Fatalf("TryTake() = %v, %v, %v; want nil, false, nil", it, ok, err)
	}
}

// The visibility timeout on etcd is a lease TTL: whole seconds, at least
// the server's minimum (2 s for the test cluster).
const visibility = time.Second

// A claim held by a live consumer that neither acks nor extends it ends at
// its visibility timeout: the holder is told (its Context, its Ack), and
// the item, with its id, goes to another consumer, counted twice.
func TestVisibilityTimeout(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		t.Parallel() // it waits for timeouts
		s1, s2 := b.Open(t), b.Open(t)
		ctx, path := ctxT(t), qpath(t)
		q1 := newQueueOpts(t, s1, path, queue.WithDelivery(queue.AtLeastOnce), queue.WithVisibilityTimeout(visibility))
		q2 := newQueueOpts(t, s2, path) // adopts the stored settings
		put(t, ctx, q1, "a", 0)
		put(t, ctx, q1, "b", 0)
		before := time.Now()
		stuck := mustTake(t, ctx, q1)
		if string(stuck.Data) != "a" || stuck.Deliveries != 1 {
			t.Fatalf("Take() = %q, delivered %d; want a, 1", stuck.Data, stuck.Deliveries)
		}
		if d, ok := stuck.Deadline(); !ok || d.Before(before.Add(visibility)) || d.After(time.Now().Add(visibility+5*time.Second)) {
			t.Errorf("Deadline() = %v from now, %v; want about %v", time.Until(d), ok, visibility)
		}
		held := stuck.Context()
		if got := take(t, ctx, q2); got != "b" {
			t.Fatalf("Take() on the other session = %q; want b (a is claimed)", got)
		}
		again := mustTake(t, ctx, q2) // waits for the timeout
		if string(again.Data) != "a" || again.ID != stuck.ID || again.Deliveries != 2 {
			t.Errorf("redelivered %q (id %s, delivered %d); want a (id %s, delivered 2)", again.Data, again.ID, again.Deliveries, stuck.ID)
		}
		select {
		case <-stuck.Context().Done():
		default:
			t.Error("the stuck holder's Context is not cancelled once its item went to another")
		}
		if cause := context.Cause(held); !errors.Is(cause, queue.ErrClaimLost) {
			t.Errorf("Context cause = %v; want %v", cause, queue.ErrClaimLost)
		}
		if err := stuck.Ack(ctx); !errors.Is(err, queue.ErrClaimLost) {
			t.Errorf("Ack() after the timeout = %v; want %v", err, queue.ErrClaimLost)
		}
		if err := stuck.Extend(ctx); !errors.Is(err, queue.ErrClaimLost) {
			t.Errorf("Extend() after the timeout = %v; want %v", err, queue.ErrClaimLost)
		}
		if err := again.Ack(ctx); err != nil {
			t.Fatalf("Ack() of the redelivered item = %v", err)
		}
		wantEmpty(t, ctx, q1)
	})
}

// Extend keeps a claim past its visibility timeout, and a Consumer extends
// the claim of the item it holds while nobody receives it.
func TestExtend(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		t.Parallel() // time passing is what it tests
		s1, s2 := b.Open(t), b.Open(t)
		ctx, path := ctxT(t), qpath(t)
		opts := []queue.Option{queue.WithDelivery(queue.AtLeastOnce), queue.WithVisibilityTimeout(visibility)}
		q1, q2 := newQueueOpts(t, s1, path, opts...), newQueueOpts(t, s2, path, opts...)
		put(t, ctx, q1, "a", 0)
		taken := time.Now()
		it := mustTake(t, ctx, q1)
		d0, _ := it.Deadline()
		ttl := d0.Sub(taken) // etcd's lease TTL may be longer than asked
		// Go half a timeout past the claim's first deadline, extending it
		// four times a timeout.
		for end := d0.Add(visibility / 2); time.Now().Before(end); {
			<-time.After(visibility / 4) // time passing is what is tested
			if err := it.Extend(ctx); err != nil {
				t.Fatalf("Extend() = %v", err)
			}
			wantEmpty(t, ctx, q2)
		}
		if d, _ := it.Deadline(); !d.After(d0) {
			t.Errorf("Deadline() after Extend = %v; want after %v", d, d0)
		}
		if it.Context().Err() != nil {
			t.Errorf("Context() of an extended claim ended: %v", context.Cause(it.Context()))
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatalf("Ack() = %v", err)
		}

		// A Consumer holding an item nobody receives keeps its claim.
		put(t, ctx, q1, "b", 0)
		c := q1.Consume(ctx)
		defer c.Close()
		deadline := time.Now().Add(ttl + visibility/2)
		for time.Now().Before(deadline) {
			<-time.After(visibility / 2)
			wantEmpty(t, ctx, q2)
		}
		select {
		case it := <-c.Items():
			if string(it.Data) != "b" || it.Deliveries != 1 {
				t.Errorf("received %q, delivered %d; want b, 1", it.Data, it.Deliveries)
			}
			if err := it.Ack(ctx); err != nil {
				t.Errorf("Ack() = %v", err)
			}
		case <-ctx.Done():
			t.Fatal("consumer delivered nothing")
		}
	})
}

// An item delivered the maximum number of times goes to the dead-letter
// queue, with its id, priority and data, instead of being delivered again;
// deliveries made by sessions that ended count.
func TestDeadLetter(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s := b.Open(t)
				ctx, path := ctxT(t), qpath(t)
				dlqPath := path + "-dead"
				q := newQueueOpts(t, s, path, queue.WithDelivery(d), queue.WithDeadLetter(dlqPath, 3))
				put(t, ctx, q, "poison", 7)
				put(t, ctx, q, "fine", 0)
				var id string
				for n := 1; n <= 3; n++ {
					it := mustTake(t, ctx, q)
					if string(it.Data) != "poison" || it.Deliveries != n || it.Priority != 7 {
						t.Fatalf("Take() = %q, delivered %d, priority %d; want poison, %d, 7", it.Data, it.Deliveries, it.Priority, n)
					}
					if id == "" {
						id = it.ID
					} else if it.ID != id {
						t.Errorf("ID %s on delivery %d; want %s as before", it.ID, n, id)
					}
					if n == 2 && d == queue.AtLeastOnce {
						// A consumer that crashes with it counts too.
						s2 := b.Open(t)
						q2 := newQueueOpts(t, s2, path)
						if err := it.Nack(ctx); err != nil {
							t.Fatal(err)
						}
						it2 := mustTake(t, ctx, q2)
						if it2.Deliveries != 3 {
							t.Fatalf("Take() on another session: delivered %d; want 3", it2.Deliveries)
						}
						b.Expire(t, s2)
						break
					}
					if err := it.Nack(ctx); err != nil {
						t.Fatalf("Nack() = %v", err)
					}
				}
				if got := take(t, ctx, q); got != "fine" {
					t.Errorf("Take() after %d deliveries of poison = %q; want fine", 3, got)
				}
				wantEmpty(t, ctx, q)
				dlq := newQueueOpts(t, s, dlqPath)
				it := mustTake(t, ctx, dlq)
				if string(it.Data) != "poison" || it.ID != id || it.Priority != 7 || it.Deliveries != 1 {
					t.Errorf("dead letter = %q (id %s, priority %d, delivered %d); want poison (id %s, priority 7, delivered 1)",
						it.Data, it.ID, it.Priority, it.Deliveries, id)
				}
				if err := it.Ack(ctx); err != nil {
					t.Fatal(err)
				}
				wantEmpty(t, ctx, dlq)
				if n, err := q.Len(ctx); err != nil || n != 0 {
					t.Errorf("Len() = %d, %v; want 0", n, err)
				}
				if kids, err := s.Children(ctx, path+"/deliveries"); err == nil && len(kids) != 0 {
					t.Errorf("delivery counts left: %v", kids)
				}
			})
		}
	})
}

// Len counts claimed items too; Peek shows the item a Take would take,
// without taking it.
func TestLenPeek(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s1, s2 := b.Open(t), b.Open(t)
				ctx, path := ctxT(t), qpath(t)
				q1, q2 := newQueue(t, s1, path, d), newQueue(t, s2, path, d)
				if n, err := q1.Len(ctx); n != 0 || err != nil {
					t.Errorf("Len() of a new queue = %d, %v; want 0, nil", n, err)
				}
				if it, ok, err := q1.Peek(ctx); ok || err != nil {
					t.Errorf("Peek() of a new queue = %v, %v, %v; want nil, false, nil", it, ok, err)
				}
				put(t, ctx, q2, "low", 0)
				put(t, ctx, q2, "high", 5)
				put(t, ctx, q2, "low2", 0)
				if n, err := q1.Len(ctx); n != 3 || err != nil {
					t.Errorf("Len() = %d, %v; want 3", n, err)
				}
				p, ok, err := q1.Peek(ctx)
				if !ok || err != nil || string(p.Data) != "high" || p.Priority != 5 || p.Deliveries != 0 {
					t.Fatalf("Peek() = %+v, %v, %v; want high, priority 5, delivered 0", p, ok, err)
				}
				for name, err := range map[string]error{"Ack": p.Ack(ctx), "Nack": p.Nack(ctx), "Extend": p.Extend(ctx)} {
					if !errors.Is(err, queue.ErrPeeked) {
						t.Errorf("%s() of a peeked item = %v; want %v", name, err, queue.ErrPeeked)
					}
				}
				it := mustTake(t, ctx, q2)
				if it.ID != p.ID || string(it.Data) != "high" {
					t.Errorf("Take() after Peek = %q (id %s); want the peeked item (id %s)", it.Data, it.ID, p.ID)
				}
				want := 2
				if d == queue.AtLeastOnce {
					want = 3 // claimed, not acked
				}
				if n, err := q1.Len(ctx); n != want || err != nil {
					t.Errorf("Len() with one item taken = %d, %v; want %d", n, err, want)
				}
				if p, ok, err := q1.Peek(ctx); !ok || err != nil || string(p.Data) != "low" {
					t.Errorf("Peek() = %v, %v, %v; want low", p, ok, err)
				}
				if err := it.Ack(ctx); err != nil {
					t.Fatal(err)
				}
				if n, err := q1.Len(ctx); n != 2 || err != nil {
					t.Errorf("Len() after Ack = %d, %v; want 2", n, err)
				}
			})
		}
	})
}

// An item keeps its id across Nack, a consumer's give-back and the end of
// its consumer's session; a give-back does not count as a delivery.
func TestStableIDs(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s := b.Open(t)
				ctx, path := ctxT(t), qpath(t)
				q := newQueue(t, s, path, d)
				put(t, ctx, q, "a", 0)
				put(t, ctx, q, "b", 0)
				first := mustTake(t, ctx, q)
				if len(first.ID) == 0 {
					t.Fatal("ID is empty")
				}
				if err := first.Nack(ctx); err != nil {
					t.Fatal(err)
				}
				again := mustTake(t, ctx, q)
				if again.ID != first.ID || again.Deliveries != 2 || string(again.Data) != "a" {
					t.Errorf("after Nack: %q, id %s, delivered %d; want a, id %s, delivered 2", again.Data, again.ID, again.Deliveries, first.ID)
				}
				if err := again.Nack(ctx); err != nil {
					t.Fatal(err)
				}
				// A consumer stopped before handing the item over gives it
				// back uncounted.
				c := q.Consume(ctx)
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				third := mustTake(t, ctx, q)
				if third.ID != first.ID || third.Deliveries != 3 {
					t.Errorf("after a give-back: id %s, delivered %d; want id %s, delivered 3", third.ID, third.Deliveries, first.ID)
				}
				if err := third.Ack(ctx); err != nil {
					t.Fatal(err)
				}
				other := mustTake(t, ctx, q)
				if other.ID == first.ID || string(other.Data) != "b" {
					t.Errorf("second item: %q, id %s; want b with an id of its own", other.Data, other.ID)
				}
			})
		}
	})
}

// TestSettingsStoredOnFirstUse: Settings only reads, and agrees with
// Delivery; the first Put stores the producer's settings, so at-least-once
// consumers that come later find them, and a put-only producer never meets
// ErrMismatch for options it did give.
func TestSettingsStoredOnFirstUse(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s1, s2 := b.Open(t), b.Open(t)
		ctx, path := ctxT(t), qpath(t)
		alo := []queue.Option{queue.WithDelivery(queue.AtLeastOnce), queue.WithVisibilityTimeout(time.Minute)}
		// A producer with no option looks at the settings: nothing is
		// stored, so at-least-once consumers are not refused.
		logger := newQueueOpts(t, s1, path)
		got, err := logger.Settings(ctx)
		if err != nil || got.Delivery != queue.AtMostOnce || logger.Delivery() != got.Delivery {
			t.Fatalf("Settings(), Delivery() before any use = %+v, %v, %v; want at-most-once, agreeing", got, err, logger.Delivery())
		}
		if _, err := s1.Get(ctx, path+"/config"); !errors.Is(err, store.ErrNoNode) {
			t.Fatalf("Get(config) after Settings() = %v; want ErrNoNode: a getter must not write", err)
		}
		// A put-only producer with options stores them at its first Put.
		producer := newQueueOpts(t, s1, path, alo...)
		put(t, ctx, producer, "a", 0)
		if _, err := s1.Get(ctx, path+"/config"); err != nil {
			t.Fatalf("Get(config) after the first Put = %v; want the stored settings", err)
		}
		consumer := newQueueOpts(t, s2, path, alo...)
		it := mustTake(t, ctx, consumer)
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		put(t, ctx, producer, "b", 0)
		// The logger that looked before: it adopts the stored settings,
		// and Delivery agrees with Settings.
		got, err = logger.Settings(ctx)
		if err != nil || got.Delivery != queue.AtLeastOnce || logger.Delivery() != queue.AtLeastOnce {
			t.Errorf("Settings(), Delivery() after the Put = %+v, %v, %v; want at-least-once, agreeing", got, err, logger.Delivery())
		}
		it = mustTake(t, ctx, consumer)
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestProducerFixesOnlyItsOptions: a producer given no option stores no
// settings, so the at-least-once consumers that come after it are not
// refused; one given some options fixes those only, and the consumers fix
// the rest; a consumer fixes every setting it takes by, its defaults too.
func TestProducerFixesOnlyItsOptions(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s1, s2 := b.Open(t), b.Open(t)
		ctx := ctxT(t)

		path := qpath(t)
		producer := newQueueOpts(t, s1, path)
		put(t, ctx, producer, "a", 0)
		if n, err := s1.Get(ctx, path+"/config"); !errors.Is(err, store.ErrNoNode) {
			t.Fatalf("Get(config) after a Put with no option = %q, %v; want %v: nothing was set", n.Data, err, store.ErrNoNode)
		}
		consumer := newQueueOpts(t, s2, path, queue.WithDelivery(queue.AtLeastOnce))
		it := mustTake(t, ctx, consumer)
		if err := it.Nack(ctx); err != nil {
			t.Fatalf("Nack() = %v; want nil: the item is claimed, at-least-once", err)
		}
		it = mustTake(t, ctx, consumer)
		if string(it.Data) != "a" || it.Deliveries != 2 {
			t.Errorf("Take() after Nack = %q, delivered %d; want a, delivered 2", it.Data, it.Deliveries)
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		put(t, ctx, producer, "b", 0) // still agrees: it set nothing
		got, err := producer.Settings(ctx)
		if err != nil || got.Delivery != queue.AtLeastOnce || producer.Delivery() != queue.AtLeastOnce {
			t.Errorf("producer's Settings(), Delivery() = %+v, %v, %v; want at-least-once, agreeing", got, err, producer.Delivery())
		}
		// A consumer with no option adopts at-least-once: it claims.
		plain := newQueueOpts(t, s1, path)
		it = mustTake(t, ctx, plain)
		if err := it.Extend(ctx); err != nil {
			t.Errorf("Extend() of an item a consumer with no option took = %v; want nil: it adopted at-least-once", err)
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}

		// A producer given the delivery alone fixes it alone: consumers
		// with a visibility timeout fix theirs.
		path = qpath(t)
		producer = newQueueOpts(t, s1, path, queue.WithDelivery(queue.AtLeastOnce))
		put(t, ctx, producer, "c", 0)
		consumer = newQueueOpts(t, s2, path, queue.WithDelivery(queue.AtLeastOnce), queue.WithVisibilityTimeout(time.Minute))
		if err := mustTake(t, ctx, consumer).Ack(ctx); err != nil {
			t.Fatal(err)
		}
		got, err = newQueueOpts(t, s1, path).Settings(ctx)
		want := queue.Settings{Delivery: queue.AtLeastOnce, VisibilityTimeout: time.Minute}
		if err != nil || got != want {
			t.Errorf("Settings() after the consumer's take = %+v, %v; want %+v", got, err, want)
		}
		other := newQueueOpts(t, s1, path, queue.WithDelivery(queue.AtLeastOnce), queue.WithVisibilityTimeout(time.Second))
		if _, _, err := other.TryTake(ctx); !errors.Is(err, queue.ErrMismatch) {
			t.Errorf("TryTake() with another visibility timeout = %v; want %v", err, queue.ErrMismatch)
		}

		// A consumer with no option that takes first fixes at-most-once:
		// it takes by it.
		path = qpath(t)
		put(t, ctx, newQueueOpts(t, s1, path), "d", 0)
		if got := mustTake(t, ctx, newQueueOpts(t, s1, path)); string(got.Data) != "d" {
			t.Errorf("Take() = %q; want d", got.Data)
		}
		alo := newQueueOpts(t, s2, path, queue.WithDelivery(queue.AtLeastOnce))
		if _, _, err := alo.TryTake(ctx); !errors.Is(err, queue.ErrMismatch) {
			t.Errorf("at-least-once TryTake() after an at-most-once take = %v; want %v", err, queue.ErrMismatch)
		}
		if err := alo.Put(ctx, []byte("e")); !errors.Is(err, queue.ErrMismatch) {
			t.Errorf("at-least-once Put() after an at-most-once take = %v; want %v", err, queue.ErrMismatch)
		}
	})
}

// A Queue whose options differ from the settings stored with the queue is
// refused; one given no options adopts them. A path holding another
// recipe's nodes is refused.
func TestSettingsMismatch(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s1, s2 := b.Open(t), b.Open(t)
		ctx, path := ctxT(t), qpath(t)
		alo := newQueueOpts(t, s1, path, queue.WithDelivery(queue.AtLeastOnce), queue.WithVisibilityTimeout(time.Minute))
		put(t, ctx, alo, "a", 0)
		claimed := mustTake(t, ctx, alo)

		amo := newQueueOpts(t, s2, path, queue.WithDelivery(queue.AtMostOnce))
		if it, ok, err := amo.TryTake(ctx); !errors.Is(err, queue.ErrMismatch) {
			t.Errorf("at-most-once TryTake() on an at-least-once queue = %v, %v, %v; want %v", it, ok, err, queue.ErrMismatch)
		}
		if _, err := amo.Take(ctx); !errors.Is(err, queue.ErrMismatch) {
			t.Errorf("at-most-once Take() = %v; want %v", err, queue.ErrMismatch)
		}
		if err := amo.Put(ctx, []byte("x")); !errors.Is(err, queue.ErrMismatch) {
			t.Errorf("at-most-once Put() = %v; want %v", err, queue.ErrMismatch)
		}
		other := newQueueOpts(t, s2, path, queue.WithDelivery(queue.AtLeastOnce), queue.WithVisibilityTimeout(time.Second))
		if _, err := other.Settings(ctx); !errors.Is(err, queue.ErrMismatch) {
			t.Errorf("Settings() with another visibility timeout = %v; want %v", err, queue.ErrMismatch)
		}
		adopt := newQueueOpts(t, s2, path)
		got, err := adopt.Settings(ctx)
		want := queue.Settings{Delivery: queue.AtLeastOnce, VisibilityTimeout: time.Minute}
		if err != nil || got != want {
			t.Errorf("Settings() = %+v, %v; want %+v", got, err, want)
		}
		wantEmpty(t, ctx, adopt) // a is claimed: not delivered twice
		if err := claimed.Ack(ctx); err != nil {
			t.Fatal(err)
		}

		// Another recipe's directory.
		lock := qpath(t)
		if _, err := s1.Create(ctx, lock+"/lock-", nil, store.EphemeralSequential); err != nil {
			t.Fatal(err)
		}
		q := newQueueOpts(t, s2, lock)
		if _, _, err := q.TryTake(ctx); !errors.Is(err, queue.ErrKindMismatch) {
			t.Errorf("TryTake() on a lock's path = %v; want %v", err, queue.ErrKindMismatch)
		}
		if err := newQueueOpts(t, s2, lock).Put(ctx, nil); !errors.Is(err, queue.ErrKindMismatch) {
			t.Errorf("Put() on a lock's path = %v; want %v", err, queue.ErrKindMismatch)
		}
		// A config node that is not a queue's.
		bad := qpath(t)
		if _, err := s1.Create(ctx, bad+"/config", []byte("something else"), store.Persistent); err != nil {
			t.Fatal(err)
		}
		if _, _, err := newQueueOpts(t, s2, bad).TryTake(ctx); !errors.Is(err, queue.ErrKindMismatch) {
			t.Errorf("TryTake() with a foreign config = %v; want %v", err, queue.ErrKindMismatch)
		}
	})
}

// Errors keep the cause the caller cancelled with.
func TestCause(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s := b.Open(t)
		ctx := ctxT(t)
		q := newQueue(t, s, qpath(t), queue.AtLeastOnce)
		cause := errors.New("shutting down")
		cctx, cancel := context.WithCancelCause(ctx)
		cancel(cause)
		if _, err := q.Take(cctx); !errors.Is(err, cause) || !errors.Is(err, context.Canceled) {
			t.Errorf("Take() = %v; want %v and %v", err, cause, context.Canceled)
		}
		if _, _, err := q.TryTake(cctx); !errors.Is(err, cause) {
			t.Errorf("TryTake() = %v; want %v", err, cause)
		}
		if err := q.Put(cctx, nil); !errors.Is(err, cause) {
			t.Errorf("Put() = %v; want %v", err, cause)
		}
		put(t, ctx, q, "a", 0)
		it := mustTake(t, ctx, q)
		if err := it.Ack(cctx); !errors.Is(err, cause) {
			t.Errorf("Ack() = %v; want %v", err, cause)
		}
		wctx, wcancel := context.WithCancelCause(ctx)
		go wcancel(cause)
		if _, err := q.Take(wctx); !errors.Is(err, cause) {
			t.Errorf("waiting Take() = %v; want %v", err, cause)
		}
		if err := it.Ack(ctx); err != nil {
			t.Errorf("Ack() = %v", err)
		}
	})
}

// queueErrs calls every method of q that could use the queue, and returns
// their errors by method. A Consume must stop at once, delivering nothing.
func queueErrs(ctx context.Context, q *queue.Queue) map[string]error {
	errs := map[string]error{
		"Put":         q.Put(ctx, []byte("x")),
		"PutPriority": q.PutPriority(ctx, []byte("x"), 1),
		"PutBatch":    q.PutBatch(ctx, [][]byte{[]byte("x")}),
	}
	_, errs["Take"] = q.Take(ctx)
	_, _, errs["TryTake"] = q.TryTake(ctx)
	_, errs["Len"] = q.Len(ctx)
	_, _, errs["Peek"] = q.Peek(ctx)
	_, errs["Settings"] = q.Settings(ctx)
	c := q.Consume(ctx)
	select {
	case <-c.Done():
		errs["Consume"] = c.Err()
		if _, ok := <-c.Items(); ok {
			errs["Consume"] = errors.New("Consume delivered an item")
		}
	case <-time.After(timeout):
		errs["Consume"] = errors.New("Consume did not stop")
		c.Close()
	}
	return errs
}

// Bad input is a typed error, never a panic.
func TestMisuse(t *testing.T) {
	s := backends.Memory().Open(t)
	defer s.Close()
	ctx := t.Context()
	// New does no I/O and returns a Queue whatever it is given; every
	// method that could use the queue reports the bad input, and leaves
	// nothing in the store.
	for op, err := range queueErrs(ctx, queue.New(nil, "/q")) {
		if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), "nil store") {
			t.Errorf("New(nil).%s() = %v; want %v saying nil store", op, err, store.ErrInvalidArgument)
		}
	}
	for _, tt := range []struct {
		path string
		opts []queue.Option
		want error
	}{
		{"/", nil, store.ErrInvalidPath},
		{"q", nil, store.ErrInvalidPath},
		{"/q", []queue.Option{nil}, store.ErrInvalidArgument},
		{"/q", []queue.Option{queue.WithDelivery(7)}, queue.ErrInvalidDelivery},
		{"/q", []queue.Option{queue.WithVisibilityTimeout(-time.Second)}, store.ErrInvalidArgument},
		{"/q", []queue.Option{queue.WithDelivery(queue.AtMostOnce), queue.WithVisibilityTimeout(time.Second)}, store.ErrInvalidArgument},
		{"/q", []queue.Option{queue.WithVisibilityTimeout(time.Second)}, store.ErrInvalidArgument},
		{"/q", []queue.Option{queue.WithDeadLetter("/dead", 0)}, store.ErrInvalidArgument},
		{"/q", []queue.Option{queue.WithPutsInFlight(0)}, store.ErrInvalidArgument},
		{"/q", []queue.Option{queue.WithPutsInFlight(-1)}, store.ErrInvalidArgument},
		{"/q", []queue.Option{queue.WithDeadLetter("/q", 1)}, store.ErrInvalidArgument},
		{"/q", []queue.Option{queue.WithDeadLetter("/q/dead", 1)}, store.ErrInvalidArgument},
		{"/q/x", []queue.Option{queue.WithDeadLetter("/q", 1)}, store.ErrInvalidArgument},
		{"/q", []queue.Option{queue.WithDeadLetter("dead", 1)}, store.ErrInvalidPath},
		{"/q", []queue.Option{queue.WithDeadLetter("/", 1)}, store.ErrInvalidPath},
	} {
		q := queue.New(s, tt.path, tt.opts...)
		for op, err := range queueErrs(ctx, q) {
			if !errors.Is(err, tt.want) {
				t.Errorf("New(%q, %d options).%s() = %v; want %v", tt.path, len(tt.opts), op, err, tt.want)
			}
		}
		if q.Path() != tt.path {
			t.Errorf("New(%q, %d options).Path() = %q; want %q", tt.path, len(tt.opts), q.Path(), tt.path)
		}
	}
	if kids, err := s.Children(ctx, "/"); err != nil || len(kids) != 0 {
		t.Errorf("after the calls with bad input, the store holds %v (%v); want nothing", kids, err)
	}

	var zq queue.Queue
	var nq *queue.Queue
	for name, q := range map[string]*queue.Queue{"zero": &zq, "nil": nq} {
		for op, err := range queueErrs(ctx, q) {
			if !errors.Is(err, store.ErrInvalidArgument) {
				t.Errorf("%s Queue: %s() = %v; want %v", name, op, err, store.ErrInvalidArgument)
			}
		}
		if q.Path() != "" {
			t.Errorf("%s Queue: Path() = %q; want empty", name, q.Path())
		}
	}

	var zi queue.Item
	var ni *queue.Item
	for name, it := range map[string]*queue.Item{"zero": &zi, "nil": ni} {
		for op, err := range map[string]error{"Ack": it.Ack(ctx), "Nack": it.Nack(ctx), "Extend": it.Extend(ctx)} {
			if !errors.Is(err, store.ErrInvalidArgument) {
				t.Errorf("%s Item: %s() = %v; want %v", name, op, err, store.ErrInvalidArgument)
			}
		}
		if it.Context().Err() == nil {
			t.Errorf("%s Item: Context() not cancelled", name)
		}
		if _, ok := it.Deadline(); ok {
			t.Errorf("%s Item: Deadline() reports one", name)
		}
	}

	var zc queue.Consumer
	var nc *queue.Consumer
	for name, c := range map[string]*queue.Consumer{"zero": &zc, "nil": nc} {
		if _, ok := <-c.Items(); ok {
			t.Errorf("%s Consumer: Items() delivered", name)
		}
		<-c.Done()
		if err := c.Err(); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s Consumer: Err() = %v; want %v", name, err, store.ErrInvalidArgument)
		}
		if err := c.Close(); err != nil {
			t.Errorf("%s Consumer: Close() = %v; want nil", name, err)
		}
	}

	q := newQueue(t, s, "/misuse", queue.AtMostOnce)
	put(t, ctx, q, "a", 0)
	it := mustTake(t, ctx, q)
	if err := it.Extend(ctx); !errors.Is(err, queue.ErrNoClaim) {
		t.Errorf("Extend() of an at-most-once item = %v; want %v", err, queue.ErrNoClaim)
	}
	if _, ok := it.Deadline(); ok {
		t.Errorf("Deadline() of an at-most-once item reports one")
	}
	if err := it.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if it.Context().Err() == nil {
		t.Errorf("Context() of an acked item not cancelled")
	}
}

// A view that stopped following (idle, or its watch broke) follows anew
// from a new listing, missing nothing put meanwhile.
func TestViewFollowsAnew(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s1, s2 := b.Open(t), b.Open(t)
				ctx, path := ctxT(t), qpath(t)
				q1, q2 := newQueue(t, s1, path, d), newQueue(t, s2, path, d)
				put(t, ctx, q2, "a", 0)
				if got := take(t, ctx, q1); got != "a" {
					t.Fatalf("Take() = %q; want a", got)
				}
				queue.DropView(q1)
				put(t, ctx, q2, "b", 0)
				held := mustTake(t, ctx, q2)
				put(t, ctx, q2, "c", 0)
				queue.DropView(q1)
				if err := held.Nack(ctx); err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{"b", "c"} {
					if got := take(t, ctx, q1); got != want {
						t.Errorf("Take() after the view was dropped = %q; want %q", got, want)
					}
				}
				wantEmpty(t, ctx, q1)
			})
		}
	})
}
