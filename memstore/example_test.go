package memstore_test

import (
	"context"
	"errors"
	"fmt"

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
