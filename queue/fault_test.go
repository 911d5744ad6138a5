package queue_test

import (
	"errors"
	"testing"

	"github.com/corral-go/corral/internal/backends"
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
