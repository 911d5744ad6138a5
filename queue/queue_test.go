package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// timeout bounds every wait: generous, since the same tests run on real,
// networked stores.
const timeout = 30 * time.Second

var deliveries = []queue.Delivery{queue.AtMostOnce, queue.AtLeastOnce}

var pathSeq atomic.Int64

// qpath returns a path no other test (nor an earlier run against the same
// server) uses.
func qpath(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "_", "=", "-").Replace(t.Name())
	return fmt.Sprintf("/queue-test/%s-%d-%d", name, time.Now().UnixNano(), pathSeq.Add(1))
}

func newQueue(t *testing.T, s store.Store, path string, d queue.Delivery) *queue.Queue {
	t.Helper()
	return queue.New(s, path, queue.WithDelivery(d))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, ctx context.Context, q *queue.Queue, data string, prio int) {
	t.Helper()
	if err := q.PutPriority(ctx, []byte(data), prio); err != nil {
		t.Fatalf("PutPriority(%q, %d) = %v; want nil", data, prio, err)
	}
}

// take takes one item and settles it with Ack.
func take(t *testing.T, ctx context.Context, q *queue.Queue) string {
	t.Helper()
	it, err := q.Take(ctx)
	if err != nil {
		t.Fatalf("Take() = %v; want nil", err)
	}
	if err := it.Ack(ctx); err != nil {
		t.Fatalf("Ack(%q) = %v; want nil", it.Data, err)
	}
	return string(it.Data)
}

// claims returns the claim nodes left under the queue at path.
func claims(t *testing.T, ctx context.Context, s store.Store, path string) []store.Child {
	t.Helper()
	kids, err := s.Children(ctx, store.Join(path, "claims"))
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Children(claims) = %v", err)
	}
	return kids
}

func TestNew(t *testing.T) {
	s := backends.Memory().Open(t)
	defer s.Close()
	tests := []struct {
		path string
		opts []queue.Option
		want error
	}{
		{"/q", nil, nil},
		{"/q", []queue.Option{queue.WithDelivery(queue.AtLeastOnce)}, nil},
		{"q", nil, store.ErrInvalidPath},
		{"/q/", nil, store.ErrInvalidPath},
		{"/q", []queue.Option{queue.WithDelivery(7)}, queue.ErrInvalidDelivery},
	}
	for _, tt := range tests {
		if _, err := queue.New(s, tt.path, tt.opts...).Settings(t.Context()); !errors.Is(err, tt.want) {
			t.Errorf("New(%q).Settings() = %v; want %v", tt.path, err, tt.want)
		}
	}
}

func TestFIFO(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s := b.Open(t)
				defer s.Close()
				ctx := ctxT(t)
				q := newQueue(t, s, qpath(t), d)
				want := []string{"a", "b", "c", "d", "e"}
				for _, w := range want {
					put(t, ctx, q, w, 0)
				}
				var got []string
				for range want {
					got = append(got, take(t, ctx, q))
				}
				if !slices.Equal(got, want) {
					t.Errorf("Take() order = %q; want %q", got, want)
				}
				if it, ok, err := q.TryTake(ctx); ok || err != nil {
					t.Errorf("TryTake() on an empty queue = %v, %v, %v; want nil, false, nil", it, ok, err)
				}
				if cs := claims(t, ctx, s, q.Path()); len(cs) != 0 {
					t.Errorf("claims left after Ack: %v", cs)
				}
			})
		}
	})
}

