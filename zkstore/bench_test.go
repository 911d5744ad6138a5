package zkstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// BenchmarkOps measures each call through zkstore beside the same request
// made directly on go-zookeeper, on one server and in one run. zkstore is
// given a cancellable ctx, so each call pays for its goroutine.
func BenchmarkOps(b *testing.B) {
	srv, _ := server(b)
	conn, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := zkstore.Open(ctx, []string{srv.Addr()}, zkstore.WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	acl := zk.WorldACL(zk.PermAll)
	base := fmt.Sprintf("/bench-%d", time.Now().UnixNano())
	if _, err := st.Create(ctx, base+"/list/x", nil, store.Persistent); err != nil {
		b.Fatal(err)
	}
	for i := range 9 {
		if _, err := st.Create(ctx, base+"/list/item-", nil, store.Sequential); err != nil {
			b.Fatal(err, i)
		}
	}
	dirs := 0
	dir := func(b *testing.B) string {
		dirs++
		d := fmt.Sprintf("%s/%s-%d", base, b.Name(), dirs)
		if _, err := st.Create(ctx, d+"/x", nil, store.Persistent); err != nil {
			b.Fatal(err)
		}
		return d
	}
	check := func(b *testing.B, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}

	b.Run("create/zk", func(b *testing.B) {
		d := dir(b)
		for b.Loop() {
			_, err := conn.Create(d+"/n-", nil, zk.FlagSequence, acl)
			check(b, err)
		}
	})
	b.Run("create/zkstore", func(b *testing.B) {
		d := dir(b)
		for b.Loop() {
			_, err := st.Create(ctx, d+"/n-", nil, store.Sequential)
			check(b, err)
		}
	})
	b.Run("create-ephemeral-seq/zk", func(b *testing.B) {
		d := dir(b)
		for b.Loop() {
			_, err := conn.CreateProtectedEphemeralSequential(d+"/lock-", nil, acl)
			check(b, err)
		}
	})
	b.Run("create-ephemeral-seq/zkstore", func(b *testing.B) {
		d := dir(b)
		for b.Loop() {
			_, err := st.Create(ctx, d+"/lock-", nil, store.EphemeralSequential)
			check(b, err)
		}
	})
	b.Run("children/zk", func(b *testing.B) {
		for b.Loop() {
			_, _, err := conn.Children(base + "/list")
			check(b, err)
		}
	})
	b.Run("children/zkstore", func(b *testing.B) {
		for b.Loop() {
			_, err := st.Children(ctx, base+"/list")
			check(b, err)
		}
	})
	// Delete: nodes are made outside the timer.
	const batch = 200
	b.Run("delete/zk", func(b *testing.B) {
		d := dir(b)
		for i := 0; i < b.N; i += batch {
			b.StopTimer()
			n := min(batch, b.N-i)
			for j := range n {
				_, err := conn.Create(fmt.Sprintf("%s/%d", d, j), nil, 0, acl)
				check(b, err)
			}
			b.StartTimer()
			for j := range n {
				check(b, conn.Delete(fmt.Sprintf("%s/%d", d, j), -1))
			}
		}
	})
	b.Run("delete/zkstore", func(b *testing.B) {
		d := dir(b)
		for i := 0; i < b.N; i += batch {
			b.StopTimer()
			n := min(batch, b.N-i)
			for j := range n {
				_, err := conn.Create(fmt.Sprintf("%s/%d", d, j), nil, 0, acl)
				check(b, err)
			}
			b.StartTimer()
			for j := range n {
				check(b, st.Delete(ctx, fmt.Sprintf("%s/%d", d, j)))
			}
		}
	})
	// Exists-watch: set a watch on a missing node, create it, receive the
	// event, delete it: the watch's whole life.
	b.Run("exists-watch/zk", func(b *testing.B) {
		p := dir(b) + "/w"
		for b.Loop() {
			_, _, ch, err := conn.ExistsW(p)
			check(b, err)
			_, err = conn.Create(p, nil, 0, acl)
			check(b, err)
			if ev := <-ch; ev.Type != zk.EventNodeCreated {
				b.Fatalf("event %v", ev)
			}
			check(b, conn.Delete(p, -1))
		}
	})
	b.Run("exists-watch/zkstore", func(b *testing.B) {
		p := dir(b) + "/w"
		for b.Loop() {
			_, ch, err := st.ExistsW(ctx, p)
			check(b, err)
			_, err = st.Create(ctx, p, nil, store.Persistent)
			check(b, err)
			if ev := <-ch; ev.Type != store.EventCreated {
				b.Fatalf("event %+v", ev)
			}
			check(b, st.Delete(ctx, p))
		}
	})
}
