package twophase_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/twophase"
)

// A coordinator and a participant, each on its own session (in its own
// process, in production).
func Example_quickStart() {
	ctx := context.Background()
	srv := memstore.NewServer()
	coord, billing := srv.Open(), srv.Open()
	defer coord.Close()
	defer billing.Close()

	c, err := twophase.Begin(ctx, coord, "/tx/order-42", []string{"billing"}, time.Now().Add(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	p, err := twophase.Join(ctx, billing, "/tx/order-42", "billing") // the participant's side
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Vote(ctx, true); err != nil { // prepared: vote commit, once
		log.Fatal(err)
	}
	fmt.Println("coordinator:", c.Wait(ctx)) // nil: committed; a *twophase.AbortError says why not
	fmt.Println("billing:", p.Wait(ctx))     // learned by watch, even after a restart
	// Output:
	// coordinator: <nil>
	// billing: <nil>
}
