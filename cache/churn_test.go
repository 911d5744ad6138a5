package cache_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// serverWatches returns the watches the server holds for the session of
// st: on ZooKeeper its data watches (wchc), on etcd every watcher of the
// server (its metrics), on memstore none.
func serverWatches(t testing.TB, b storetest.Backend, st store.Store) int {
	t.Helper()
	switch b := b.(type) {
	case *zkbackend.Backend:
		ws, err := zkserver.SessionWatches(b.Servers()[0], st.SessionID())
		if err != nil {
			t.Fatal(err)
		}
		return len(ws)
	case *etcdbackend.Backend:
		resp, err := http.Get(b.Cluster().Endpoints()[0] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "etcd_debugging_mvcc_watcher_total "); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return int(n)
			}
		}
		t.Fatalf("no watcher count in etcd's metrics: %v", sc.Err())
	}
	return 0
}

// waitWatches waits a while for the server to hold want watches for st
// (serverWatches), and returns how many it holds. The server's table is
// read through its metrics: there is no event to wait on.
func waitWatches(t testing.TB, b storetest.Backend, st store.Store, want int) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := serverWatches(t, b, st)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// heap returns the bytes of the process's live heap, after a collection.
func heap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Nothing grows with changes: a Tree of 101 nodes through 100,000 changes
// (data set, nodes made and deleted under names never used again) holds
// server watches within a constant of its nodes, and the heap and the
// goroutines of the process stay flat; its receiver ends with the store.
func TestTreeChurn(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const (
			nodes   = 100
			changes = 100_000
			writers = 8
		)
		st := open(t, b)
		ws := backends.Open(t, b, 4)
		ctx, p := ctxFor(t), dir(t)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*timeout)
		defer cancel()
		for i := range nodes {
			must[store.Node](t)(ws[0].Create(ctx, fmt.Sprintf("%s/n%03d", p, i), []byte("0"), store.Persistent))
		}
		var compact func()
		if eb, ok := b.(*etcdbackend.Backend); ok {
			raw := eb.Cluster().Client(t)
			compact = func() {
				resp := must[*clientv3.GetResponse](t)(raw.Get(ctx, "/"))
				if _, err := raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
					t.Fatal(err)
				}
			}
		}
		before := serverWatches(t, b, st)
		tr := cache.NewTree(ctx, st, p)
		defer tr.Close()
		v := newView(t)
		v.until(tr, subtree(t, ctx, ws[0], p, store.MaxPathDepth))

		// The writers run to each checkpoint; there, once the receiver
		// holds the store, the process is looked at.
		var done atomic.Int64
		var heaps, routines, watches []int64
		batches := make([]func(context.Context) (int, error), writers)
		for i := range batches {
			batches[i] = churner(t, b, ws[i%len(ws)], p, nodes)
		}
		for _, upTo := range []int64{changes / 5, changes} {
			errs := make([]<-chan error, writers)
			for i := range errs {
				batch := batches[i]
				errs[i] = backends.Async(func() error {
					for done.Load() < upTo {
						n, err := batch(ctx)
						if err != nil {
							return err
						}
						done.Add(int64(n))
					}
					return nil
				})
			}
			// The receiver takes every event, and now and then a
			// snapshot, meanwhile.
			for _, errc := range errs {
				for waiting := true; waiting; {
					select {
					case err := <-errc:
						if err != nil {
							t.Fatal(err)
						}
						waiting = false
					case e, ok := <-tr.Events():
						if !ok {
							t.Fatalf("tree stopped: %v", tr.Err())
						}
						v.apply(e)
					case <-tr.Snapshots():
					}
				}
			}
			v.until(tr, subtree(t, ctx, ws[0], p, store.MaxPathDepth))
			if compact != nil {
				compact()
			}
			heaps = append(heaps, heap())
			routines = append(routines, int64(runtime.NumGoroutine()))
			watches = append(watches, int64(serverWatches(t, b, st)))
		}
		checkpoints := []int64{changes / 5, changes}
		t.Logf("%d changes: heap %v bytes, goroutines %v, server watches %v (%d before the tree)",
			done.Load(), heaps, routines, watches, before)
		tr.Close()
		if got := waitWatches(t, b, st, before); got != before {
			t.Errorf("server watches after Close = %d; want %d, as before the tree", got, before)
		}
		for i, w := range watches {
			if w > int64(before)+2 {
				t.Errorf("server watches at checkpoint %d = %d; want at most %d (before) + 2", i, w, before)
			}
		}
		// etcd runs in the test's process: its raft log, kept in memory
		// until a snapshot (every 10,000 entries), and the index of the
		// keys it has seen count in the heap too.
		slack := int64(4 << 20)
		if _, ok := b.(*etcdbackend.Backend); ok {
			slack = 16 << 20
		}
		if grown := heaps[1] - heaps[0]; grown > slack {
			t.Errorf("heap grew by %d bytes from %d to %d changes; want it flat (%d bytes of slack)", grown, checkpoints[0], checkpoints[1], slack)
		}
		if grown := routines[1] - routines[0]; grown > 4 {
			t.Errorf("goroutines grew by %d from %d to %d changes; want them flat", grown, checkpoints[0], checkpoints[1])
		}
	})
}

