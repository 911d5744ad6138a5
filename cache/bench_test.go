package cache_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// The benchmarks measure; they assert nothing of time. Run them with
//
//	go test ./cache/ -run '^$' -bench . -benchtime 3000x
//
// (-benchtime sets the number of changes of the latency benchmarks, made
// at benchRate a second). Each latency benchmark reports the p50 and p99
// of the time from a change (the writer's clock, in the data it writes)
// to its delivery to the receiver, for the cache and, beside it in the
// same run, for a loop on the store's own client: go-zookeeper's one-shot
// watches, set again on each event, one per node; and etcd's Watch on the
// prefix.

// benchRate is the changes a second the latency benchmarks make.
const benchRate = 1000

// fill makes n nodes below p, 100 to a request where the store can.
func fill(b testing.TB, ctx context.Context, st store.Store, p string, n int) {
	b.Helper()
	bc, ok := store.Find[store.BatchCreator](st)
	for i := 0; i < n; {
		k := min(store.MaxBatchNodes, n-i)
		if !ok {
			must[store.Node](b)(st.Create(ctx, fmt.Sprintf("%s/n%05d", p, i), []byte("0"), store.Persistent))
			i++
			continue
		}
		batch := make([]store.BatchNode, k)
		for j := range batch {
			batch[j] = store.BatchNode{Name: fmt.Sprintf("n%05d", i+j), Data: []byte("0")}
		}
		if _, err := bc.CreateBatch(ctx, p, batch, store.Persistent); err != nil {
			b.Fatal(err)
		}
		i += k
	}
}

// stamp is the data a change writes: the writer's clock.
func stamp() []byte { return strconv.AppendInt(nil, time.Now().UnixNano(), 10) }

// since returns the time since the clock in data, and false for data that
// is no stamp.
func since(data []byte) (time.Duration, bool) {
	ns, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil || ns < 1e18 {
		return 0, false
	}
	return time.Since(time.Unix(0, ns)), true
}

// write sets n nodes of the nodes below p to a stamp, at benchRate a
// second, on w (a few calls in flight at once, as a second's changes
// need), then the first node once more, alone, and returns that last
// stamp: a receiver that has it has seen the end. Changes of one node that
// come faster than the receiver takes them merge (the cache's events, the
// one-shot watches), so not every change is delivered.
func write(b *testing.B, ctx context.Context, w store.Store, p string, nodes, n int) string {
	tick := time.NewTicker(time.Second / benchRate)
	defer tick.Stop()
	work := make(chan string, 64)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for path := range work {
				if _, err := w.Set(ctx, path, stamp(), store.AnyVersion); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		<-tick.C
		work <- fmt.Sprintf("%s/n%05d", p, (i*7919)%nodes)
	}
	close(work)
	wg.Wait()
	last := stamp()
	if _, err := w.Set(ctx, p+"/n00000", last, store.AnyVersion); err != nil {
		b.Fatal(err)
	}
	return string(last)
}

// collect gathers the latencies that come on got until the stamp last
// comes, or a while has passed, and returns the metrics to report of them
// under name.
func collect(b *testing.B, name string, got <-chan []byte, last <-chan string) map[string]float64 {
	var (
		ds        []time.Duration
		seen, end int64 // the latest stamp delivered; the last one made
		wait      <-chan time.Time
	)
	for end == 0 || seen < end {
		select {
		case data := <-got:
			if d, ok := since(data); ok {
				ds = append(ds, d)
				n, _ := strconv.ParseInt(string(data), 10, 64)
				seen = max(seen, n)
			}
		case l := <-last:
			end, _ = strconv.ParseInt(l, 10, 64)
			last = nil
			wait = time.After(timeout)
		case <-wait:
			b.Errorf("%s: the last change not delivered %v after it was made", name, timeout)
			return nil
		}
	}
	slices.Sort(ds)
	q := func(f float64) float64 { return float64(ds[int(f*float64(len(ds)-1))].Microseconds()) }
	return map[string]float64{
		name + "-p50-µs":           q(0.50),
		name + "-p99-µs":           q(0.99),
		name + "-delivered/change": float64(len(ds)) / float64(b.N+1),
	}
}

// BenchmarkLatency: time from a change to its delivery, with 1, 100 and
// 10,000 nodes cached, at benchRate changes a second: the cache's events,
// and beside them, of the same changes at the same moment, the store's
// own client's (cache-… and raw-… metrics).
func BenchmarkLatency(b *testing.B) {
	for _, name := range []string{"zk", "etcd"} {
		for _, nodes := range []int{1, 100, 10000} {
			b.Run(fmt.Sprintf("%s/nodes=%d", name, nodes), func(b *testing.B) {
				if !backends.Selected(name) {
					b.Skipf("%s not in CORRAL_STORES", name)
				}
				be := backends.Get(b, name)
				w := open(b, be)
				ctx, p := context.Background(), dir(b)
				fill(b, ctx, w, p, nodes)
				latency(b, be, w, p, nodes)
			})
		}
	}
}

