package etcdstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// Each benchmark times one call through etcdstore and, in the same loop,
// on the raw client:
//
//   - same: the very request etcdstore sends, built by hand, so that the
//     difference is the adapter's own cost (the target: at most 10%);
//   - raw: the cheapest raw request that does the bare job without the
//     contract's guarantees (no parent checks, no children check), so that
//     the difference is the price of those guarantees.
//
// The variants take turns within every iteration, in rotating order, and
// each reports its median latency (store-µs, same-µs, raw-µs) and the
// adapter's overhead over same (overhead-%): on a machine shared with other
// work, medians of interleaved calls are what stays comparable. All use
// one client connected straight to a single member (no proxy).
//
//	go test -run '^$' -bench . ./etcdstore/

// runs numbers benchmark runs, so that repeated runs never reuse a key.
var runs atomic.Int64

func benchSetup(b *testing.B) (*clientv3.Client, *etcdstore.Store) {
	b.Helper()
	c := etcdserver.Start(b, 1)
	cli := c.Client(b, c.Members[0].ListenURL)
	s, err := etcdstore.Open(b.Context(), cli)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	// Warm the server and the connection up first.
	for i := range 500 {
		if _, err := cli.Put(b.Context(), fmt.Sprintf("/bench/warm/%d", i), ""); err != nil {
			b.Fatal(err)
		}
	}
	return cli, s
}

// variant is one way of doing the benchmarked work: prepare (untimed), then
// do (timed) for iteration i of run r.
type variant struct {
	unit    string
	prepare func(r int64, i int)
	do      func(r int64, i int)
}

// compare runs the variants in turns and reports their medians.
func compare(b *testing.B, vs ...variant) {
	b.Helper()
	r := runs.Add(1)
	times := make([][]time.Duration, len(vs))
	for i := 0; b.Loop(); i++ {
		for k := range vs {
			v := vs[(i+k)%len(vs)]
			if v.prepare != nil {
				v.prepare(r, i)
			}
			start := time.Now()
			v.do(r, i)
			times[(i+k)%len(vs)] = append(times[(i+k)%len(vs)], time.Since(start))
		}
	}
	medians := make([]float64, len(vs))
	for k, v := range vs {
		slices.Sort(times[k])
		medians[k] = float64(times[k][len(times[k])/2].Nanoseconds()) / 1e3
		b.ReportMetric(medians[k], v.unit)
	}
	b.ReportMetric(100*(medians[0]-medians[1])/medians[1], "overhead-%")
}

func check(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// rawCreate sends by hand the transaction etcdstore sends for a create in
// an existing parent.
func rawCreate(b *testing.B, cli *clientv3.Client, s *etcdstore.Store, k, parent string, lease clientv3.LeaseID) {
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(lease))
	}
	fence := etcdstore.FenceKey(s)
	resp, err := cli.Txn(b.Context()).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0),
			clientv3.Compare(clientv3.ModRevision(fence), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(parent), ">", 0),
			clientv3.Compare(clientv3.LeaseValue(parent), "=", 0)).
		Then(clientv3.OpPut(k, "", opts...)).
		Else(clientv3.OpGet(k), clientv3.OpGet(fence, clientv3.WithKeysOnly()), clientv3.OpGet(parent, clientv3.WithKeysOnly())).
		Commit()
	if err != nil || !resp.Succeeded {
		b.Fatal(err)
	}
}

// rawPutIfAbsent is the bare create: what concurrency.Mutex sends.
func rawPutIfAbsent(b *testing.B, cli *clientv3.Client, k string, lease clientv3.LeaseID) {
	resp, err := cli.Txn(b.Context()).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, "", clientv3.WithLease(lease))).
		Commit()
	if err != nil || !resp.Succeeded {
		b.Fatal(err)
	}
}

