package store_test

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// A subtree is read once, and then followed change by change: with one
// watch for the whole tree where the store has one (store.TreeFollower),
// with a watch on each node where it does not.
func ExampleFollowTree() {
	st := memstore.New()
	defer st.Close()
	ctx := context.Background()
	st.Create(ctx, "/config/a", []byte("1"), store.Persistent)

	f, nodes, err := store.FollowTree(ctx, st, "/config", store.MaxPathDepth, 1000)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Stop()
	for _, n := range nodes {
		fmt.Printf("read %s %q\n", n.Path, n.Data)
	}

	st.Set(ctx, "/config/a", []byte("2"), store.AnyVersion)
	st.Create(ctx, "/config/b", nil, store.Persistent)
	if err := f.Sync(ctx); err != nil { // every change made before is in Changes
		fmt.Println(err)
		return
	}
	cs, _, _ := f.Changes()
	for _, c := range cs {
		fmt.Printf("%v %s %q\n", c.Type, c.Node.Path, c.Node.Data)
	}
	// Output:
	// read /config ""
	// read /config/a "1"
	// data-changed /config/a "2"
	// created /config/b ""
}
