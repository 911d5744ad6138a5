package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// Two sessions on one tree: one creates an ephemeral node, the other
// watches it and sees it vanish when the first session expires.
func Example() {
	ctx := context.Background()
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer b.Close()

	n, _ := a.Create(ctx, "/workers/w-", []byte("a"), store.EphemeralSequential)
	fmt.Println("created", n.Path)

	exists, _, ev, _ := b.ExistsW(ctx, n.Path)
	fmt.Println("b sees it:", exists)

	a.Expire()
	fmt.Println("b's watch:", (<-ev).Type)
	fmt.Println("a's session:", context.Cause(a.Context()))
	_, err := a.Get(ctx, n.Path)
	fmt.Println("a after expiry:", errors.Is(err, store.ErrSessionExpired))
	// Output:
	// created /workers/w-0000000002
	// b sees it: true
	// b's watch: deleted
	// a's session: store: session expired
	// a after expiry: true
}

// A session frozen as a stopped process is: the server expires it after
// its timeout, while it sees nothing, and it learns of the end on Thaw.
func ExampleStore_Freeze() {
	ctx := context.Background()
	srv := memstore.NewServer(memstore.WithSessionTimeout(10 * time.Millisecond))
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()

	n, _ := a.Create(ctx, "/workers/w", nil, store.Ephemeral)
	_, _, ev, _ := b.ExistsW(ctx, n.Path)

	a.Freeze()
	fmt.Println("b sees a's node go:", (<-ev).Type) // after a's timeout
	fmt.Println("a, frozen, still believes:", a.Context().Err() == nil)

	a.Thaw()
	fmt.Println("a, thawed:", context.Cause(a.Context()))
	// Output:
	// b sees a's node go: deleted
	// a, frozen, still believes: true
	// a, thawed: store: session expired
}