// BenchmarkCreate creates persistent nodes in an existing directory.
func BenchmarkCreate(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	_, err := s.Create(ctx, "/bench/create", nil, store.Persistent)
	check(b, err)
	compare(b,
		variant{unit: "store-µs", do: func(r int64, i int) {
			_, err := s.Create(ctx, fmt.Sprintf("/bench/create/s%d-%d", r, i), nil, store.Persistent)
			check(b, err)
		}},
		variant{unit: "same-µs", do: func(r int64, i int) {
			rawCreate(b, cli, s, fmt.Sprintf("/bench/create/r%d-%d", r, i), "/bench/create", 0)
		}},
		variant{unit: "raw-µs", do: func(r int64, i int) {
			rawPutIfAbsent(b, cli, fmt.Sprintf("/bench/create/m%d-%d", r, i), 0)
		}},
	)
}

// BenchmarkCreateSequential creates ephemeral sequential nodes, the
// contenders of every recipe.
func BenchmarkCreateSequential(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	_, err := s.Create(ctx, "/bench/seq", nil, store.Persistent)
	check(b, err)
	compare(b,
		variant{unit: "store-µs", do: func(r int64, i int) {
			_, err := s.Create(ctx, "/bench/seq/c-", nil, store.EphemeralSequential)
			check(b, err)
		}},
		variant{unit: "same-µs", do: func(r int64, i int) {
			rawCreate(b, cli, s, fmt.Sprintf("/bench/seq/r%d-%016x", r, i), "/bench/seq", s.Lease())
		}},
		variant{unit: "raw-µs", do: func(r int64, i int) {
			rawPutIfAbsent(b, cli, fmt.Sprintf("/bench/seq/m%d-%016x", r, i), s.Lease())
		}},
	)
}

// BenchmarkLockCycle is the uncontended lock cycle of a Mutex on etcd:
// create a contender and list its siblings in one transaction, then delete
// it. raw is what concurrency.Mutex sends for the same cycle (it reads only
// the first contender, and deletes blindly).
func BenchmarkLockCycle(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	_, err := s.Create(ctx, "/bench/lock", nil, store.Persistent)
	check(b, err)
	compare(b,
		variant{unit: "store-µs", do: func(r int64, i int) {
			n, _, err := s.CreateAndList(ctx, "/bench/lock/c-", nil, store.EphemeralSequential)
			check(b, err)
			check(b, s.Delete(ctx, n.Path))
		}},
		variant{unit: "same-µs", do: func(r int64, i int) {
			k := fmt.Sprintf("/bench/lock/r%d-%016x", r, i)
			resp, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0),
					clientv3.Compare(clientv3.ModRevision(etcdstore.FenceKey(s)), "=", 0),
					clientv3.Compare(clientv3.CreateRevision("/bench/lock"), ">", 0),
					clientv3.Compare(clientv3.LeaseValue("/bench/lock"), "=", 0)).
				Then(clientv3.OpPut(k, "", clientv3.WithLease(s.Lease())),
					clientv3.OpGet("/bench/lock", clientv3.WithRange("/bench/lock0"), clientv3.WithKeysOnly())).
				Else(clientv3.OpGet(k), clientv3.OpGet(etcdstore.FenceKey(s), clientv3.WithKeysOnly()),
					clientv3.OpGet("/bench/lock", clientv3.WithKeysOnly()),
					clientv3.OpGet("/bench/lock", clientv3.WithRange("/bench/lock0"), clientv3.WithKeysOnly())).
				Commit()
			if err != nil || !resp.Succeeded {
				b.Fatal(err)
			}
			resp, err = cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(k+"/"), "=", 0).WithPrefix()).
				Then(clientv3.OpDelete(k)).
				Else(clientv3.OpGet(k, clientv3.WithCountOnly())).
				Commit()
			if err != nil || !resp.Succeeded {
				b.Fatal(err)
			}
		}},
		variant{unit: "raw-µs", do: func(r int64, i int) {
			k := fmt.Sprintf("/bench/lock/m%d-%016x", r, i)
			resp, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, "", clientv3.WithLease(s.Lease())),
					clientv3.OpGet("/bench/lock/", clientv3.WithFirstCreate()...)).
				Commit()
			if err != nil || !resp.Succeeded {
				b.Fatal(err)
			}
			_, err = cli.Delete(ctx, k)
			check(b, err)
		}},
	)
}

