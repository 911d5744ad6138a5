package shared_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/sync"
)

// State kept in the store and changed only while a lock is held, and a
// counter.
func Example_quickStart() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()

	m := sync.NewMutex(st, "/locks/jobs") // or any hold: a Lease, a Leadership, a Shard
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	state := shared.NewValue(st, "/jobs/42/state")
	_, err := state.SetWhile(ctx, m, []byte("done")) // applied only while m is held, as the server decides
	if errors.Is(err, shared.ErrLost) {
		log.Print("lost the lock: nothing was written")
	}
	n, err := shared.NewCounter(st, "/stats/jobs").Add(ctx, 1) // exact under any number of adders
	fmt.Println(n, err)
	// Output:
	// 1 <nil>
}
