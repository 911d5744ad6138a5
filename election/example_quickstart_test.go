package election_test

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/memstore"
)

// A service that leads whenever it can, doing leader-only work under each
// term's context.
func Example_quickStart() {
	ctx, shutdown := context.WithCancel(context.Background())
	st := memstore.New()
	defer st.Close()
	lead := func(ctx context.Context, token int64) {
		fmt.Println("leading under token", token)
		shutdown() // the service stops: its candidate resigns
		<-ctx.Done()
	}

	cand := election.New(st, "/services/scheduler").Candidate(ctx, []byte("host-a"))
	defer cand.Close()
	for term := range cand.Terms() { // each term this process wins
		lead(term.Context(), term.Token()) // the context ends when leadership is lost
	}
	fmt.Println("candidate stopped:", cand.Err())
	// Output:
	// leading under token 3
	// candidate stopped: election: candidate: context canceled
}
