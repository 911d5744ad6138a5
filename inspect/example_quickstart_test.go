package inspect_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/sync"
)

// Who holds a lock and who waits for it.
func Example_quickStart() {
	ctx := context.Background()
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	_ = sync.NewMutex(a, "/locks/report").Lock(ctx)
	bctx, stop := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { waited <- sync.NewMutex(b, "/locks/report").Lock(bctx) }()
	defer func() { stop(); <-waited }()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // the wait below is bounded
	defer cancel()
	w := inspect.Watch(wctx, a, "/locks/report")
	defer w.Close()
	for rs := range w.Reports() { // until b waits
		if len(rs) == 1 && len(rs[0].Waiters) == 1 {
			break
		}
	}

	r, err := inspect.Read(ctx, a, "/locks/report")
	if err != nil {
		log.Fatal(err)
	}
	h := r.Holders[0] // host, pid and start from its node
	fmt.Println(r.Kind, "held under token", h.Seq, "with", len(r.Waiters), "waiting; identified:", h.Identity != nil)
	// Output:
	// lock held under token 3 with 1 waiting; identified: true
}