func TestPriorityOrder(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s := b.Open(t)
				defer s.Close()
				ctx := ctxT(t)
				q := newQueue(t, s, qpath(t), d)
				puts := []struct {
					data string
					prio int
				}{
					{"zero-1", 0}, {"min-1", math.MinInt}, {"max-1", math.MaxInt}, {"neg1-1", -1},
					{"one-1", 1}, {"zero-2", 0}, {"big-1", 1 << 40}, {"negbig-1", -1 << 40},
					{"min-2", math.MinInt}, {"max-2", math.MaxInt}, {"neg1-2", -1}, {"one-2", 1},
				}
				for _, p := range puts {
					put(t, ctx, q, p.data, p.prio)
				}
				want := []string{"max-1", "max-2", "big-1", "one-1", "one-2", "zero-1", "zero-2", "neg1-1", "neg1-2", "negbig-1", "min-1", "min-2"}
				var got []string
				for range want {
					it, err := q.Take(ctx)
					if err != nil {
						t.Fatalf("Take() = %v; want nil", err)
					}
					if err := it.Ack(ctx); err != nil {
						t.Fatalf("Ack() = %v; want nil", err)
					}
					got = append(got, string(it.Data))
				}
				if !slices.Equal(got, want) {
					t.Errorf("Take() order = %q; want %q", got, want)
				}
			})
		}
	})
}

func TestTooLarge(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s := b.Open(t)
		defer s.Close()
		ctx := ctxT(t)
		q := newQueue(t, s, qpath(t), queue.AtMostOnce)
		if err := q.Put(ctx, make([]byte, store.MaxDataSize+1)); !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("Put(%d bytes) = %v; want %v", store.MaxDataSize+1, err, store.ErrTooLarge)
		}
		big := make([]byte, store.MaxDataSize)
		big[len(big)-1] = 'x'
		if err := q.Put(ctx, big); err != nil {
			t.Fatalf("Put(%d bytes) = %v; want nil", len(big), err)
		}
		put(t, ctx, q, "after", 0)
		it, err := q.Take(ctx)
		if err != nil || len(it.Data) != len(big) || it.Data[len(big)-1] != 'x' {
			t.Fatalf("Take() = %d bytes, %v; want the %d bytes put", len(it.Data), err, len(big))
		}
		if got := take(t, ctx, q); got != "after" {
			t.Errorf("Take() = %q; want %q", got, "after")
		}
	})
}

// A Take whose ctx ends leaves the queue as it was: no claim, no lost item,
// no leaked watch (goleak checks the last).
func TestTakeCancelled(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s := b.Open(t)
				defer s.Close()
				ctx := ctxT(t)
				q := newQueue(t, s, qpath(t), d)
				short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				if it, err := q.Take(short); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Take() on an empty queue = %v, %v; want %v", it, err, context.DeadlineExceeded)
				}
				put(t, ctx, q, "a", 0)
				// A Take on a queue created by someone else while it waits.
				waiting := make(chan error, 1)
				wctx, wcancel := context.WithCancel(ctx)
				go func() {
					_, err := newQueue(t, s, q.Path()+"/sub", d).Take(wctx)
					waiting <- err
				}()
				wcancel()
				select {
				case err := <-waiting:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("Take() cancelled = %v; want %v", err, context.Canceled)
					}
				case <-ctx.Done():
					t.Fatal("Take() did not return after cancel")
				}
				if got := take(t, ctx, q); got != "a" {
					t.Errorf("Take() = %q; want %q", got, "a")
				}
				if cs := claims(t, ctx, s, q.Path()); len(cs) != 0 {
					t.Errorf("claims left: %v", cs)
				}
			})
		}
	})
}

// Take wakes up on a Put made by another session while it waits.
func TestTakeWaits(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s1, s2 := b.Open(t), b.Open(t)
				defer s1.Close()
				defer s2.Close()
				ctx := ctxT(t)
				path := qpath(t)
				q1, q2 := newQueue(t, s1, path, d), newQueue(t, s2, path, d)
				got := make(chan string, 1)
				errc := make(chan error, 1)
				go func() {
					it, err := q1.Take(ctx)
					if err != nil {
						errc <- err
						return
					}
					errc <- it.Ack(ctx)
					got <- string(it.Data)
				}()
				put(t, ctx, q2, "late", 0)
				select {
				case err := <-errc:
					if err != nil {
						t.Fatalf("Take() = %v; want nil", err)
					}
				case <-ctx.Done():
					t.Fatal("Take() did not see the Put")
				}
				if g := <-got; g != "late" {
					t.Errorf("Take() = %q; want %q", g, "late")
				}
			})
		}
	})
}