// BenchmarkChildren lists a directory of 100 children.
func BenchmarkChildren(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	for i := range 100 {
		_, err := s.Create(ctx, fmt.Sprintf("/bench/kids/k%03d", i), nil, store.Persistent)
		check(b, err)
	}
	compare(b,
		variant{unit: "store-µs", do: func(int64, int) {
			kids, err := s.Children(ctx, "/bench/kids")
			if err != nil || len(kids) != 100 {
				b.Fatal(len(kids), err)
			}
		}},
		variant{unit: "same-µs", do: func(int64, int) {
			resp, err := cli.Get(ctx, "/bench/kids", clientv3.WithRange("/bench/kids0"), clientv3.WithKeysOnly())
			if err != nil || len(resp.Kvs) != 101 {
				b.Fatal(err)
			}
		}},
		variant{unit: "raw-µs", do: func(int64, int) {
			resp, err := cli.Get(ctx, "/bench/kids/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil || len(resp.Kvs) != 100 {
				b.Fatal(err)
			}
		}},
	)
}

// BenchmarkDelete deletes a node made just before (untimed).
func BenchmarkDelete(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	put := func(k string) {
		_, err := cli.Put(ctx, k, "")
		check(b, err)
	}
	key := func(v string, r int64, i int) string { return fmt.Sprintf("/bench/del/%s%d-%d", v, r, i) }
	compare(b,
		variant{unit: "store-µs",
			prepare: func(r int64, i int) { put(key("s", r, i)) },
			do:      func(r int64, i int) { check(b, s.Delete(ctx, key("s", r, i))) },
		},
		variant{unit: "same-µs",
			prepare: func(r int64, i int) { put(key("r", r, i)) },
			do: func(r int64, i int) {
				k := key("r", r, i)
				resp, err := cli.Txn(ctx).
					If(clientv3.Compare(clientv3.CreateRevision(k+"/"), "=", 0).WithPrefix()).
					Then(clientv3.OpDelete(k)).
					Else(clientv3.OpGet(k, clientv3.WithCountOnly())).
					Commit()
				if err != nil || !resp.Succeeded {
					b.Fatal(err)
				}
			},
		},
		variant{unit: "raw-µs",
			prepare: func(r int64, i int) { put(key("m", r, i)) },
			do: func(r int64, i int) {
				resp, err := cli.Delete(ctx, key("m", r, i))
				if err != nil || resp.Deleted != 1 {
					b.Fatal(err)
				}
			},
		},
	)
}

// BenchmarkExistsWatch sets an exists-watch on a missing key, creates the
// key and waits for the event: the wait of every recipe. same runs the same
// protocol on the client (watch at the current revision with
// created-notify, read beside it, put, receive) on the stream that the
// Store's standing watch keeps open. raw waits for the created notification
// before it reads, as a plain client would.
func BenchmarkExistsWatch(b *testing.B) {
	cli, s := benchSetup(b)
	ctx := b.Context()
	rawWatch := func(k string, overlap bool) {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		defer cancel()
		wch := cli.Watch(wctx, k, clientv3.WithCreatedNotify())
		if !overlap {
			if wr := <-wch; !wr.Created {
				b.Fatal(wr)
			}
		}
		resp, err := cli.Get(ctx, k)
		if err != nil || len(resp.Kvs) != 0 {
			b.Fatal(err)
		}
		if overlap {
			if wr := <-wch; !wr.Created {
				b.Fatal(wr)
			}
		}
		_, err = cli.Put(ctx, k, "")
		check(b, err)
		if wr := <-wch; len(wr.Events) != 1 {
			b.Fatal(wr)
		}
	}
	compare(b,
		variant{unit: "store-µs", do: func(r int64, i int) {
			k := fmt.Sprintf("/bench/watch/s%d-%d", r, i)
			exists, _, ch, err := s.ExistsW(ctx, k)
			if err != nil || exists {
				b.Fatal(exists, err)
			}
			_, err = cli.Put(ctx, k, "")
			check(b, err)
			if ev := <-ch; ev.Type != store.EventCreated {
				b.Fatal(ev)
			}
		}},
		variant{unit: "same-µs", do: func(r int64, i int) {
			rawWatch(fmt.Sprintf("/bench/watch/r%d-%d", r, i), true)
		}},
		variant{unit: "raw-µs", do: func(r int64, i int) {
			rawWatch(fmt.Sprintf("/bench/watch/m%d-%d", r, i), false)
		}},
	)
}

