package group_test

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/memstore"
)

// Replicas join a group with their address; a watcher receives the whole
// member list, in the order they joined, on every change.
func ExampleWatch() {
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	w := group.Watch(ctx, a, "/services/api")
	defer w.Close()
	show := func() {
		ms := <-w.Members()
		fmt.Print(len(ms), " members:")
		for _, m := range ms {
			fmt.Printf(" %s", m.Value)
		}
		fmt.Println()
	}
	show()

	m1, _ := group.Join(ctx, a, "/services/api", []byte("10.0.0.1:80"))
	show()
	m2, _ := group.Join(ctx, b, "/services/api", []byte("10.0.0.2:80"))
	show()

	b.Expire() // memstore's test hook: b's session ends
	<-m2.Done()
	fmt.Println("b:", context.Cause(m2.Context()))
	show()
	m1.Leave(ctx)
	show()
	// Output:
	// 0 members:
	// 1 members: 10.0.0.1:80
	// 2 members: 10.0.0.1:80 10.0.0.2:80
	// b: store: session expired
	// 1 members: 10.0.0.1:80
	// 0 members:
}
