package queue_test

import (
	"context"
	"fmt"
	gosync "sync"
	"sync/atomic"
	"testing"

	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/backends"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// Run the measurements with, for example,
//
//	go test ./queue/ -run '^$' -bench . -benchtime 2000x
//
// Every benchmark runs on each store; zk and etcd skip while their servers
// cannot start. "wasted/op" is the number of take attempts lost to another
// consumer per delivered item.

func benchStores(b *testing.B, fn func(b *testing.B, be storetest.Backend)) {
	for _, name := range backends.Names {
		b.Run(name, func(b *testing.B) {
			if !backends.Selected(name) {
				b.Skipf("%s not in CORRAL_STORES", name)
			}
			fn(b, backends.Get(b, name))
		})
	}
}

var benchSeq atomic.Int64

func benchPath(b *testing.B) string {
	return fmt.Sprintf("/queue-bench/%d-%d", benchSeq.Add(1), b.N)
}

func mustQueue(b *testing.B, s store.Store, path string, d queue.Delivery) *queue.Queue {
	q, err := queue.New(s, path, queue.WithDelivery(d))
	if err != nil {
		b.Fatal(err)
	}
	return q
}

// BenchmarkPut measures one producer putting items back to back.
func BenchmarkPut(b *testing.B) {
	benchStores(b, func(b *testing.B, be storetest.Backend) {
		s := be.Open(b)
		defer s.Close()
		q := mustQueue(b, s, benchPath(b), queue.AtMostOnce)
		ctx := b.Context()
		data := []byte("payload")
		b.ResetTimer()
		for range b.N {
			if err := q.Put(ctx, data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDrain measures consumers, each on its own session, emptying a
// backlog of b.N items (put before the timer starts).
func BenchmarkDrain(b *testing.B) {
	benchStores(b, func(b *testing.B, be storetest.Backend) {
		for _, d := range deliveries {
			for _, n := range []int{1, 4} {
				b.Run(fmt.Sprintf("%v/consumers=%d", d, n), func(b *testing.B) {
					path := benchPath(b)
					fill(b, be, path, b.N)
					runConsumers(b, be, path, d, n, b.N, nil)
				})
			}
		}
	})
}

// BenchmarkStream measures one producer and n consumers running together:
// from the first Put to the last item delivered. Consumers mostly wait on
// an empty queue here, so every Put wakes them all.
func BenchmarkStream(b *testing.B) {
	benchStores(b, func(b *testing.B, be storetest.Backend) {
		for _, d := range deliveries {
			for _, n := range []int{1, 4} {
				b.Run(fmt.Sprintf("%v/consumers=%d", d, n), func(b *testing.B) {
					path := benchPath(b)
					runConsumers(b, be, path, d, n, b.N, func() { fill(b, be, path, b.N) })
				})
			}
		}
	})
}

func fill(b *testing.B, be storetest.Backend, path string, n int) {
	s := be.Open(b)
	defer s.Close()
	q := mustQueue(b, s, path, queue.AtMostOnce)
	for range n {
		if err := q.Put(b.Context(), []byte("payload")); err != nil {
			b.Error(err)
			return
		}
	}
}

// runConsumers times n consumers taking total items, acking each; produce,
// if set, runs beside them inside the timed region.
func runConsumers(b *testing.B, be storetest.Backend, path string, d queue.Delivery, n, total int, produce func()) {
	ctx, stop := context.WithCancel(b.Context())
	defer stop()
	qs := make([]*queue.Queue, n)
	for i := range qs {
		s := be.Open(b)
		defer s.Close()
		qs[i] = mustQueue(b, s, path, d)
	}
	var got atomic.Int64
	all := make(chan struct{})
	var wg gosync.WaitGroup
	b.ResetTimer()
	for _, q := range qs {
		c := q.Consume(ctx)
		wg.Go(func() {
			for it := range c.Items() {
				if err := it.Ack(ctx); err != nil {
					return
				}
				if got.Add(1) == int64(total) {
					close(all)
				}
			}
		})
	}
	if produce != nil {
		wg.Go(produce)
	}
	select {
	case <-all:
	case <-ctx.Done():
	}
	b.StopTimer()
	stop()
	wg.Wait()
	var wasted int64
	for _, q := range qs {
		_, w := q.Stats()
		wasted += w
	}
	b.ReportMetric(float64(wasted)/float64(total), "wasted/op")
}

// BenchmarkEtcdRecipe measures etcd's own experimental/recipes Queue on the
// same etcd, through the same proxied clients, for comparison with
// BenchmarkDrain and BenchmarkStream on etcd.
func BenchmarkEtcdRecipe(b *testing.B) {
	if !backends.Selected("etcd") {
		b.Skip("etcd not in CORRAL_STORES")
	}
	be := backends.Get(b, "etcd")
	for _, stream := range []bool{false, true} {
		for _, n := range []int{1, 4} {
			name := "drain"
			if stream {
				name = "stream"
			}
			b.Run(fmt.Sprintf("%s/consumers=%d", name, n), func(b *testing.B) {
				prefix := benchPath(b)
				enqueue := func(k int, val string) {
					s := be.Open(b)
					defer s.Close()
					q := recipe.NewQueue(s.(*etcdstore.Store).Client(), prefix)
					for range k {
						if err := q.Enqueue(val); err != nil {
							b.Error(err)
							return
						}
					}
				}
				if !stream {
					enqueue(b.N, "payload")
				}
				qs := make([]*recipe.Queue, n)
				for i := range qs {
					s := be.Open(b)
					defer s.Close()
					qs[i] = recipe.NewQueue(s.(*etcdstore.Store).Client(), prefix)
				}
				var got atomic.Int64
				all := make(chan struct{})
				var wg gosync.WaitGroup
				b.ResetTimer()
				// recipe.Queue.Dequeue cannot be cancelled: each consumer
				// stops on a "stop" item, one per consumer, put at the end.
				for _, q := range qs {
					wg.Go(func() {
						for {
							v, err := q.Dequeue()
							if err != nil || v == "stop" {
								return
							}
							if got.Add(1) == int64(b.N) {
								close(all)
							}
						}
					})
				}
				if stream {
					wg.Go(func() { enqueue(b.N, "payload") })
				}
				select {
				case <-all:
				case <-b.Context().Done():
				}
				b.StopTimer()
				enqueue(n, "stop")
				wg.Wait()
			})
		}
	}
}
