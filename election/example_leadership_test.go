package election_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
)

// Leader-only work runs until the term's Done channel closes, and writes
// only under the term: a write that reaches the server after the term ended
// is refused, however late it arrives.
func ExampleLeadership() {
	srv := memstore.NewServer()
	st, other := srv.Open(), srv.Open()
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := election.New(st, "/services/scheduler").Campaign(ctx, []byte("host-a"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = shared.Write(ctx, st, l, []store.Op{store.CreateOp("/schedule", []byte("plan 1"))})
	fmt.Println("written while leading:", err)

	st.Expire() // the leader's session ends, as after a long pause
	select {
	case <-l.Done():
		fmt.Println("term over:", context.Cause(l.Context()))
	case <-ctx.Done():
		return
	}
	_, err = shared.Write(ctx, other, l, []store.Op{store.SetOp("/schedule", []byte("plan 2"), store.AnyVersion)})
	fmt.Println("late write refused:", errors.Is(err, shared.ErrLost))
	// Output:
	// written while leading: <nil>
	// term over: store: session expired
	// late write refused: true
}
