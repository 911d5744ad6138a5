package sync_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"maps"
	"slices"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/sync"
)

// Every contender node records who made it, for operators and for any other
// client of the store; WithLabel adds what for.
func ExampleWithLabel() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()

	m := sync.NewMutex(st, "/locks/deploy", sync.WithLabel("deploy"))
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	kids, _ := st.Children(ctx, "/locks/deploy")
	n, _ := st.Get(ctx, "/locks/deploy/"+kids[0].Name)
	var record map[string]any
	if err := json.Unmarshal(n.Data, &record); err != nil {
		log.Fatal(err)
	}
	fmt.Println(slices.Sorted(maps.Keys(record)), record["label"])
	// Output: [host label pid start] deploy
}

// By default a hold ends the moment the connection is lost, since ownership
// is unknown until it comes back; KeepOnDisconnect rides a disconnection out
// while the session lives.
func ExampleWithDisconnectPolicy() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := memstore.New()
	defer st.Close()

	strict := sync.NewMutex(st, "/locks/payments")
	lenient := sync.NewMutex(st, "/locks/report", sync.WithDisconnectPolicy(sync.KeepOnDisconnect))
	if err := errors.Join(strict.Lock(ctx), lenient.Lock(ctx)); err != nil {
		log.Fatal(err)
	}
	held := strict.Context()

	st.Disconnect() // memstore's test hook: the connection drops
	select {
	case <-held.Done():
		fmt.Println("strict:", context.Cause(held))
	case <-ctx.Done():
		return
	}
	st.Reconnect()
	fmt.Println("lenient still held:", lenient.Context().Err() == nil)
	fmt.Println("strict unlock:", errors.Is(strict.Unlock(ctx), sync.ErrLockLost))
	fmt.Println("lenient unlock:", lenient.Unlock(ctx))
	// Output:
	// strict: corral: connection lost, ownership unknown: store: disconnected
	// lenient still held: true
	// strict unlock: true
	// lenient unlock: <nil>
}

// Acquire waits for a lease as long as its ctx allows; one that gives up
// leaves the line and nothing behind.
func ExampleSemaphore_Acquire() {
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	first, err := sync.NewSemaphore(a, "/downloads/slots", 1).Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	slots := sync.NewSemaphore(b, "/downloads/slots", 1)
	wait, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = slots.Acquire(wait)
	fmt.Println("gave up:", errors.Is(err, context.DeadlineExceeded))

	if err := first.Release(ctx); err != nil {
		log.Fatal(err)
	}
	second, err := slots.Acquire(ctx)
	fmt.Println("after a release:", err, second.Token() > first.Token())
	_ = second.Release(ctx)
	// Output:
	// gave up: true
	// after a release: <nil> true
}
