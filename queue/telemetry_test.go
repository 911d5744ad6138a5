package queue_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store/storetest"
)

// TestMetrics: every item put, delivered (by Take, TryTake and a
// Consumer), delivered again, acked and nacked is counted once, under the
// path label the Queue was given.
func TestMetrics(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		mr := metrictest.New(t)
		s := b.Open(t)
		ctx := ctxT(t)
		q := queue.New(s, qpath(t), queue.WithDelivery(queue.AtLeastOnce),
			queue.WithMeterProvider(mr.Provider()),
			queue.WithPathLabel(func(string) string { return "jobs" }))
		for _, d := range []string{"a", "b", "c"} {
			put(t, ctx, q, d, 0)
		}
		it, err := q.Take(ctx) // a
		if err != nil {
			t.Fatal(err)
		}
		if err := it.Nack(ctx); err != nil {
			t.Fatal(err)
		}
		if got := take(t, ctx, q); got != "a" { // a, again
			t.Fatalf("took %q after the Nack of a; want a", got)
		}
		c := q.Consume(ctx)
		it = <-c.Items() // b
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		it, ok, err := q.TryTake(ctx) // c
		if err != nil || !ok {
			t.Fatalf("TryTake() = %v, %v; want an item", ok, err)
		}
		if err := it.Ack(ctx); err != nil {
			t.Fatal(err)
		}

		labels := []attribute.KeyValue{attribute.String("corral.kind", "queue"), attribute.String("corral.path", "jobs")}
		snap := mr.Collect()
		want := map[string]int64{
			"corral.queue.puts":         3,
			"corral.queue.takes":        4,
			"corral.queue.redeliveries": 1,
			"corral.queue.acks":         3,
			"corral.queue.nacks":        1,
		}
		for name, n := range want {
			if got := snap.Int(name, labels...); got != n {
				t.Errorf("%s = %d; want %d", name, got, n)
			}
		}
	})
}

// TestClaimIdentity: a claim names its consumer (host, process, when it
// claimed) for the inspect package and "corral locks", on every store and
// with or without a visibility timeout (a leased claim on etcd).
func TestClaimIdentity(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, vis := range []time.Duration{0, time.Hour} {
			s := b.Open(t)
			ctx, p := ctxT(t), qpath(t)
			q := queue.New(s, p, queue.WithDelivery(queue.AtLeastOnce), queue.WithVisibilityTimeout(vis))
			put(t, ctx, q, "job", 0)
			before := time.Now().Truncate(time.Millisecond)
			it, err := q.Take(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := inspect.Read(ctx, s, p)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Queue == nil || len(rep.Queue.Claims) != 1 || rep.Queue.Claimed != 1 || !strings.Contains(rep.Queue.Claims[0].Item, it.ID) {
				t.Fatalf("visibility %v: inspect.Read = %+v; want one claim, of item %s", vis, rep.Queue, it.ID)
			}
			id := rep.Queue.Claims[0].Identity
			if id == nil || id.PID != os.Getpid() || id.Start.Before(before) {
				t.Errorf("visibility %v: claim identity = %+v; want pid %d, started after %v", vis, id, os.Getpid(), before)
			}
			if err := it.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
