package election_test

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/memstore"
)

// A service that leads whenever it can: each term arrives on Terms, and the
// select on the term's Done channel is the whole leadership loop.
func ExampleElection_Candidate() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()

	cand := election.New(st, "/services/scheduler").Candidate(ctx, []byte("host-a"))
	defer cand.Close()

	n := 0
	for term := range cand.Terms() {
		n++
		fmt.Printf("term %d: leading as %s\n", n, term.Value())
		switch n {
		case 1:
			// Step down; the candidate queues again and wins the
			// next term, since nobody else is running.
			term.Resign(ctx)
		case 2:
			// The session expires (forced here with memstore's
			// test hook): leadership ends, and the candidate stops.
			st.Expire()
		}
		select {
		case <-term.Done():
			fmt.Printf("term %d: over: %v\n", n, context.Cause(term.Context()))
		case <-ctx.Done():
			return
		}
	}
	fmt.Println("candidate stopped:", cand.Err())
	// Output:
	// term 1: leading as host-a
	// term 1: over: election: resigned
	// term 2: leading as host-a
	// term 2: over: store: session expired
	// candidate stopped: store: session expired
}

// Campaign blocks until the caller leads; the leadership's context is the
// context of leader-only work.
func ExampleElection_Campaign() {
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	l, err := election.New(a, "/services/scheduler").Campaign(ctx, []byte("host-a"))
	if err != nil {
		fmt.Println(err)
		return
	}
	leader, _ := election.New(b, "/services/scheduler").Leader(ctx)
	fmt.Printf("%s leads\n", leader.Value)

	l.Proclaim(ctx, []byte("host-a:8080"))
	leader, _ = election.New(b, "/services/scheduler").Leader(ctx)
	fmt.Printf("%s leads\n", leader.Value)

	l.Resign(ctx)
	<-l.Context().Done()
	fmt.Println(context.Cause(l.Context()))
	// Output:
	// host-a leads
	// host-a:8080 leads
	// election: resigned
}

// Observe reports every change of leader, "no leader" included.
func ExampleElection_Observe() {
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	leaders := election.New(b, "/services/scheduler").Observe(ctx).Leaders()
	fmt.Println(describe(<-leaders))

	l, _ := election.New(a, "/services/scheduler").Campaign(ctx, []byte("host-a"))
	fmt.Println(describe(<-leaders))

	l.Resign(ctx)
	fmt.Println(describe(<-leaders))
	// Output:
	// no leader
	// host-a leads
	// no leader
}

func describe(l election.Leader) string {
	if l.IsZero() {
		return "no leader"
	}
	return string(l.Value) + " leads"
}
