package cache_test

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// A service follows its configuration node: the first value is the node
// now (missing here), then every change.
func ExampleNewNode() {
	srv := memstore.NewServer()
	st, admin := srv.Open(), srv.Open()
	defer st.Close()
	defer admin.Close()
	ctx := context.Background()

	n := cache.NewNode(ctx, st, "/config/feature-x")
	defer n.Close()
	fmt.Println(<-n.Values())

	admin.Create(ctx, "/config/feature-x", []byte("on"), store.Persistent)
	v := <-n.Values()
	fmt.Printf("%s exists: %v, data %q\n", v.Path, v.Exists, v.Data)

	admin.Delete(ctx, "/config/feature-x")
	fmt.Println(<-n.Values())
	// Output:
	// /config/feature-x: no node
	// /config/feature-x exists: true, data "on"
	// /config/feature-x: no node
}

// A service keeps the endpoints other processes publish: every node is
// created in the receiver's view, then Current says the view is whole;
// then each change comes, in order.
func ExampleNewTree() {
	srv := memstore.NewServer()
	st, a := srv.Open(), srv.Open()
	defer st.Close()
	defer a.Close()
	ctx := context.Background()
	a.Create(ctx, "/services/api/a", []byte("10.0.0.1:80"), store.Ephemeral)

	t := cache.NewTree(ctx, st, "/services/api", cache.WithDepth(1))
	defer t.Close()
	show := func() cache.EventType {
		e := <-t.Events()
		switch e.Type {
		case cache.Created, cache.Changed:
			fmt.Printf("%s %s %q\n", e.Type, e.Path, e.Node.Data)
		case cache.Deleted:
			fmt.Printf("%s %s (was %q)\n", e.Type, e.Path, e.Old.Data)
		default:
			fmt.Println(e.Type)
		}
		return e.Type
	}
	for show() != cache.Current {
	}

	b := srv.Open()
	b.Create(ctx, "/services/api/b", []byte("10.0.0.2:80"), store.Ephemeral)
	show()
	a.Expire() // memstore's test hook: a's session ends, its node goes
	show()
	// Output:
	// created /services/api ""
	// created /services/api/a "10.0.0.1:80"
	// current
	// created /services/api/b "10.0.0.2:80"
	// deleted /services/api/a (was "10.0.0.1:80")
}

// A snapshot is the whole tree at one moment: immutable, the receiver's
// own, and as cheap to hand out for a large tree as for a small one.
func ExampleSnapshot() {
	srv := memstore.NewServer()
	st := srv.Open()
	defer st.Close()
	ctx := context.Background()
	st.Create(ctx, "/flags/a", []byte("1"), store.Persistent)
	st.Create(ctx, "/flags/b", []byte("2"), store.Persistent)

	t := cache.NewTree(ctx, st, "/flags")
	defer t.Close()
	s := <-t.Snapshots()
	fmt.Println(s)
	for _, n := range s.Nodes() {
		fmt.Printf("%s %q\n", n.Path, n.Data)
	}
	b, _ := s.Get("/flags/b")
	fmt.Printf("b: %s\n", b.Data)
	// Output:
	// snapshot of /flags: 3 nodes
	// /flags ""
	// /flags/a "1"
	// /flags/b "2"
	// b: 2
}

// A Tree stops with its session. A Tree on a new session, from the last
// snapshot the receiver holds, tells only what changed since.
func ExampleWithBase() {
	srv := memstore.NewServer()
	st, admin := srv.Open(), srv.Open()
	defer admin.Close()
	ctx := context.Background()
	admin.Create(ctx, "/jobs/1", []byte("queued"), store.Persistent)

	t := cache.NewTree(ctx, st, "/jobs")
	last := <-t.Snapshots()
	st.Expire() // memstore's test hook: the session ends
	<-t.Done()
	fmt.Println("stopped:", t.Err())

	admin.Set(ctx, "/jobs/1", []byte("done"), store.AnyVersion)
	st = srv.Open()
	defer st.Close()
	t = cache.NewTree(ctx, st, "/jobs", cache.WithBase(last))
	defer t.Close()
	for e := range t.Events() {
		fmt.Println(e.Type, e.Path, string(e.Node.Data))
		if e.Type == cache.Current {
			break
		}
	}
	// Output:
	// stopped: store: session expired
	// changed /jobs/1 done
	// current
}
