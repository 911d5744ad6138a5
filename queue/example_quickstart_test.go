package queue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/queue"
)

// A work queue whose consumer receives items from a channel, urgent ones
// first, each acked once done.
func Example_quickStart() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	var c *queue.Consumer
	handle := func(ctx context.Context, data []byte) {
		fmt.Printf("%s\n", data)
		if string(data) == "report" {
			c.Close() // the service stops
		}
	}

	producer := queue.New(st, "/queues/jobs", queue.WithDelivery(queue.AtLeastOnce))
	if err := producer.Put(ctx, []byte("report")); err != nil {
		log.Fatal(err)
	}

	q := queue.New(st, "/queues/jobs", queue.WithDelivery(queue.AtLeastOnce))
	if err := q.PutPriority(ctx, []byte("urgent"), 10); err != nil { // higher first
		log.Fatal(err)
	}
	c = q.Consume(ctx) // items arrive on a channel, in queue order
	for it := range c.Items() {
		handle(it.Context(), it.Data)       // its context ends if the claim is lost
		if err := it.Ack(ctx); err != nil { // unacked, it is delivered again
			log.Print(err)
		}
	}
	// Output:
	// urgent
	// report
}
