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

// A coordinator that crashed takes its transaction back with a new session
// and aborts it; the participant learns the outcome.
func ExampleResume() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := memstore.NewServer()
	first, worker := srv.Open(), srv.Open()
	defer worker.Close()

	c, err := twophase.Begin(ctx, first, "/tx/8", []string{"worker"}, time.Now().Add(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	id := c.ID()
	first.Close() // the coordinator crashes

	again := srv.Open() // and restarts
	defer again.Close()
	c, err = twophase.Resume(ctx, again, "/tx/8")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same transaction:", c.ID() == id)
	_ = c.Abort(ctx)
	fmt.Println("outcome:", errors.Is(twophase.Await(ctx, worker, "/tx/8"), twophase.ErrAborted))
	// Output:
	// same transaction: true
	// outcome: true
}

// A janitor removes a decided transaction whose parties never forgot it;
// an undecided one it leaves alone.
func ExampleCollect() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := memstore.New()
	defer st.Close()

	c, err := twophase.Begin(ctx, st, "/tx/9", []string{"worker"}, time.Now().Add(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("undecided:", errors.Is(twophase.Collect(ctx, st, c.Path()), twophase.ErrUndecided))
	_ = c.Abort(ctx)
	fmt.Println("decided:", twophase.Collect(ctx, st, c.Path()))
	fmt.Println("gone:", errors.Is(twophase.Await(ctx, st, c.Path()), twophase.ErrNoTransaction))
	// Output:
	// undecided: true
	// decided: <nil>
	// gone: true
}
