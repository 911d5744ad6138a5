package sync_test

import (
	"context"
	"fmt"
	"slices"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/zkstore"
)

// BenchmarkMutexRoundTrips counts the store calls of one uncontended
// Lock+Unlock ("calls/op"), on every store: bare, and with the holder
// asking for its Context (which adds the watch of its own node).
func BenchmarkMutexRoundTrips(b *testing.B) {
	for _, name := range backends.Names {
		b.Run(name, func(b *testing.B) {
			if !backends.Selected(name) {
				b.Skipf("%s not in CORRAL_STORES", name)
			}
			be := backends.Get(b, name)
			for _, withCtx := range []bool{false, true} {
				b.Run(fmt.Sprintf("context=%v", withCtx), func(b *testing.B) {
					cs := countstore.New(be.Open(b))
					defer cs.Close()
					m := sync.NewMutex(cs, fmt.Sprintf("/bench/roundtrips-%s-%v", name, withCtx))
					ctx := b.Context()
					cs.Reset()
					b.ResetTimer()
					for i := range b.N {
						if err := m.Lock(ctx); err != nil {
							b.Fatal(err)
						}
						if withCtx {
							// Asking for the context starts the watch of
							// the own node; let it be sent before the
							// unlock, as for a holder that works a while.
							_ = m.Context()
							watched := func(c countstore.Counts) bool { return c.NodeWatches() > i }
							if err := cs.Wait(ctx, watched); err != nil {
								b.Fatal(err)
							}
						}
						if err := m.Unlock(ctx); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					c := cs.Counts()
					b.ReportMetric(float64(c.Total())/float64(b.N), "calls/op")
					for m, v := range c.Calls {
						b.ReportMetric(float64(v)/float64(b.N), m+"/op")
					}
				})
			}
		})
	}
}

// BenchmarkMutexMemstore puts a memstore Lock+Unlock beside a standard
// sync.Mutex Lock+Unlock: the price of the recipe itself.
func BenchmarkMutexMemstore(b *testing.B) {
	b.Run("corral-memstore", func(b *testing.B) {
		st := memstore.New()
		defer st.Close()
		m := sync.NewMutex(st, "/bench/mem")
		ctx := context.Background()
		for b.Loop() {
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sync.Mutex", func(b *testing.B) {
		var mu gosync.Mutex
		for b.Loop() {
			mu.Lock()
			//lint:ignore SA2001 an empty critical section is what is measured
			mu.Unlock()
		}
	})
}

// locker is one contender of the contended benchmarks.
type benchLocker struct {
	lock, unlock func(context.Context) error
	close        func()
}

// contend runs b.N acquisitions spread over the lockers, each taking the
// lock and releasing it at once, and reports throughput and acquire
// latency.
func contend(b *testing.B, ls []benchLocker) {
	ctx := b.Context()
	var next atomic.Int64
	lat := make([][]time.Duration, len(ls))
	errs := make(chan error, len(ls))
	var wg gosync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, l := range ls {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := l.lock(ctx); err != nil {
					errs <- err
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
				if err := l.unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	for _, l := range ls {
		l.close()
	}
}

var contenders = []int{8, 32}

// reportCounts reports the store calls and wakeups per acquisition.
func reportCounts(b *testing.B, cs []*countstore.Store) {
	calls, wakeups := 0, 0
	for _, c := range cs {
		n := c.Counts()
		calls += n.Total()
		wakeups += n.Wakeups
	}
	b.ReportMetric(float64(calls)/float64(b.N), "calls/acq")
	b.ReportMetric(float64(wakeups)/float64(b.N), "wakeups/acq")
}

// BenchmarkMutexContendedCalls counts the store calls and wakeups per
// contended acquisition on memstore; the recipe makes the same calls on
// every store (with Create+Children for CreateAndList on ZooKeeper).
func BenchmarkMutexContendedCalls(b *testing.B) {
	for _, n := range contenders {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			srv := memstore.NewServer()
			ls := make([]benchLocker, n)
			var cs []*countstore.Store
			for i := range ls {
				st := countstore.New(srv.Open())
				cs = append(cs, st)
				m := sync.NewMutex(st, "/bench/calls")
				ls[i] = benchLocker{m.Lock, m.Unlock, func() { st.Close() }}
			}
			contend(b, ls)
			reportCounts(b, cs)
		})
	}
}

// BenchmarkMutexContendedZK: corral's Mutex on zkstore beside
// go-zookeeper's zk.Lock, on one ZooKeeper server, each contender a session
// of its own.
func BenchmarkMutexContendedZK(b *testing.B) {
	srv := zkserver.ForTest(b, zkserver.Config{})
	addrs := []string{srv.Addr()}
	// The server's JVM compiles its hot paths during the first thousands
	// of requests; without a warm-up the first contender measured loses.
	warmZK(b, addrs, 3*time.Second)
	for _, n := range contenders {
		b.Run(fmt.Sprintf("corral/sessions=%d", n), func(b *testing.B) {
			path := fmt.Sprintf("/bench/zk-corral-%d-%d", n, b.N)
			ls := make([]benchLocker, n)
			for i := range ls {
				zst, err := zkstore.Open(b.Context(), addrs, zkstore.WithLogger(nil))
				if err != nil {
					b.Fatal(err)
				}
				st := zst
				m := sync.NewMutex(st, path)
				ls[i] = benchLocker{m.Lock, m.Unlock, func() { st.Close() }}
			}
			contend(b, ls)
		})
		b.Run(fmt.Sprintf("zk.Lock/sessions=%d", n), func(b *testing.B) {
			path := fmt.Sprintf("/bench/zk-golock-%d-%d", n, b.N)
			ls := make([]benchLocker, n)
			for i := range ls {
				conn, events, err := zk.Connect(addrs, 15*time.Second, zk.WithLogger(quiet{}))
				if err != nil {
					b.Fatal(err)
				}
				waitZK(b, events)
				l := zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))
				ls[i] = benchLocker{
					func(context.Context) error { return l.Lock() },
					func(context.Context) error { return l.Unlock() },
					conn.Close,
				}
			}
			contend(b, ls)
		})
	}
}

