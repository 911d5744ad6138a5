package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// The queue's measurements run by command, never in the default test run:
//
//	CORRAL_STORES=zk,etcd go test ./queue/ -run '^$' -bench 'Backlog|History' -benchtime 1x -timeout 120m
//
// BenchmarkBacklog drains a backlog put beforehand, on ZooKeeper and etcd,
// with corral (at-most-once and at-least-once) and, side by side in the
// same run, a reference: on ZooKeeper a loop doing per item what Curator's
// DistributedQueue does (list the queue, read the first item, delete it),
// on etcd etcd's own experimental/recipes Queue. Each line reports the
// drain's rate, the cost per item in its first and last tenth (and their
// ratio), and the bytes the consumers' sessions received per item (all
// their traffic, pings and lease renewals included). A reference on a
// backlog of 50,000 drains only its first 1,000 items (the whole drain
// would take hours): its "last" tenth is then that first thousand's last
// tenth. A corral consumer's session lists the queue once, when it first
// uses it; that listing is timed apart ("setup-ms", per consumer, a Len
// before the drain), so that the tenths show what a take costs. A new
// session's first listing is the cost a queue's history still has on etcd
// (BenchmarkHistory's second drain includes it). BenchmarkHistory puts 20,000 items into one etcd queue and drains
// them, twice, without compaction, and reports the cost per item of every
// tenth of both drains.
//
// BenchmarkPut and BenchmarkStream run on every store with b.N items:
//
//	go test ./queue/ -run '^$' -bench 'Put|Stream' -benchtime 2000x

func benchStores(b *testing.B, names []string, fn func(b *testing.B, name string, be storetest.Backend)) {
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			if !backends.Selected(name) {
				b.Skipf("%s not in CORRAL_STORES", name)
			}
			fn(b, name, backends.Get(b, name))
		})
	}
}

var benchSeq atomic.Int64

func benchPath(b *testing.B) string {
	return fmt.Sprintf("/queue-bench/%d-%d-%d", os.Getpid(), benchSeq.Add(1), b.N)
}

func mustQueue(b testing.TB, s store.Store, path string, opts ...queue.Option) *queue.Queue {
	return queue.New(s, path, opts...)
}