// BenchmarkHandoff measures a lock handoff as the recipes make it: 8
// sessions queue ephemeral sequential contenders, each but the first waits
// for its predecessor's deletion, and each deletes its own node as soon as
// its wait ends. It reports the median, 99th percentile and maximum of the
// time from a Delete being sent to the successor's wake-up.
//
// etcdstore waits with ExistsW (a watch opened at the current revision).
// read-rev waits as concurrency.Mutex's waitDelete does, with a raw watch
// from the revision of its read: a start revision not above the store's
// current one puts the watch in etcd's unsynced watcher group, caught up
// every 100 ms (see docs/architecture.md, "Rules learned from faults"). A
// watch from the read's revision + 1 is synced only while nothing was
// written since the read, which on a busy lock is rarely so.
func BenchmarkHandoff(b *testing.B) {
	b.Run("etcdstore", func(b *testing.B) {
		benchHandoff(b, func(s *etcdstore.Store, _ *clientv3.Client, p string) <-chan error {
			exists, _, ch, err := s.ExistsW(b.Context(), p)
			if err != nil || !exists {
				b.Fatal(exists, err)
			}
			done := make(chan error, 1)
			go func() {
				ev := <-ch
				if ev.Type != store.EventDeleted {
					done <- fmt.Errorf("event %+v", ev)
				}
				close(done)
			}()
			return done
		})
	})
	b.Run("read-rev", func(b *testing.B) {
		benchHandoff(b, func(_ *etcdstore.Store, cli *clientv3.Client, p string) <-chan error {
			ctx := b.Context()
			resp, err := cli.Get(ctx, p)
			if err != nil || len(resp.Kvs) != 1 {
				b.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			wch := cli.Watch(wctx, p, clientv3.WithRev(resp.Header.Revision), clientv3.WithFilterPut())
			done := make(chan error, 1)
			go func() {
				defer cancel()
				for wr := range wch {
					for _, ev := range wr.Events {
						if ev.Type == clientv3.EventTypeDelete {
							close(done)
							return
						}
					}
				}
				done <- fmt.Errorf("watch closed")
			}()
			return done
		})
	})
}

func benchHandoff(b *testing.B, wait func(s *etcdstore.Store, cli *clientv3.Client, p string) <-chan error) {
	const sessions = 8
	cli, _ := benchSetup(b)
	ctx := b.Context()
	var ss []*etcdstore.Store
	for range sessions {
		s, err := etcdstore.Open(ctx, cli)
		check(b, err)
		b.Cleanup(func() { s.Close() })
		ss = append(ss, s)
	}
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		dir := fmt.Sprintf("/bench/handoff/%d-%d", runs.Add(1), i)
		nodes := make([]store.Node, sessions)
		for k, s := range ss {
			n, err := s.Create(ctx, dir+"/lock-", nil, store.EphemeralSequential)
			check(b, err)
			nodes[k] = n
		}
		var waits []<-chan error
		for k := 1; k < sessions; k++ {
			waits = append(waits, wait(ss[k], cli, nodes[k-1].Path))
		}
		sent := make([]time.Time, sessions)
		errs := make(chan error, 1)
		sent[0] = time.Now()
		go func() {
			defer close(errs)
			for k := 1; k < sessions; k++ {
				if err := <-waits[k-1]; err != nil {
					errs <- err
					return
				}
				now := time.Now()
				lat = append(lat, now.Sub(sent[k-1]))
				sent[k] = now
				if err := ss[k].Delete(ctx, nodes[k].Path); err != nil {
					errs <- err
					return
				}
			}
		}()
		check(b, ss[0].Delete(ctx, nodes[0].Path))
		for err := range errs {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}