// warmZK runs lock cycles from two clients for d.
func warmZK(b *testing.B, addrs []string, d time.Duration) {
	var wg gosync.WaitGroup
	deadline := time.Now().Add(d)
	for i := range 2 {
		conn, events, err := zk.Connect(addrs, 15*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			b.Fatal(err)
		}
		waitZK(b, events)
		l := zk.NewLock(conn, fmt.Sprintf("/bench/warm-%d", i), zk.WorldACL(zk.PermAll))
		wg.Go(func() {
			defer conn.Close()
			for time.Now().Before(deadline) {
				if l.Lock() == nil {
					_ = l.Unlock()
				}
			}
		})
	}
	wg.Wait()
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// waitZK waits until a go-zookeeper connection has a session.
func waitZK(b testing.TB, events <-chan zk.Event) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events { // drained until the conn closes
					}
				}()
				return
			}
		case <-timeout:
			b.Fatal("go-zookeeper: no session")
		}
	}
}

// BenchmarkMutexContendedEtcd: corral's Mutex on etcdstore beside etcd's
// concurrency.Mutex, on one embedded etcd, each contender a client and a
// session of its own.
func BenchmarkMutexContendedEtcd(b *testing.B) {
	cl := etcdserver.Start(b, 1)
	for _, n := range contenders {
		b.Run(fmt.Sprintf("corral/sessions=%d", n), func(b *testing.B) {
			path := fmt.Sprintf("/bench/etcd-corral-%d-%d", n, b.N)
			ls := make([]benchLocker, n)
			for i := range ls {
				est, err := etcdstore.Dial(b.Context(), cl.ClientConfig())
				if err != nil {
					b.Fatal(err)
				}
				st := est
				m := sync.NewMutex(st, path)
				ls[i] = benchLocker{m.Lock, m.Unlock, func() { st.Close() }}
			}
			contend(b, ls)
		})
		b.Run(fmt.Sprintf("concurrency.Mutex/sessions=%d", n), func(b *testing.B) {
			path := fmt.Sprintf("/bench/etcd-concurrency-%d-%d", n, b.N)
			ls := make([]benchLocker, n)
			for i := range ls {
				cli, err := cl.NewClient()
				if err != nil {
					b.Fatal(err)
				}
				sess, err := concurrency.NewSession(cli)
				if err != nil {
					b.Fatal(err)
				}
				m := concurrency.NewMutex(sess, path)
				ls[i] = benchLocker{m.Lock, m.Unlock, func() { sess.Close(); cli.Close() }}
			}
			contend(b, ls)
		})
	}
}
