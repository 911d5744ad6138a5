package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
)

// TestOutageSweep: at-least-once consumers cut off for a sweep of outage
// lengths (see sync's TestOutageSweep: shorter than the cleanup grace,
// longer than every internal bound, longer than the 3 s session) while
// they claim, nack or ack an item. Every call returns within its 1 s ctx
// plus the cleanup grace; once the link heals (or the session ends), no
// claim is left within one session timeout, and a fresh consumer takes
// the item at once, or finds it acked.
func TestOutageSweep(t *testing.T) {
	const session = 3 * time.Second
	outages := []time.Duration{500 * time.Millisecond, 2 * time.Second, 4 * time.Second, session + 2*time.Second}
	newQ := func(st store.Store, dir string) *queue.Queue {
		return queue.New(st, dir, queue.WithDelivery(queue.AtLeastOnce))
	}
	// prepare puts an item from the connected session and has the cut-off
	// one learn the queue (its view, its settings) before the outage.
	prepare := func(e *backends.OutageEnv) *queue.Queue {
		err := newQ(e.Other, e.Dir).Put(e.Ctx, []byte("job"))
		q := newQ(e.St, e.Dir)
		if err == nil {
			_, err = q.Len(e.Ctx)
		}
		if err != nil {
			e.T.Fatalf("preparing the queue: %v", err)
		}
		return q
	}
	// takeJob takes the item from a fresh session and acks it.
	takeJob := func(ctx context.Context, st store.Store, dir string) error {
		it, err := newQ(st, dir).Take(ctx)
		if err != nil {
			return err
		}
		if string(it.Data) != "job" {
			return errors.New("took " + string(it.Data) + "; want job")
		}
		return it.Ack(ctx)
	}
	// noJob checks from a fresh session that the item was acked.
	noJob := func(ctx context.Context, st store.Store, dir string) error {
		n, err := newQ(st, dir).Len(ctx)
		if err == nil && n != 0 {
			err = errors.New("the acked item is still in the queue")
		}
		return err
	}
	ops := []backends.OutageOp{{
		Name:  "Take",
		Watch: "claims",
		Run: func(e *backends.OutageEnv) {
			q := prepare(e)
			e.Cut()
			err := e.Call(func(ctx context.Context) error {
				it, err := q.Take(ctx)
				if err == nil {
					err = it.Nack(ctx) // taken just before the cut: hand it back
				}
				return err
			})
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, store.ErrDisconnected) {
				e.T.Errorf("Take cut off = %v; want context.DeadlineExceeded", err)
			}
		},
		Again: takeJob,
	}, {
		Name:  "Nack",
		Watch: "claims",
		Run: func(e *backends.OutageEnv) {
			q := prepare(e)
			it, err := q.Take(e.Ctx)
			if err != nil {
				e.T.Fatalf("Take = %v", err)
			}
			e.Cut()
			if err := e.Call(it.Nack); err != nil {
				e.T.Errorf("Nack cut off = %v; want nil (the claim handed to the cleaner)", err)
			}
		},
		Again: takeJob,
	}, {
		Name:  "Ack",
		Watch: "claims",
		Run: func(e *backends.OutageEnv) {
			q := prepare(e)
			it, err := q.Take(e.Ctx)
			if err != nil {
				e.T.Fatalf("Take = %v", err)
			}
			e.Cut()
			if err := e.Call(it.Ack); err == nil {
				return // it went through before the cut
			}
			// The consumer acks again, as the docs say it may, until the
			// link heals or its session ends (the claim then goes with it).
			for {
				err := it.Ack(e.Ctx)
				if !errors.Is(err, store.ErrDisconnected) || e.Ctx.Err() != nil {
					return
				}
			}
		},
		Again: func(ctx context.Context, st store.Store, dir string) error {
			// Acked, or (session ended first) back in the queue.
			if noJob(ctx, st, dir) == nil {
				return nil
			}
			return takeJob(ctx, st, dir)
		},
	}}
	bound := recipe.CleanupGrace + time.Second
	for _, name := range []string{"zk", "etcd"} {
		for _, r := range backends.OutageSweep(t, name, session, bound, outages, ops) {
			t.Logf("%-4s %-6v %-5s overrun %-8v claims left %d", r.Store, r.Outage, r.Op, r.Overrun.Round(time.Millisecond), r.Orphans)
		}
	}
}