func TestNack(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s := b.Open(t)
				defer s.Close()
				ctx := ctxT(t)
				q := newQueue(t, s, qpath(t), d)
				for _, w := range []string{"a", "b", "c"} {
					put(t, ctx, q, w, 0)
				}
				a, err := q.Take(ctx)
				if err != nil {
					t.Fatalf("Take() = %v", err)
				}
				b, err := q.Take(ctx)
				if err != nil {
					t.Fatalf("Take() = %v", err)
				}
				if err := a.Nack(ctx); err != nil {
					t.Fatalf("Nack(%q) = %v; want nil", a.Data, err)
				}
				if err := a.Nack(ctx); !errors.Is(err, queue.ErrSettled) {
					t.Errorf("second Nack(%q) = %v; want %v", a.Data, err, queue.ErrSettled)
				}
				if err := a.Ack(ctx); !errors.Is(err, queue.ErrSettled) {
					t.Errorf("Ack(%q) after Nack = %v; want %v", a.Data, err, queue.ErrSettled)
				}
				if err := b.Ack(ctx); err != nil {
					t.Fatalf("Ack(%q) = %v", b.Data, err)
				}
				var got []string
				for range 2 {
					got = append(got, take(t, ctx, q))
				}
				if want := []string{"a", "c"}; !slices.Equal(got, want) {
					t.Errorf("Take() after Nack = %q; want %q", got, want)
				}
			})
		}
	})
}

// At-least-once, the end of the consumer's session returns its claimed items.
func TestSessionEndReturnsClaim(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s1, s2 := b.Open(t), b.Open(t)
		defer s1.Close()
		defer s2.Close()
		ctx := ctxT(t)
		path := qpath(t)
		q1, q2 := newQueue(t, s1, path, queue.AtLeastOnce), newQueue(t, s2, path, queue.AtLeastOnce)
		put(t, ctx, q2, "a", 0)
		put(t, ctx, q2, "b", 0)
		a, err := q1.Take(ctx)
		if err != nil || string(a.Data) != "a" {
			t.Fatalf("Take() = %v, %v; want a", a, err)
		}
		b.Expire(t, s1)
		// The client may learn of the expiry after the server (etcd does).
		select {
		case <-s1.Context().Done():
		case <-ctx.Done():
			t.Fatal("session still alive after Expire")
		}
		if err := a.Ack(ctx); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("Ack() after session expiry = %v; want %v", err, store.ErrSessionExpired)
		}
		var got []string
		for range 2 {
			got = append(got, take(t, ctx, q2))
		}
		if want := []string{"a", "b"}; !slices.Equal(got, want) {
			t.Errorf("Take() after expiry = %q; want %q", got, want)
		}
	})
}

// Foreign children of the items directory are not items.
func TestForeignChildren(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s := b.Open(t)
		defer s.Close()
		ctx := ctxT(t)
		q := newQueue(t, s, qpath(t), queue.AtMostOnce)
		if _, err := s.Create(ctx, store.Join(q.Path(), "items/lock-"), []byte("x"), store.Sequential); err != nil {
			t.Fatalf("Create(foreign) = %v", err)
		}
		if it, ok, err := q.TryTake(ctx); ok || err != nil {
			t.Errorf("TryTake() = %v, %v, %v; want nil, false, nil", it, ok, err)
		}
		put(t, ctx, q, "a", 0)
		if got := take(t, ctx, q); got != "a" {
			t.Errorf("Take() = %q; want %q", got, "a")
		}
	})
}

