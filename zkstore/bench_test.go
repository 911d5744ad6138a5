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
// made directly on go-zookeeper, on one server and in one run. The two are
// interleaved, one raw request then one through zkstore, and timed apart,
// so that the load of a shared machine weighs on both alike; each
// sub-benchmark reports both latencies and zkstore's overhead in percent.
// zkstore is given a cancellable ctx, so every call pays for the goroutine
// that lets it be abandoned.
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

	// paired times raw then wrapped once per iteration, each preceded by
	// its untimed setup, and reports both means.
	paired := func(b *testing.B, setup func(i int), raw, wrapped func(i int) error) {
		var tRaw, tWrapped time.Duration
		i := 0
		for b.Loop() {
			for k, f := range []func(int) error{raw, wrapped} {
				b.StopTimer()
				if setup != nil {
					setup(2*i + k)
				}
				b.StartTimer()
				start := time.Now()
				check(b, f(2*i+k))
				if k == 0 {
					tRaw += time.Since(start)
				} else {
					tWrapped += time.Since(start)
				}
			}
			i++
		}
		b.ReportMetric(float64(tRaw.Microseconds())/float64(i), "zk-µs/op")
		b.ReportMetric(float64(tWrapped.Microseconds())/float64(i), "zkstore-µs/op")
		b.ReportMetric(100*(float64(tWrapped)/float64(tRaw)-1), "overhead-%")
	}

	b.Run("create", func(b *testing.B) {
		d := dir(b)
		paired(b, nil, func(int) error {
			_, err := conn.Create(d+"/n-", nil, zk.FlagSequence, acl)
			return err
		}, func(int) error {
			_, err := st.Create(ctx, d+"/n-", nil, store.Sequential)
			return err
		})
	})
	b.Run("create-ephemeral-seq", func(b *testing.B) {
		d := dir(b)
		paired(b, nil, func(int) error {
			_, err := conn.CreateProtectedEphemeralSequential(d+"/lock-", nil, acl)
			return err
		}, func(int) error {
			_, err := st.Create(ctx, d+"/lock-", nil, store.EphemeralSequential)
			return err
		})
	})
	// An uncontended lock cycle: zkstore pipelines the listing behind
	// the create (one round trip), go-zookeeper makes two.
	b.Run("create-list-delete", func(b *testing.B) {
		d := dir(b)
		paired(b, nil, func(int) error {
			p, err := conn.CreateProtectedEphemeralSequential(d+"/lock-", nil, acl)
			if err != nil {
				return err
			}
			if _, _, err := conn.Children(d); err != nil {
				return err
			}
			return conn.Delete(p, -1)
		}, func(int) error {
			n, _, err := st.CreateAndList(ctx, d+"/lock-", nil, store.EphemeralSequential)
			if err != nil {
				return err
			}
			return st.Delete(ctx, n.Path)
		})
	})
	b.Run("children", func(b *testing.B) {
		paired(b, nil, func(int) error {
			_, _, err := conn.Children(base + "/list")
			return err
		}, func(int) error {
			_, err := st.Children(ctx, base+"/list")
			return err
		})
	})
	b.Run("delete", func(b *testing.B) {
		d := dir(b)
		name := func(i int) string { return fmt.Sprintf("%s/%d", d, i) }
		paired(b, func(i int) {
			_, err := conn.Create(name(i), nil, 0, acl)
			check(b, err)
		}, func(i int) error {
			return conn.Delete(name(i), -1)
		}, func(i int) error {
			return st.Delete(ctx, name(i))
		})
	})
	// Exists-watch: set a watch on a missing node, create it, receive the
	// event, delete it: the watch's whole life.
	b.Run("exists-watch", func(b *testing.B) {
		d := dir(b)
		paired(b, nil, func(i int) error {
			p := fmt.Sprintf("%s/w%d", d, i)
			_, _, ch, err := conn.ExistsW(p)
			check(b, err)
			_, err = conn.Create(p, nil, 0, acl)
			check(b, err)
			if ev := <-ch; ev.Type != zk.EventNodeCreated {
				b.Fatalf("event %v", ev)
			}
			return conn.Delete(p, -1)
		}, func(i int) error {
			p := fmt.Sprintf("%s/w%d", d, i)
			_, _, ch, err := st.ExistsW(ctx, p)
			check(b, err)
			_, err = st.Create(ctx, p, nil, store.Persistent)
			check(b, err)
			if ev := <-ch; ev.Type != store.EventCreated {
				b.Fatalf("event %+v", ev)
			}
			return st.Delete(ctx, p)
		})
	})
}
