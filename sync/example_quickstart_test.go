package sync_test

import (
	"context"
	"fmt"
	"log"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/sync"
)

// A lock across processes, and work done only while it is held: the hold's
// context ends the moment the lock is lost, and its token fences storage
// against a stale holder.
func Example_quickStart() {
	ctx := context.Background()
	st := memstore.New() // zkstore.Open or etcdstore.Dial in production
	defer st.Close()

	m := sync.NewMutex(st, "/locks/report")
	if err := m.Lock(ctx); err != nil { // cancellable; leaves no node on failure
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	writeReport(m.Context(), m.Token()) // ends if the lock is lost; the token fences
	// Output:
	// report written under token 3
}

func writeReport(ctx context.Context, token int64) {
	if ctx.Err() == nil {
		fmt.Println("report written under token", token)
	}
}
