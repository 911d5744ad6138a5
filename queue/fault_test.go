package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// A consumer rides out a lost connection: it retries, and delivers what was
// put meanwhile once the connection is back.
func TestConsumerSurvivesDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		dc, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect")
		}
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s1, s2 := b.Open(t), b.Open(t)
				defer s1.Close()
				defer s2.Close()
				ctx := ctxT(t)
				path := qpath(t)
				q1, q2 := newQueue(t, s1, path, d), newQueue(t, s2, path, d)
				put(t, ctx, q2, "before", 0)
				c := q1.Consume(ctx)
				defer c.Close()
				recv := func(want string) {
					t.Helper()
					select {
					case it, ok := <-c.Items():
						if !ok {
							t.Fatalf("Items() closed: %v; want %q", c.Err(), want)
						}
						if string(it.Data) != want {
							t.Errorf("received %q; want %q", it.Data, want)
						}
						if err := it.Ack(ctx); err != nil {
							t.Errorf("Ack(%q) = %v", it.Data, err)
						}
					case <-ctx.Done():
						t.Fatalf("nothing received; want %q", want)
					}
				}
				recv("before")
				dc.Disconnect(t, s1)
				put(t, ctx, q2, "during", 0)
				dc.Reconnect(t, s1)
				recv("during")
				put(t, ctx, q2, "after", 0)
				recv("after")
			})
		}
	})
}

// A claim whose create reply was lost is found and released, so the item is
// not stuck behind a claim nobody knows it holds.
func TestLostClaimReply(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		rl, ok := b.(storetest.ReplyLoser)
		if !ok {
			t.Skip("backend cannot lose replies")
		}
		s := b.Open(t)
		defer s.Close()
		ctx := ctxT(t)
		q := newQueue(t, s, qpath(t), queue.AtLeastOnce)
		put(t, ctx, q, "a", 0)
		if _, err := q.Settings(ctx); err != nil {
			t.Fatalf("Settings() = %v", err)
		}
		rl.LoseNextCreateReply(t, s)
		if got := take(t, ctx, q); got != "a" {
			t.Errorf("Take() = %q; want %q", got, "a")
		}
		if cs := claims(t, ctx, s, q.Path()); len(cs) != 0 {
			t.Errorf("claims left: %v", cs)
		}
		if it, ok, err := q.TryTake(ctx); ok || err != nil {
			t.Errorf("TryTake() = %v, %v, %v; want nil, false, nil", it, ok, err)
		}
	})
}

// A Put whose reply is lost either succeeds (the adapter retried it safely)
// or fails with store.ErrDisconnected, and then its outcome is unknown: the
// item is there once or not at all, and the queue works on.
func TestLostPutReply(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		rl, ok := b.(storetest.ReplyLoser)
		if !ok {
			t.Skip("backend cannot lose replies")
		}
		s := b.Open(t)
		defer s.Close()
		ctx := ctxT(t)
		q := newQueue(t, s, qpath(t), queue.AtMostOnce)
		rl.LoseNextCreateReply(t, s)
		err := q.Put(ctx, []byte("a"))
		if err != nil && !errors.Is(err, store.ErrDisconnected) {
			t.Fatalf("Put() with a lost reply = %v; want nil or %v", err, store.ErrDisconnected)
		}
		put(t, ctx, q, "b", 0)
		got := []string{take(t, ctx, q)}
		if got[0] == "a" {
			got = append(got, take(t, ctx, q))
		}
		if got[len(got)-1] != "b" || (err == nil && len(got) != 2) {
			t.Errorf("Take()s after Put() = %v: %q; want [a b], or [b] after an error", err, got)
		}
		if it, ok, err := q.TryTake(ctx); ok || err != nil {
			t.Errorf("TryTake() = %v, %v, %v; want nil, false, nil", it, ok, err)
		}
	})
}

// During an outage a Nack returns within its ctx and a grace, handing the
// claim to the session's cleaner; once the link heals the item goes to
// another consumer, and an Ack that failed meanwhile can be repeated.
func TestSettleDuringOutage(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		dc, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect")
		}
		t.Parallel() // outages take their time on every store at once
		s1, s2 := b.Open(t), b.Open(t)
		ctx, path := ctxT(t), qpath(t)
		q1, q2 := newQueue(t, s1, path, queue.AtLeastOnce), newQueue(t, s2, path, queue.AtLeastOnce)
		put(t, ctx, q2, "a", 0)
		put(t, ctx, q2, "b", 0)
		a := mustTake(t, ctx, q1)
		bi := mustTake(t, ctx, q1)

		dc.Disconnect(t, s1)
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := a.Nack(short); err != nil {
			t.Errorf("Nack() during an outage = %v; want nil (handed to the cleaner)", err)
		}
		if err := bi.Ack(short); err == nil {
			t.Errorf("Ack() during an outage = nil; want an error")
		}
		if took := time.Since(start); took > 200*time.Millisecond+2*time.Second {
			t.Errorf("Nack() and Ack() during an outage took %v; want their ctx and a grace", took)
		}
		dc.Reconnect(t, s1)
		if err := bi.Ack(ctx); err != nil {
			t.Errorf("Ack() after the outage = %v; want nil", err)
		}
		it := mustTake(t, ctx, q2)
		if string(it.Data) != "a" || it.ID != a.ID {
			t.Errorf("Take() after the outage = %q; want a, released by the cleaner", it.Data)
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		wantEmpty(t, ctx, q2)
	})
}

