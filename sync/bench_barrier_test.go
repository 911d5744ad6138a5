package sync_test

import (
	"context"
	"fmt"
	gosync "sync"
	"sync/atomic"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
)

// benchStores runs fn once per selected store.
func benchStores(b *testing.B, fn func(b *testing.B, open func() store.Store)) {
	for _, name := range backends.Names {
		b.Run(name, func(b *testing.B) {
			if !backends.Selected(name) {
				b.Skipf("%s not in CORRAL_STORES", name)
			}
			be := backends.Get(b, name)
			fn(b, func() store.Store {
				st := be.Open(b)
				b.Cleanup(func() { _ = st.Close() })
				return st
			})
		})
	}
}

// BenchmarkDoubleBarrierRelease measures the time from the n-th Enter to
// the return of all n: the release of a round whose n-1 other members are
// waiting. Each participant has a session of its own; the Leaves are not
// timed.
func BenchmarkDoubleBarrierRelease(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			benchStores(b, func(b *testing.B, open func() store.Store) {
				ctx, path := context.Background(), bpath(b)
				obs := open()
				parts := make([]*sync.DoubleBarrier, n)
				for i := range parts {
					parts[i] = sync.NewDoubleBarrier(open(), path, n)
				}
				entered := make(chan error, n)
				left := make(chan error, n)
				for b.Loop() {
					b.StopTimer()
					for _, p := range parts[:n-1] {
						go func() { entered <- p.Enter(ctx) }()
					}
					bwaitKids(b, obs, path, member, func(have int) bool { return have == n-1 })
					b.StartTimer()
					go func() { entered <- parts[n-1].Enter(ctx) }()
					for range n {
						if err := bresult(b, entered, "Enter"); err != nil {
							b.Fatalf("Enter = %v", err)
						}
					}
					b.StopTimer()
					for _, p := range parts {
						go func() { left <- p.Leave(ctx) }()
					}
					for range n {
						if err := bresult(b, left, "Leave"); err != nil {
							b.Fatalf("Leave = %v", err)
						}
					}
					b.StartTimer()
				}
			})
		})
	}
}

// BenchmarkSemaphoreContended measures acquire/release cycles of a
// semaphore of n leases under contention: 8 goroutines on 4 sessions
// acquire and release as fast as they can. ns/op is the time per cycle,
// over all goroutines; cycles/s is the throughput.
func BenchmarkSemaphoreContended(b *testing.B) {
	const goroutines, sessions = 8, 4
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			benchStores(b, func(b *testing.B, open func() store.Store) {
				ctx, path := context.Background(), bpath(b)
				sems := make([]*sync.Semaphore, sessions)
				for i := range sems {
					sems[i] = sync.NewSemaphore(open(), path, n)
				}
				var (
					next atomic.Int64
					wg   gosync.WaitGroup
					fail atomic.Value
				)
				b.ResetTimer()
				for g := range goroutines {
					s := sems[g%sessions]
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							l, err := s.Acquire(ctx)
							if err == nil {
								err = l.Release(ctx)
							}
							if err != nil {
								fail.CompareAndSwap(nil, err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				if err, _ := fail.Load().(error); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
			})
		})
	}
}
