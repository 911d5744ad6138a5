package cache_test

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// A router keeps the endpoints its replicas publish under one path, with
// one watch on the server for the whole tree.
func Example_quickStart() {
	ctx, shutdown := context.WithCancel(context.Background())
	st := memstore.New()
	defer st.Close()
	st.Create(ctx, "/services/api/a", []byte("10.0.0.1:80"), store.Ephemeral)
	st.Create(ctx, "/services/api/b", []byte("10.0.0.2:80"), store.Ephemeral)
	route := func(endpoints map[string]string) {
		for _, p := range slices.Sorted(maps.Keys(endpoints)) {
			fmt.Printf("%s %q\n", p, endpoints[p])
		}
		shutdown() // the router stops
	}

	endpoints := map[string]string{}
	t := cache.NewTree(ctx, st, "/services/api", cache.WithDepth(1)) // a node and its children
	defer t.Close()
	for e := range t.Events() { // every node Created, then Current, then each change in order
		switch e.Type {
		case cache.Created, cache.Changed:
			endpoints[e.Path] = string(e.Node.Data)
		case cache.Deleted:
			delete(endpoints, e.Path)
		case cache.Current:
			route(endpoints)
		}
	}
	// Output:
	// /services/api ""
	// /services/api/a "10.0.0.1:80"
	// /services/api/b "10.0.0.2:80"
}
