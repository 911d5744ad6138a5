package sync_test

import (
	"context"
	"fmt"
	"log"
	gosync "sync"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/sync"
)

// A coordinator holds workers back until the input is ready.
func ExampleBarrier() {
	srv := memstore.NewServer()
	coordinator, worker := srv.Open(), srv.Open()
	defer coordinator.Close()
	defer worker.Close()
	ctx := context.Background()

	gate := sync.NewBarrier(coordinator, "/jobs/42/input-ready")
	if err := gate.Set(ctx); err != nil {
		log.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sync.NewBarrier(worker, "/jobs/42/input-ready").Wait(ctx) }()

	// ... prepare the input, then let every worker go.
	if err := gate.Remove(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker released:", <-waited)
	// Output: worker released: <nil>
}

// Three processes start a phase together and end it together.
func ExampleDoubleBarrier() {
	srv := memstore.NewServer()
	ctx := context.Background()
	var (
		wg   gosync.WaitGroup
		mu   gosync.Mutex
		done []string
	)
	for _, name := range []string{"a", "b", "c"} {
		st := srv.Open()
		defer st.Close()
		phase := sync.NewDoubleBarrier(st, "/jobs/42/phase", 3)
		wg.Go(func() {
			if err := phase.Enter(ctx); err != nil {
				log.Fatal(err)
			}
			// ... all three compute here, at the same time.
			mu.Lock()
			done = append(done, name)
			mu.Unlock()
			if err := phase.Leave(ctx); err != nil {
				log.Fatal(err)
			}
		})
	}
	wg.Wait()
	fmt.Println(len(done), "processes did the phase together")
	// Output: 3 processes did the phase together
}

// At most two downloads run at a time, across every process.
func ExampleSemaphore() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()

	slots := sync.NewSemaphore(st, "/downloads/slots", 2)
	first, err := slots.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	second, err := slots.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, ok, err := slots.TryAcquire(ctx)
	fmt.Println("third slot free:", ok, err)

	// Do the work under the lease's context: it ends if the lease is lost.
	work := first.Context()
	if err := first.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("work context after Release:", context.Cause(work))

	third, ok, err := slots.TryAcquire(ctx)
	fmt.Println("third slot free after a release:", ok, err)
	_ = third.Release(ctx)
	_ = second.Release(ctx)
	// Output:
	// third slot free: false <nil>
	// work context after Release: corral: released
	// third slot free after a release: true <nil>
}
