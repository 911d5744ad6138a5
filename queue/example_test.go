package queue_test

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/queue"
)

// A producer puts jobs, one of them urgent; a consumer on another session
// receives them from a channel, the urgent one first.
func Example() {
	srv := memstore.NewServer()
	producer, consumer := srv.Open(), srv.Open()
	defer producer.Close()
	defer consumer.Close()
	ctx := context.Background()

	pq := queue.New(producer, "/jobs")
	for _, job := range []string{"a", "b", "c"} {
		if err := pq.Put(ctx, []byte(job)); err != nil {
			panic(err)
		}
	}
	if err := pq.PutPriority(ctx, []byte("urgent"), 10); err != nil {
		panic(err)
	}

	cq := queue.New(consumer, "/jobs")
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	c := cq.Consume(cctx)
	for it := range c.Items() {
		fmt.Println(string(it.Data))
		if string(it.Data) == "c" {
			stop()
		}
	}
	fmt.Println(c.Err())
	// Output:
	// urgent
	// a
	// b
	// c
	// context canceled
}

// At-least-once, an item stays in the queue, claimed, until it is acked; a
// Nack (or the end of the consumer's session) returns it in its place.
func ExampleItem_Nack() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()
	q := queue.New(st, "/jobs", queue.WithDelivery(queue.AtLeastOnce))
	for _, job := range []string{"a", "b"} {
		if err := q.Put(ctx, []byte(job)); err != nil {
			panic(err)
		}
	}

	it, _ := q.Take(ctx)
	fmt.Println("took", string(it.Data))
	if err := it.Nack(ctx); err != nil { // processing failed: give it back
		panic(err)
	}
	for range 2 {
		it, _ := q.Take(ctx)
		fmt.Println("took", string(it.Data))
		if err := it.Ack(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// took a
	// took a
	// took b
}

// A lone producer keeps many puts in flight with PutAsync, which go
// together in few requests, and then checks that every one was stored, as
// Curator's flushPuts waits for its background puts.
func ExampleQueue_PutAsync() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()
	q := queue.New(st, "/events")

	var pending []*queue.Pending
	for i := range 1000 {
		pending = append(pending, q.PutAsync(ctx, fmt.Appendf(nil, "event %d", i), 0))
	}
	for _, p := range pending {
		if err := p.Wait(ctx); err != nil {
			panic(err) // this item may not be in the queue
		}
	}
	n, _ := q.Len(ctx)
	fmt.Println(n, "events queued")
	// Output:
	// 1000 events queued
}