// A cancelled consumer loses nothing: what it did not hand over is taken
// next, in order.
func TestConsumerCancelLosesNothing(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, d := range deliveries {
			t.Run(d.String(), func(t *testing.T) {
				s := b.Open(t)
				defer s.Close()
				ctx := ctxT(t)
				q := newQueue(t, s, qpath(t), d)
				const n = 10
				for i := range n {
					put(t, ctx, q, fmt.Sprint(i), 0)
				}
				cctx, cancel := context.WithCancel(ctx)
				c := q.Consume(cctx)
				var got []string
				for len(got) < 3 {
					select {
					case it := <-c.Items():
						got = append(got, string(it.Data))
						if err := it.Ack(ctx); err != nil {
							t.Fatalf("Ack() = %v", err)
						}
					case <-ctx.Done():
						t.Fatal("consumer delivered nothing")
					}
				}
				cancel()
				// Whatever is still delivered after the cancel is delivered.
				for it := range c.Items() {
					got = append(got, string(it.Data))
					if err := it.Ack(ctx); err != nil {
						t.Fatalf("Ack() = %v", err)
					}
				}
				if err := c.Err(); !errors.Is(err, context.Canceled) || err.Error() != context.Canceled.Error() {
					t.Errorf("Err() = %v; want %v alone", err, context.Canceled)
				}
				for len(got) < n {
					got = append(got, take(t, ctx, q))
				}
				want := make([]string, n)
				for i := range want {
					want[i] = fmt.Sprint(i)
				}
				if !slices.Equal(got, want) {
					t.Errorf("delivered %q; want %q", got, want)
				}
				if it, ok, err := q.TryTake(ctx); ok || err != nil {
					t.Errorf("TryTake() = %v, %v, %v; want nil, false, nil", it, ok, err)
				}
			})
		}
	})
}

func TestConsumerClose(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s := b.Open(t)
		defer s.Close()
		ctx := ctxT(t)
		q := newQueue(t, s, qpath(t), queue.AtLeastOnce)
		put(t, ctx, q, "a", 0)
		c := q.Consume(ctx)
		// Close without receiving: the item the consumer holds goes back.
		if err := c.Close(); err != nil {
			t.Errorf("Close() = %v; want nil", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close() = %v; want nil", err)
		}
		if err := c.Err(); !errors.Is(err, queue.ErrConsumerClosed) {
			t.Errorf("Err() = %v; want %v", err, queue.ErrConsumerClosed)
		}
		if _, ok := <-c.Items(); ok {
			t.Error("Items() delivered after Close")
		}
		if got := take(t, ctx, q); got != "a" {
			t.Errorf("Take() = %q; want %q", got, "a")
		}
	})
}

func TestConsumerSessionEnd(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s := b.Open(t)
		defer s.Close()
		ctx := ctxT(t)
		q := newQueue(t, s, qpath(t), queue.AtLeastOnce)
		c := q.Consume(ctx)
		b.Expire(t, s)
		select {
		case <-c.Done():
		case <-ctx.Done():
			t.Fatal("consumer still running after its session expired")
		}
		if err := c.Err(); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("Err() = %v; want %v", err, store.ErrSessionExpired)
		}
	})
}

// valueStore is a Store whose value cannot be a map key: an outside
// adapter may well be a struct value holding a slice. It has none of the
// optional capabilities.
type valueStore struct {
	store.Store
	tags []string
}

// TestStoreNotComparable: a queue over a Store whose value cannot be a map
// key puts, peeks and takes, where keying the session's shared views by
// the Store value would panic.
func TestStoreNotComparable(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := valueStore{b.Open(t), []string{"not comparable"}}
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		q := queue.New(st, qpath(t))
		if err := q.Put(ctx, []byte("x")); err != nil {
			t.Fatalf("Put = %v", err)
		}
		if n, err := q.Len(ctx); err != nil || n != 1 {
			t.Fatalf("Len = %d, %v; want 1", n, err)
		}
		it, err := q.Take(ctx)
		if err != nil || string(it.Data) != "x" {
			t.Fatalf("Take = %+v, %v; want x", it, err)
		}
	})
}
