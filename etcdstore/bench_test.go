package etcdstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/etcdserver"
	"github.com/corral-go/corral/store"
)

// Each benchmark runs one call through etcdstore and, beside it, the same
// work on the raw client: the request etcdstore's call stands for, so the
// difference is the adapter's cost. Both use one client connected straight
// to a single member (no proxy).
//
//	go test -run '^$' -bench . ./etcdstore/

// runs numbers benchmark runs, so that -count runs never reuse a key.
var runs atomic.Int64

func run() int64 { return runs.Add(1) }

func benchSetup(b *testing.B) (*clientv3.Client, *etcdstore.Store) {
	b.Helper()
	c := etcdserver.Start(b, 1)
	cli := c.Client(b, c.Members[0].ListenURL)
	s, err := etcdstore.Open(b.Context(), cli)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return cli, s
}

// BenchmarkCreate creates persistent nodes in an existing directory. The
// raw form is a create-if-absent transaction; raw-put is a blind Put, for
// reference.
func BenchmarkCreate(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	if _, err := s.Create(ctx, "/bench/create", nil, store.Persistent); err != nil {
		b.Fatal(err)
	}
	b.Run("etcdstore", func(b *testing.B) {
		r := run()
		for i := 0; b.Loop(); i++ {
			if _, err := s.Create(ctx, fmt.Sprintf("/bench/create/s%d-%d", r, i), nil, store.Persistent); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		r := run()
		for i := 0; b.Loop(); i++ {
			k := fmt.Sprintf("/bench/create/r%d-%d", r, i)
			resp, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, "")).
				Commit()
			if err != nil || !resp.Succeeded {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-put", func(b *testing.B) {
		r := run()
		for i := 0; b.Loop(); i++ {
			if _, err := cli.Put(ctx, fmt.Sprintf("/bench/create/p%d-%d", r, i), ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCreateSequential creates ephemeral sequential nodes, the
// contenders of every recipe.
func BenchmarkCreateSequential(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	b.Run("etcdstore", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Create(ctx, "/bench/seq/c-", nil, store.EphemeralSequential); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		r := run()
		for i := 0; b.Loop(); i++ {
			// What concurrency.Mutex sends: put-if-absent under the lease.
			k := fmt.Sprintf("/bench/seq/r%d-%016x", r, i)
			resp, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, "", clientv3.WithLease(s.Lease()))).
				Commit()
			if err != nil || !resp.Succeeded {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLockCycle is the uncontended lock cycle of the Mutex on etcd:
// create a contender and list its siblings in one transaction, then delete
// it. The raw form is what concurrency.Mutex sends for the same cycle.
func BenchmarkLockCycle(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	if _, err := s.Create(ctx, "/bench/lock", nil, store.Persistent); err != nil {
		b.Fatal(err)
	}
	b.Run("etcdstore", func(b *testing.B) {
		for b.Loop() {
			n, _, err := s.CreateAndList(ctx, "/bench/lock/c-", nil, store.EphemeralSequential)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Delete(ctx, n.Path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		r := run()
		for i := 0; b.Loop(); i++ {
			k := fmt.Sprintf("/bench/lock/r%d-%016x", r, i)
			resp, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, "", clientv3.WithLease(s.Lease())),
					clientv3.OpGet("/bench/lock/", clientv3.WithFirstCreate()...)).
				Commit()
			if err != nil || !resp.Succeeded {
				b.Fatal(err)
			}
			if _, err := cli.Delete(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkChildren lists a directory of 100 children.
func BenchmarkChildren(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	for i := range 100 {
		if _, err := s.Create(ctx, fmt.Sprintf("/bench/kids/k%03d", i), nil, store.Persistent); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("etcdstore", func(b *testing.B) {
		for b.Loop() {
			kids, err := s.Children(ctx, "/bench/kids")
			if err != nil || len(kids) != 100 {
				b.Fatal(len(kids), err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		for b.Loop() {
			resp, err := cli.Get(ctx, "/bench/kids/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil || len(resp.Kvs) != 100 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDelete deletes nodes made beforehand. The raw form is a blind
// delete; etcdstore's also checks, in the same transaction, that the node
// exists and has no children.
func BenchmarkDelete(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	fill := func(b *testing.B, prefix string) {
		b.Helper()
		for i := range b.N {
			if _, err := cli.Put(ctx, fmt.Sprintf("%s/%d", prefix, i), ""); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
	}
	b.Run("etcdstore", func(b *testing.B) {
		prefix := fmt.Sprintf("/bench/del/s%d", run())
		fill(b, prefix)
		for i := range b.N {
			if err := s.Delete(ctx, fmt.Sprintf("%s/%d", prefix, i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		prefix := fmt.Sprintf("/bench/del/r%d", run())
		fill(b, prefix)
		for i := range b.N {
			resp, err := cli.Delete(ctx, fmt.Sprintf("%s/%d", prefix, i))
			if err != nil || resp.Deleted != 1 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkExistsWatch sets an exists-watch on a missing key, creates the
// key and waits for the event: the wait of every recipe. The raw form runs
// the same protocol on the client (watch at the current revision with
// created-notify, read beside it, put, receive).
func BenchmarkExistsWatch(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	b.Run("etcdstore", func(b *testing.B) {
		r := run()
		for i := 0; b.Loop(); i++ {
			k := fmt.Sprintf("/bench/watch/s%d-%d", r, i)
			exists, ch, err := s.ExistsW(ctx, k)
			if err != nil || exists {
				b.Fatal(exists, err)
			}
			if _, err := cli.Put(ctx, k, ""); err != nil {
				b.Fatal(err)
			}
			if ev := <-ch; ev.Type != store.EventCreated {
				b.Fatal(ev)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		r := run()
		for i := 0; b.Loop(); i++ {
			k := fmt.Sprintf("/bench/watch/r%d-%d", r, i)
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			wch := cli.Watch(wctx, k, clientv3.WithCreatedNotify())
			resp, err := cli.Get(ctx, k)
			if err != nil || len(resp.Kvs) != 0 {
				b.Fatal(err)
			}
			if wr := <-wch; !wr.Created {
				b.Fatal(wr)
			}
			if _, err := cli.Put(ctx, k, ""); err != nil {
				b.Fatal(err)
			}
			if wr := <-wch; len(wr.Events) != 1 {
				b.Fatal(wr)
			}
			cancel()
		}
	})
}
