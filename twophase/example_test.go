package twophase_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/twophase"
)

// A coordinator asks two services to commit an order; both vote commit.
func ExampleCoordinator() {
	ctx := context.Background()
	srv := memstore.NewServer() // in production, zkstore or etcdstore
	coord, billing, shipping := srv.Open(), srv.Open(), srv.Open()
	defer coord.Close()
	defer billing.Close()
	defer shipping.Close()

	c, err := twophase.Begin(ctx, coord, "/tx/order-42", []string{"billing", "shipping"}, time.Now().Add(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	b, err := twophase.Join(ctx, billing, c.Path(), "billing")
	if err != nil {
		log.Fatal(err)
	}
	s, err := twophase.Join(ctx, shipping, c.Path(), "shipping")
	if err != nil {
		log.Fatal(err)
	}
	// Each participant prepares its part, then votes.
	_ = b.Vote(ctx, true)
	_ = s.Vote(ctx, true)

	fmt.Println("coordinator:", c.Wait(ctx))
	fmt.Println("billing:", b.Wait(ctx))

	// Once every party has acted on the outcome, the last to forget
	// deletes the transaction.
	for _, forget := range []func(context.Context) error{c.Forget, b.Forget, s.Forget} {
		_ = forget(ctx)
	}
	fmt.Println("after forgetting:", errors.Is(twophase.Await(ctx, coord, c.Path()), twophase.ErrNoTransaction))
	// Output:
	// coordinator: <nil>
	// billing: <nil>
	// after forgetting: true
}

// A participant that crashed after voting joins again with a new session
// and reads the outcome; its vote stands.
func ExampleParticipant() {
	ctx := context.Background()
	srv := memstore.NewServer()
	coord, first := srv.Open(), srv.Open()
	defer coord.Close()

	c, err := twophase.Begin(ctx, coord, "/tx/7", []string{"worker"}, time.Now().Add(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	w, err := twophase.Join(ctx, first, c.Path(), "worker")
	if err != nil {
		log.Fatal(err)
	}
	_ = w.Vote(ctx, true)
	first.Close() // the worker crashes

	again := srv.Open() // and restarts
	defer again.Close()
	w, err = twophase.Join(ctx, again, c.Path(), "worker")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("vote again:", errors.Is(w.Vote(ctx, false), twophase.ErrVoted))
	fmt.Println("outcome:", w.Wait(ctx))
	// Output:
	// vote again: true
	// outcome: <nil>
}

// An abort says why.
func ExampleAbortError() {
	ctx := context.Background()
	srv := memstore.NewServer()
	coord, inventory := srv.Open(), srv.Open()
	defer coord.Close()
	defer inventory.Close()

	c, err := twophase.Begin(ctx, coord, "/tx/9", []string{"inventory", "payment"}, time.Now().Add(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	p, err := twophase.Join(ctx, inventory, c.Path(), "inventory")
	if err != nil {
		log.Fatal(err)
	}
	_ = p.Vote(ctx, false) // out of stock

	err = c.Wait(ctx)
	var ae *twophase.AbortError
	if errors.As(err, &ae) {
		fmt.Println(ae.Reason, ae.Participant)
	}
	fmt.Println(err)
	// Output:
	// vote inventory
	// twophase: transaction aborted: participant "inventory" voted abort
}
