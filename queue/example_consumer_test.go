package queue_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/queue"
)

// A worker consumes at-least-once, acking each job once done, and stops
// when it is told to: the job its consumer had taken but not handed over is
// given back, so stopping loses nothing.
func ExampleConsumer() {
	st := memstore.New()
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := queue.New(st, "/jobs", queue.WithDelivery(queue.AtLeastOnce))
	if err := q.PutBatch(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")}); err != nil {
		log.Fatal(err)
	}

	c := q.Consume(ctx)
	for it := range c.Items() {
		fmt.Println("done", string(it.Data))
		if err := it.Ack(ctx); err != nil {
			log.Fatal(err)
		}
		if string(it.Data) == "b" {
			c.Close() // shutting down
		}
	}
	n, _ := q.Len(ctx)
	fmt.Println("left:", n, "consumer:", c.Err())
	// Output:
	// done a
	// done b
	// left: 1 consumer: corral: closed
}

// A job that fails every time is moved aside instead of its third delivery,
// rather than coming back forever.
func ExampleWithDeadLetter() {
	st := memstore.New()
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := queue.New(st, "/jobs", queue.WithDelivery(queue.AtLeastOnce), queue.WithDeadLetter("/jobs-failed", 2))
	if err := q.Put(ctx, []byte("poison")); err != nil {
		log.Fatal(err)
	}

	for range 2 {
		it, err := q.Take(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("failed", string(it.Data))
		_ = it.Nack(ctx)
	}
	_, again, _ := q.TryTake(ctx) // moves it instead of delivering it
	dead, ok, _ := queue.New(st, "/jobs-failed").TryTake(ctx)
	fmt.Println("third delivery:", again, "dead letter:", ok && string(dead.Data) == "poison")
	// Output:
	// failed poison
	// failed poison
	// third delivery: false dead letter: true
}