func latency(b *testing.B, be storetest.Backend, w store.Store, p string, nodes int) {
	ctx := context.Background()
	st := open(b, be)
	tr := cache.NewTree(ctx, st, p)
	defer tr.Close()
	for e := range tr.Events() {
		if e.Type == cache.Current {
			break
		}
	}
	cacheGot := make(chan []byte, 1024)
	go func() {
		for e := range tr.Events() {
			cacheGot <- e.Node.Data
		}
	}()
	rawGot, stop := rawWatch(b, be, p, nodes)
	defer stop()
	lasts := [2]chan string{make(chan string, 1), make(chan string, 1)}
	var (
		wg      sync.WaitGroup
		metrics [2]map[string]float64
	)
	wg.Go(func() { metrics[0] = collect(b, "cache", cacheGot, lasts[0]) })
	wg.Go(func() { metrics[1] = collect(b, "raw", rawGot, lasts[1]) })
	b.ResetTimer()
	last := write(b, ctx, w, p, nodes, b.N)
	lasts[0] <- last
	lasts[1] <- last
	wg.Wait()
	b.StopTimer()
	for _, m := range metrics {
		for k, v := range m {
			b.ReportMetric(v, k)
		}
	}
	b.ReportMetric(0, "ns/op")
}

// rawWatch watches the nodes below p with the store's own client, and
// sends the data of each change it sees: go-zookeeper's one-shot watches,
// one per node, set again on each event with the read that sees the
// change; etcd's Watch on the prefix.
func rawWatch(b *testing.B, be storetest.Backend, p string, nodes int) (<-chan []byte, func()) {
	got := make(chan []byte, 1024)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var closeClient func()
	switch be := be.(type) {
	case *zkbackend.Backend:
		conn, _, err := zk.Connect(be.Servers(), 10*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
		if err != nil {
			b.Fatal(err)
		}
		closeClient = conn.Close
		armed := make(chan struct{}, nodes)
		for i := range nodes {
			path := fmt.Sprintf("%s/n%05d", p, i)
			wg.Go(func() {
				_, _, ch, err := conn.GetW(path)
				armed <- struct{}{}
				for err == nil {
					select {
					case <-ch:
					case <-stop:
						return
					}
					var data []byte
					if data, _, ch, err = conn.GetW(path); err == nil {
						select {
						case got <- data:
						case <-stop:
							return
						}
					}
				}
			})
		}
		for range nodes {
			<-armed
		}
	case *etcdbackend.Backend:
		cli := be.Cluster().Client(b)
		wctx, cancel := context.WithCancel(context.Background())
		closeClient = cancel
		wch := cli.Watch(clientv3.WithRequireLeader(wctx), p+"/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		<-wch // created
		wg.Go(func() {
			for wr := range wch {
				for _, ev := range wr.Events {
					select {
					case got <- ev.Kv.Value:
					case <-stop:
						return
					}
				}
			}
		})
	}
	return got, func() {
		close(stop)
		closeClient()
		wg.Wait()
	}
}

// BenchmarkLoad: the first read of a tree of 10,000 nodes, to its first
// snapshot, and the server watches and client heap it holds per node;
// beside the same read with the store's own client.
func BenchmarkLoad(b *testing.B) {
	const nodes = 10000
	for _, name := range backends.Names {
		b.Run(name, func(b *testing.B) {
			if !backends.Selected(name) {
				b.Skipf("%s not in CORRAL_STORES", name)
			}
			be := backends.Get(b, name)
			w := open(b, be)
			ctx, p := context.Background(), dir(b)
			fill(b, ctx, w, p, nodes)
			b.Run("cache", func(b *testing.B) { loadCache(b, be, p, nodes) })
			if name != "mem" {
				b.Run("raw", func(b *testing.B) { loadRaw(b, be, p) })
			}
		})
	}
}

func loadCache(b *testing.B, be storetest.Backend, p string, nodes int) {
	ctx := context.Background()
	st := open(b, be)
	watches0 := serverWatches(b, be, st)
	var heapPerNode, watchesPerNode float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		heap0 := heap()
		b.StartTimer()
		tr := cache.NewTree(ctx, st, p)
		s := <-tr.Snapshots()
		b.StopTimer()
		if s.Len() != nodes+1 {
			b.Fatalf("snapshot of %d nodes; want %d (tree: %v)", s.Len(), nodes+1, tr.Err())
		}
		heapPerNode = float64(heap()-heap0) / float64(nodes)
		watchesPerNode = float64(serverWatches(b, be, st)-watches0) / float64(nodes)
		tr.Close()
		runtime.KeepAlive(s)
		b.StartTimer()
	}
	b.ReportMetric(heapPerNode, "heap-B/node")
	b.ReportMetric(watchesPerNode, "watches/node")
}

// loadRaw reads a tree of 10,000 nodes with the store's own client:
// ZooKeeper's children, then each node's data, 64 reads in flight at once;
// etcd's range of the prefix, in one request.
func loadRaw(b *testing.B, be storetest.Backend, p string) {
	switch be := be.(type) {
	case *zkbackend.Backend:
		conn, _, err := zk.Connect(be.Servers(), 10*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		b.ResetTimer()
		for range b.N {
			names, _, err := conn.Children(p)
			if err != nil {
				b.Fatal(err)
			}
			work := make(chan string)
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for n := range work {
						if _, _, err := conn.Get(p + "/" + n); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for _, n := range names {
				work <- n
			}
			close(work)
			wg.Wait()
		}
	case *etcdbackend.Backend:
		cli := be.Cluster().Client(b)
		b.ResetTimer()
		for range b.N {
			if _, err := cli.Get(context.Background(), p, clientv3.WithRange(p+"0")); err != nil {
				b.Fatal(err)
			}
		}
	}
}