// BenchmarkPut measures one producer putting items back to back.
func BenchmarkPut(b *testing.B) {
	benchStores(b, backends.Names, func(b *testing.B, _ string, be storetest.Backend) {
		s := be.Open(b)
		defer s.Close()
		q := mustQueue(b, s, benchPath(b))
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

// BenchmarkStream measures one producer and n consumers running together:
// from the first Put to the last item delivered. Consumers mostly wait on
// an empty queue here, so every Put wakes them all.
func BenchmarkStream(b *testing.B) {
	benchStores(b, backends.Names, func(b *testing.B, _ string, be storetest.Backend) {
		for _, d := range deliveries {
			for _, n := range []int{1, 4} {
				b.Run(fmt.Sprintf("%v/consumers=%d", d, n), func(b *testing.B) {
					path := benchPath(b)
					var qs []*queue.Queue
					consumers := make([]func(ctx context.Context, done func()) error, n)
					for i := range consumers {
						s := be.Open(b)
						defer s.Close()
						q := mustQueue(b, s, path, queue.WithDelivery(d))
						qs = append(qs, q)
						consumers[i] = corralConsumer(q)
					}
					b.ResetTimer()
					start := time.Now()
					res := drain(b, b.N, start, consumers, func() { fill(b, be, path, b.N, false) }, nil)
					b.StopTimer()
					var wasted int64
					for _, q := range qs {
						_, w := q.Stats()
						wasted += w
					}
					b.ReportMetric(float64(wasted)/float64(b.N), "wasted/op")
					_ = res
				})
			}
		}
	})
}

// fill puts n small items into the queue at path from 4 producer sessions.
// With raw set, it creates them as plain sequential nodes (the reference
// loop's layout) instead of through a Queue.
func fill(b testing.TB, be storetest.Backend, path string, n int, raw bool) {
	const producers = 4
	var wg gosync.WaitGroup
	for p := range producers {
		s := be.Open(b)
		defer s.Close()
		q := mustQueue(b, s, path)
		wg.Go(func() {
			for i := p; i < n; i += producers {
				var err error
				if raw {
					_, err = s.Create(b.Context(), path+"/queue-", []byte("payload"), store.Sequential)
				} else {
					err = q.Put(b.Context(), []byte("payload"))
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// drainResult is what one drain measured.
type drainResult struct {
	items  int
	took   time.Duration
	tenths [10]time.Duration // cost per item of each tenth of the items
}

// drain runs the consumers until n items were consumed, each calling done
// once per item, and returns the completion times. produce, if set, runs
// beside them. The consumers must return when their ctx ends, or once
// after is called (when set) after the n-th item.
func drain(b testing.TB, n int, start time.Time, consumers []func(ctx context.Context, done func()) error, produce, after func()) drainResult {
	ctx, stop := context.WithCancel(b.Context())
	defer stop()
	at := make([]time.Duration, n)
	var count atomic.Int64
	all := make(chan struct{})
	done := func() {
		k := count.Add(1)
		if k <= int64(n) {
			at[k-1] = time.Since(start)
		}
		if k == int64(n) {
			close(all)
		}
	}
	var wg gosync.WaitGroup
	errs := make(chan error, len(consumers))
	for _, c := range consumers {
		wg.Go(func() {
			if err := c(ctx, done); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	if produce != nil {
		wg.Go(produce)
	}
	select {
	case <-all:
	case err := <-errs:
		b.Fatal(err)
	case <-ctx.Done():
	}
	stop()
	if after != nil {
		after()
	}
	wg.Wait()
	var r drainResult
	r.items, r.took = n, at[n-1]
	for i := range 10 {
		lo, hi := i*n/10, (i+1)*n/10
		var from time.Duration
		if lo > 0 {
			from = at[lo-1]
		}
		if hi > lo {
			r.tenths[i] = (at[hi-1] - from) / time.Duration(hi-lo)
		}
	}
	return r
}

// corralConsumer consumes q through a Consumer, acking every item.
func corralConsumer(q *queue.Queue) func(ctx context.Context, done func()) error {
	return func(ctx context.Context, done func()) error {
		c := q.Consume(ctx)
		defer c.Close()
		for it := range c.Items() {
			if err := it.Ack(ctx); err != nil {
				return err
			}
			done()
		}
		if errors.Is(c.Err(), context.Canceled) {
			return nil
		}
		return c.Err()
	}
}

// curatorConsumer is the reference loop on ZooKeeper: per item, what
// Curator's DistributedQueue does: list the queue, read the first item,
// delete it (moving on to the next one when someone else took it first).
func curatorConsumer(s store.Store, path string) func(ctx context.Context, done func()) error {
	return func(ctx context.Context, done func()) error {
		for ctx.Err() == nil {
			kids, err := s.Children(ctx, path)
			if err != nil && !errors.Is(err, store.ErrNoNode) {
				return err
			}
			names := make([]string, len(kids))
			for i, k := range kids {
				names[i] = k.Name
			}
			slices.Sort(names)
			for _, name := range names {
				p := path + "/" + name
				if _, err := s.Get(ctx, p); errors.Is(err, store.ErrNoNode) {
					continue
				} else if err != nil {
					return err
				}
				if err := s.Delete(ctx, p); errors.Is(err, store.ErrNoNode) {
					continue
				} else if err != nil {
					return err
				}
				done()
				break
			}
		}
		return nil
	}
}

// recipeConsumer is etcd's experimental/recipes Queue, whose Dequeue cannot
// be cancelled: the consumer stops on the "stop" item put for it.
func recipeConsumer(q *recipe.Queue) func(ctx context.Context, done func()) error {
	return func(ctx context.Context, done func()) error {
		for {
			v, err := q.Dequeue()
			if err != nil {
				return err
			}
			if v == "stop" {
				return nil
			}
			done()
		}
	}
}

// benchBacklogs are the backlogs BenchmarkBacklog drains.
var benchBacklogs = []int{10_000, 50_000}

// refItems is how many items of a backlog a reference drains: all of
// 10,000, the first 1,000 of more.
func refItems(backlog int) int {
	if backlog <= 10_000 {
		return backlog
	}
	return 1_000
}

// BenchmarkBacklog: see the comment at the top of this file.
func BenchmarkBacklog(b *testing.B) {
	benchStores(b, []string{"zk", "etcd"}, func(b *testing.B, name string, be storetest.Backend) {
		m, metered := be.(backends.Meter)
		for _, backlog := range benchBacklogs {
			for _, n := range []int{1, 4} {
				b.Run(fmt.Sprintf("backlog=%d/consumers=%d", backlog, n), func(b *testing.B) {
					var rates = map[string]float64{}
					for _, impl := range []string{"reference", "corral", "corral-alo"} {
						b.Run(impl, func(b *testing.B) {
							for range b.N {
								r, bytes := backlogRun(b, name, be, impl, backlog, n, m, metered)
								rates[impl] = float64(r.items) / r.took.Seconds()
								report(b, r, bytes)
								b.Logf("µs/item per tenth of %d items: %s", r.items, tenths(r))
							}
						})
					}
					if ref := rates["reference"]; ref > 0 {
						b.Logf("%s backlog=%d consumers=%d: corral %.1fx, corral-alo %.1fx the reference",
							name, backlog, n, rates["corral"]/ref, rates["corral-alo"]/ref)
					}
				})
			}
		}
	})
}

// tenths formats the cost per item of every tenth of r.
func tenths(r drainResult) string {
	var line []string
	for _, d := range r.tenths {
		line = append(line, strconv.FormatInt(d.Microseconds(), 10))
	}
	return strings.Join(line, " ")
}

func report(b *testing.B, r drainResult, bytes int64) {
	b.ReportMetric(float64(r.items)/r.took.Seconds(), "items/s")
	b.ReportMetric(float64(r.tenths[0].Microseconds()), "first-µs/item")
	b.ReportMetric(float64(r.tenths[9].Microseconds()), "last-µs/item")
	b.ReportMetric(float64(r.tenths[9])/float64(r.tenths[0]), "last/first")
	if bytes >= 0 {
		b.ReportMetric(float64(bytes)/float64(r.items), "B/item")
	}
	b.ReportMetric(0, "ns/op")
}

// backlogRun fills a queue with backlog items and drains it with n
// consumers of impl; it returns the drain and the bytes the consumers'
// sessions received (-1 when the backend does not count them).
func backlogRun(b *testing.B, name string, be storetest.Backend, impl string, backlog, n int, m backends.Meter, metered bool) (drainResult, int64) {
	b.StopTimer()
	path := benchPath(b)
	items := backlog
	var sessions []store.Store
	consumers := make([]func(ctx context.Context, done func()) error, n)
	var rqs []*recipe.Queue
	var qs []*queue.Queue
	if impl == "reference" {
		items = refItems(backlog)
	}
	switch {
	case impl == "reference" && name == "etcd":
		fillRecipe(b, be, path, backlog)
	case impl == "reference":
		fill(b, be, path, backlog, true)
	default:
		fill(b, be, path, backlog, false)
	}
	for i := range consumers {
		s := be.Open(b)
		defer s.Close()
		sessions = append(sessions, s)
		switch impl {
		case "reference":
			if name == "etcd" {
				q := recipe.NewQueue(s.(*etcdstore.Store).Client(), path)
				rqs = append(rqs, q)
				consumers[i] = recipeConsumer(q)
			} else {
				consumers[i] = curatorConsumer(s, path)
			}
		case "corral", "corral-alo":
			d := queue.AtMostOnce
			if impl == "corral-alo" {
				d = queue.AtLeastOnce
			}
			q := mustQueue(b, s, path, queue.WithDelivery(d))
			qs = append(qs, q)
			consumers[i] = corralConsumer(q)
		}
	}
	traffic := func() int64 {
		if !metered {
			return -1
		}
		var sum int64
		for _, s := range sessions {
			_, down := m.Traffic(b, s)
			sum += down
		}
		return sum
	}
	var after func()
	if len(rqs) > 0 {
		// recipe.Queue cannot be cancelled: what is left goes, and one
		// "stop" per consumer follows.
		after = func() {
			s := be.Open(b)
			defer s.Close()
			wipe(b, s, path)
			q := recipe.NewQueue(s.(*etcdstore.Store).Client(), path)
			for range rqs {
				if err := q.Enqueue("stop"); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	// A session lists a queue once, when it first takes from it: that is
	// timed apart, so that the tenths show the cost of a take.
	setup := time.Now()
	for _, q := range qs {
		if _, err := q.Len(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	if len(qs) > 0 {
		b.ReportMetric(float64(time.Since(setup).Milliseconds())/float64(len(qs)), "setup-ms")
	}
	before := traffic()
	runtime.GC() // the fill's garbage is not the drain's (the etcd server is in this process)
	b.StartTimer()
	r := drain(b, items, time.Now(), consumers, nil, after)
	b.StopTimer()
	bytes := traffic()
	if bytes >= 0 {
		bytes -= before
	}
	return r, bytes
}

// fillRecipe enqueues n items into etcd's recipe queue at path.
func fillRecipe(b testing.TB, be storetest.Backend, path string, n int) {
	const producers = 4
	var wg gosync.WaitGroup
	for p := range producers {
		s := be.Open(b)
		defer s.Close()
		q := recipe.NewQueue(s.(*etcdstore.Store).Client(), path)
		wg.Go(func() {
			for i := p; i < n; i += producers {
				if err := q.Enqueue("payload"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// wipe deletes what is left of an etcd reference queue at path.
func wipe(b testing.TB, s store.Store, path string) {
	cli := s.(*etcdstore.Store).Client()
	if _, err := cli.Delete(b.Context(), path+"/", clientv3.WithPrefix()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHistory: see the comment at the top of this file.
func BenchmarkHistory(b *testing.B) {
	benchStores(b, []string{"etcd"}, func(b *testing.B, _ string, be storetest.Backend) {
		const items, rounds = 20_000, 2
		for range b.N {
			path := benchPath(b)
			var all []time.Duration
			for round := range rounds {
				b.StopTimer()
				fill(b, be, path, items, false)
				s := be.Open(b)
				q := mustQueue(b, s, path)
				runtime.GC()
				b.StartTimer()
				r := drain(b, items, time.Now(), []func(ctx context.Context, done func()) error{corralConsumer(q)}, nil, nil)
				b.StopTimer()
				s.Close()
				all = append(all, r.tenths[:]...)
				b.Logf("drain %d of %d items: µs/item per tenth: %s (%.0f items/s)", round+1, items, tenths(r), float64(items)/r.took.Seconds())
			}
			b.ReportMetric(float64(all[0].Microseconds()), "first-µs/item")
			b.ReportMetric(float64(all[len(all)-1].Microseconds()), "last-µs/item")
			b.ReportMetric(float64(all[len(all)-1])/float64(all[0]), "last/first")
			b.ReportMetric(float64(slices.Max(all))/float64(all[0]), "max/first")
			b.ReportMetric(0, "ns/op")
		}
	})
}
