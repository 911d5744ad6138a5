package group_test

import (
	"context"
	"fmt"
	"log"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/memstore"
)

// A replica joins its service's group with its address; a router follows
// the members.
func Example_quickStart() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	var w *group.Watcher
	route := func(members []group.Member) {
		for _, m := range members {
			fmt.Printf("route to %s\n", m.Value)
		}
		w.Close() // the router stops
	}

	m, err := group.Join(ctx, st, "/services/api", []byte("10.0.0.1:80"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Leave(ctx) // m.Context() ends if the membership is lost
	w = group.Watch(ctx, st, "/services/api")
	for members := range w.Members() { // the whole list, now and on every change
		route(members)
	}
	// Output:
	// route to 10.0.0.1:80
}