// churner returns a function that makes one batch of changes in the tree
// at p of nodes nodes and returns how many: data set on the nodes, and
// ephemeral sequential nodes made and then deleted (new names each time).
// On ZooKeeper and etcd a batch is two requests of the store's own client
// (a multi, a transaction), so that 100,000 changes take seconds even with
// the race detector on the embedded etcd; on memstore, a few calls.
func churner(t testing.TB, b storetest.Backend, w store.Store, p string, nodes int) func(context.Context) (int, error) {
	t.Helper()
	const sets, made = 96, 16
	node := func() string { return fmt.Sprintf("%s/n%03d", p, rand.IntN(nodes)) }
	data := func() []byte { return []byte(strconv.Itoa(rand.Int())) }
	switch b := b.(type) {
	case *zkbackend.Backend:
		conn, _, err := zk.Connect(b.Servers(), 10*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		return func(context.Context) (int, error) {
			ops := make([]any, 0, sets+made)
			for range sets {
				ops = append(ops, &zk.SetDataRequest{Path: node(), Data: data(), Version: -1})
			}
			for range made {
				ops = append(ops, &zk.CreateRequest{Path: p + "/churn-", Flags: zk.FlagEphemeral | zk.FlagSequence, Acl: zk.WorldACL(zk.PermAll)})
			}
			res, err := conn.Multi(ops...)
			if err != nil {
				return 0, err
			}
			dels := make([]any, 0, made)
			for _, r := range res[sets:] {
				dels = append(dels, &zk.DeleteRequest{Path: r.String, Version: -1})
			}
			if _, err := conn.Multi(dels...); err != nil {
				return 0, err
			}
			return sets + 2*made, nil
		}
	case *etcdbackend.Backend:
		cli := b.Cluster().Client(t)
		var next atomic.Int64
		return func(ctx context.Context) (int, error) {
			ops := make([]clientv3.Op, 0, sets+made)
			// A transaction may not put a key twice.
			for _, i := range rand.Perm(nodes)[:sets] {
				ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s/n%03d", p, i), string(data())))
			}
			keys := make([]string, made)
			for i := range keys {
				keys[i] = fmt.Sprintf("%s/churn-%d-%d", p, rand.Uint32(), next.Add(1))
				ops = append(ops, clientv3.OpPut(keys[i], ""))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				return 0, err
			}
			ops = ops[:0]
			for _, k := range keys {
				ops = append(ops, clientv3.OpDelete(k))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				return 0, err
			}
			return sets + 2*made, nil
		}
	}
	return func(ctx context.Context) (int, error) {
		for range 3 {
			if _, err := w.Set(ctx, node(), data(), store.AnyVersion); err != nil {
				return 0, err
			}
		}
		n, err := w.Create(ctx, p+"/churn-", nil, store.EphemeralSequential)
		if err != nil {
			return 0, err
		}
		return 3 + 2, w.Delete(ctx, n.Path)
	}
}

// quiet is a go-zookeeper logger that logs nothing.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