// A consumer closed during an outage returns within its grace; once the
// link heals, the item it held (at-least-once) is released to others.
func TestConsumerCloseDuringOutage(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		dc, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect")
		}
		t.Parallel() // outages take their time on every store at once
		s1, s2 := b.Open(t), b.Open(t)
		ctx, path := ctxT(t), qpath(t)
		q1, q2 := newQueue(t, s1, path, queue.AtLeastOnce), newQueue(t, s2, path, queue.AtLeastOnce)
		put(t, ctx, q2, "a", 0)
		c := q1.Consume(ctx)
		// The consumer holds a, claimed, and nobody receives it.
		backends.WaitChildren(t, s2, path+"/claims", backends.Count(1))
		dc.Disconnect(t, s1)
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("Close() during an outage took %v; want about a grace", took)
		}
		dc.Reconnect(t, s1)
		it := mustTake(t, ctx, q2)
		if string(it.Data) != "a" {
			t.Errorf("Take() after the outage = %q; want a", it.Data)
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A new item of a higher priority is taken next, even in the middle of a
// long listing; so is an item whose claim was released.
func TestPromptness(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				promptness(t, b.Open(t), b.Open(t), d)
			})
		}
	})
}

func promptness(t *testing.T, s1, s2 store.Store, d queue.Delivery) {
	ctx, path := ctxT(t), qpath(t)
	q1, q2 := newQueue(t, s1, path, d), newQueue(t, s2, path, d)
	for i := range 10 {
		put(t, ctx, q2, fmt.Sprint(i), 0)
	}
	for i := range 3 {
		if got := take(t, ctx, q1); got != fmt.Sprint(i) {
			t.Fatalf("Take() = %q; want %d", got, i)
		}
	}
	put(t, ctx, q2, "urgent", 9)
	if got := take(t, ctx, q1); got != "urgent" {
		t.Errorf("Take() after an urgent Put = %q; want urgent", got)
	}
	if got := take(t, ctx, q1); got != "3" {
		t.Errorf("Take() = %q; want 3", got)
	}
	// Another consumer takes 4 and gives it back.
	four := mustTake(t, ctx, q2)
	if got := take(t, ctx, q1); got != "5" {
		t.Errorf("Take() while 4 is held = %q; want 5", got)
	}
	if err := four.Nack(ctx); err != nil {
		t.Fatal(err)
	}
	// q1 may have lost the race for 4 while q2 held it (ZooKeeper learns
	// of it no other way), and then spreads its next take over two items.
	next := []string{take(t, ctx, q1), take(t, ctx, q1)}
	slices.Sort(next)
	if !slices.Equal(next, []string{"4", "6"}) {
		t.Errorf("Take()s after 4 came back = %q; want 4 and 6", next)
	}
	for i := 7; i < 10; i++ {
		if got := take(t, ctx, q1); got != fmt.Sprint(i) {
			t.Errorf("Take() = %q; want %d", got, i)
		}
	}
	wantEmpty(t, ctx, q1)
}

// plainStore hides every optional capability of a store but the children
// watch the queue needs: the portable fallback, a listing per take.
type plainStore struct {
	store.Store
}

// zkLikeStore has ZooKeeper's capabilities: child counts and guarded
// creates, no follow.
type zkLikeStore struct {
	store.Store
	store.ChildCounter
	store.GuardedCreator
}

// countedStore has child counts only.
type countedStore struct {
	store.Store
	store.ChildCounter
}

// The ways a session keeps its view of a queue (following it, counting
// children with guarded claims as on ZooKeeper, counting children alone,
// listing it) all deliver in order, promptly, once.
func TestViews(t *testing.T) {
	wrap := map[string]func(*memstore.Store) store.Store{
		"follow":  func(s *memstore.Store) store.Store { return s },
		"zk-like": func(s *memstore.Store) store.Store { return &zkLikeStore{s, s, s} },
		"counted": func(s *memstore.Store) store.Store { return &countedStore{s, s} },
		"plain":   func(s *memstore.Store) store.Store { return &plainStore{s} },
	}
	for name, w := range wrap {
		t.Run(name, func(t *testing.T) {
			for _, d := range deliveries {
				t.Run(d.String(), func(t *testing.T) {
					srv := memstore.NewServer()
					a, b := srv.Open(), srv.Open()
					defer a.Close()
					defer b.Close()
					promptness(t, w(a), w(b), d)
				})
			}
		})
	}
}
