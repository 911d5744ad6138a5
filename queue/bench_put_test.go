package queue_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/zkstore"
)

// BenchmarkPutPeers puts corral's Put beside the peer's put, with 1 and 8
// producer goroutines on one session, in the same run on the same server:
//
//   - ZooKeeper: per item what Curator's DistributedQueue put does (one
//     create of a persistent sequential node under the queue path,
//     nothing else), with go-zookeeper on a connection of its own, on a
//     server started for the benchmark; corral's session is opened on it
//     directly too (no test proxy). That is Curator's put in the
//     foreground; BenchmarkCurator runs Curator itself, whose default puts
//     in the background.
//   - etcd: etcd's own experimental/recipes Queue.Enqueue, on the client
//     of corral's session.
//
// and corral's PutBatch beside them (batches of CORRAL_PUT_BATCH items,
// default 100, each producer putting whole batches), with the store's own
// batch as its floor (floor-batch: a ZooKeeper multi of the creates, an etcd
// transaction of the puts, with the bare client), and on etcd with the
// floor of one Put (floor-put: corral's transaction of one item with the
// bare client, the parent's check included; see floorPut). Every variant
// runs CORRAL_PUT_MS (default 1000) per round, and with CORRAL_PUT_INFLIGHT
// (a list, such as "4,8") corral's Put again on a Queue with that many
// requests in flight at most (WithPutsInFlight) instead of the default,
// for CORRAL_PUT_ROUNDS rounds
// (default 6) in turns (peer, corral, batch, then the other way round).
// It reports, per variant, puts/s over all rounds, the median over the
// rounds of its ratio to the peer's rate in the same round (robust to a
// machine whose load changes; the log line lists every round's), requests per put (corral's, counted by countstore:
// every call to the store; the peer's is one by construction),
// allocations and CPU time per put in this process (on etcd the embedded
// server's included) and, on ZooKeeper, the server's CPU time per put.
//
//	CORRAL_STORES=zk,etcd go test ./queue/ -run '^$' -bench PutPeers -benchtime 1x
func BenchmarkPutPeers(b *testing.B) {
	benchStores(b, []string{"zk", "etcd"}, func(b *testing.B, name string, be storetest.Backend) {
		env := &putEnv{name: name, be: be}
		if name == "zk" {
			// A server of its own, to read its CPU time.
			zkserver.Require(b)
			srv, err := zkserver.Start(zkserver.Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { srv.Close() })
			env.servers, env.srvPid = []string{srv.Addr()}, srv.Pid()
		}
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("producers=%d", n), func(b *testing.B) {
				for b.Loop() {
					comparePuts(b, env, n)
				}
			})
		}
	})
}

// putEnv is the store a comparison runs on.
type putEnv struct {
	name    string
	be      storetest.Backend // etcd's
	servers []string          // ZooKeeper's
	srvPid  int               // ZooKeeper's server process
}

// putVariant is one way to put items: put adds them (one item, or a
// batch) and reports how many it added.
type putVariant struct {
	name string
	put  func(ctx context.Context) (int, error)
	// flush, when set, waits for what put started and left in flight
	// (PutAsync's): a run's time includes it.
	flush func(ctx context.Context) error
	items int64
	took  time.Duration
	// cpu is this process's CPU time (on etcd the embedded server's
	// included), srvCPU ZooKeeper's server's.
	cpu, srvCPU time.Duration
	alloc       uint64
}

func comparePuts(b *testing.B, env *putEnv, producers int) {
	ctx := b.Context()
	data := []byte("payload")
	path := benchPath(b)
	batchN := envInt("CORRAL_PUT_BATCH", 100)
	st := env.open(b)
	q := mustQueue(b, st, path+"/corral")
	batch := make([][]byte, batchN)
	for i := range batch {
		batch[i] = data
	}
	variants := []*putVariant{
		{name: "peer", put: env.peerPut(b, st, path+"/peer", data)},
		{name: "corral", put: func(ctx context.Context) (int, error) { return 1, q.Put(ctx, data) }},
		{name: "corral-batch", put: func(ctx context.Context) (int, error) { return batchN, q.PutBatch(ctx, batch) }},
		{name: "floor-batch", put: env.floorBatch(b, st, path+"/floor", data, batchN)},
	}
	if env.name == "etcd" {
		variants = append(variants, &putVariant{name: "floor-put", put: floorPut(b, st, path+"/floorput", data)})
	}
	for _, n := range envInts("CORRAL_PUT_INFLIGHT") {
		// Corral's Put again, with n puts in flight at most: to measure
		// the default against other caps on another machine.
		qn := mustQueue(b, st, path+"/corral", queue.WithPutsInFlight(n))
		variants = append(variants, &putVariant{name: fmt.Sprintf("corral-if%d", n),
			put: func(ctx context.Context) (int, error) { return 1, qn.Put(ctx, data) }})
	}
	// Warm up: the queue's first check, the peer's directory, the JIT.
	for _, v := range variants {
		if _, err := v.put(ctx); err != nil {
			b.Fatal(err)
		}
	}
	rounds := envInt("CORRAL_PUT_ROUNDS", 6)
	d := time.Duration(envInt("CORRAL_PUT_MS", 1000)) * time.Millisecond
	ratios := make([][]float64, len(variants))
	for r := range rounds {
		order := slices.Clone(variants)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		rates := map[*putVariant]float64{}
		for _, v := range order {
			rates[v] = runPuts(b, v, producers, d, env.srvPid)
		}
		for i, v := range variants {
			ratios[i] = append(ratios[i], rates[v]/rates[variants[0]])
		}
	}
	for i, v := range variants {
		b.ReportMetric(v.rate(), v.name+"-puts/s")
		b.ReportMetric(float64(v.alloc)/float64(v.items), v.name+"-allocs/put")
		b.ReportMetric(float64(v.cpu.Microseconds())/float64(v.items), v.name+"-cpu-µs/put")
		if env.srvPid != 0 {
			b.ReportMetric(float64(v.srvCPU.Microseconds())/float64(v.items), v.name+"-srv-µs/put")
		}
		if i > 0 {
			b.ReportMetric(median(ratios[i]), v.name+"/peer")
		}
	}
	// Requests per put, counted apart: the counting wrapper's own cost
	// stays out of the rates.
	cs := countstore.New(st)
	defer cs.Close()
	cq := mustQueue(b, cs, path+"/corral")
	counted := []*putVariant{
		{name: "corral", put: func(ctx context.Context) (int, error) { return 1, cq.Put(ctx, data) }},
		{name: "corral-batch", put: func(ctx context.Context) (int, error) { return batchN, cq.PutBatch(ctx, batch) }},
	}
	for _, v := range counted {
		if _, err := v.put(ctx); err != nil { // the Queue's first check
			b.Fatal(err)
		}
		cs.Reset()
		runPuts(b, v, producers, d/2, 0)
		b.ReportMetric(float64(cs.Counts().Total())/float64(v.items), v.name+"-req/put")
	}
	b.ReportMetric(0, "ns/op")
	load, _ := os.ReadFile("/proc/loadavg")
	var line strings.Builder
	for i, v := range variants[1:] {
		fmt.Fprintf(&line, "%s %.2fx (rounds %.2f), ", v.name, median(ratios[i+1]), ratios[i+1])
	}
	b.Logf("%s producers=%d: %sthe peer's %.0f puts/s; load %s", env.name, producers, line.String(), variants[0].rate(), load)
}

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	return (s[(n-1)/2] + s[n/2]) / 2
}

func (v *putVariant) rate() float64 { return float64(v.items) / v.took.Seconds() }

// runPuts runs v's put from producers goroutines for d and adds what they
// did to v; it returns the rate of this run.
func runPuts(b *testing.B, v *putVariant, producers int, d time.Duration, srvPid int) float64 {
	ctx := b.Context()
	runtime.GC()
	cpu0, srv0 := selfCPU(), procCPU(b, srvPid)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var items atomic.Int64
	var wg gosync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range producers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				k, err := v.put(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				items.Add(int64(k))
			}
		})
	}
	wg.Wait()
	if v.flush != nil {
		if err := v.flush(ctx); err != nil {
			b.Error(err)
		}
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	v.took += took
	v.cpu += selfCPU() - cpu0
	v.srvCPU += procCPU(b, srvPid) - srv0
	v.items += items.Load()
	v.alloc += after.Mallocs - before.Mallocs
	return float64(items.Load()) / took.Seconds()
}

// open opens a session of corral's: on ZooKeeper straight to the server
// (the peer's connection has no test proxy either); on etcd through the
// backend, whose client the peer shares.
func (e *putEnv) open(b *testing.B) store.Store {
	if e.name != "zk" {
		return e.be.Open(b)
	}
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	st, err := zkstore.Open(ctx, e.servers)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// peerPut returns the peer's put of one item into the queue at path.
func (e *putEnv) peerPut(b *testing.B, st store.Store, path string, data []byte) func(ctx context.Context) (int, error) {
	if e.name == "etcd" {
		q := recipe.NewQueue(st.(*etcdstore.Store).Client(), path)
		return func(context.Context) (int, error) { return 1, q.Enqueue(string(data)) }
	}
	conn := e.dialZK(b)
	acl := zk.WorldACL(zk.PermAll)
	// Curator makes the queue's path once, when the queue starts.
	if _, err := st.Create(b.Context(), path, nil, store.Persistent); err != nil {
		b.Fatal(err)
	}
	return func(context.Context) (int, error) {
		_, err := conn.Create(path+"/queue-", data, zk.FlagSequence, acl)
		return 1, err
	}
}

// dialZK returns a go-zookeeper connection of its own to the server, with
// its session, closed when the benchmark ends.
func (e *putEnv) dialZK(b *testing.B) *zk.Conn {
	conn, events, err := zk.Connect(e.servers, zkstore.DefaultSessionTimeout, zk.WithLogger(quietZK{}), zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Close)
	waitSession(b, events)
	return conn
}

// floorPut returns, on etcd, the transaction of one Put with the bare
// client: a put of a key named as corral names an item, with the compares
// that no key is there and that the parent is the one made at its first
// CreateRevision (the Store's check that the parent exists with no lease,
// as it sends it once it knows the parent; see etcdstore's parentCmps). It
// is the most corral's Put can do on etcd, where the peer's put has no
// parent to check.
func floorPut(b *testing.B, st store.Store, path string, data []byte) func(ctx context.Context) (int, error) {
	if _, err := st.Create(b.Context(), path, nil, store.Persistent); err != nil {
		b.Fatal(err)
	}
	cli := st.(*etcdstore.Store).Client()
	got, err := cli.Get(b.Context(), path)
	if err != nil || len(got.Kvs) != 1 {
		b.Fatalf("floor-put: read %s: %v %v", path, got, err)
	}
	parent := clientv3.Compare(clientv3.CreateRevision(path), "=", got.Kvs[0].CreateRevision)
	var next atomic.Uint64
	next.Store(rand.Uint64())
	return func(ctx context.Context) (int, error) {
		key := path + "/" + names.ItemName(0, names.ID(next.Add(1))) + names.ID(rand.Uint64())
		_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0), parent).
			Then(clientv3.OpPut(key, string(data))).Commit()
		return 1, err
	}
}

// floorBatch returns the store's own batch of n puts into the queue at
// path, with the store's client and nothing else: on ZooKeeper a multi of
// n sequential creates, on etcd a transaction of n puts. It is the most a
// batch put can do on that store, to measure PutBatch against.
func (e *putEnv) floorBatch(b *testing.B, st store.Store, path string, data []byte, n int) func(ctx context.Context) (int, error) {
	if _, err := st.Create(b.Context(), path, nil, store.Persistent); err != nil {
		b.Fatal(err)
	}
	if e.name == "etcd" {
		cli := st.(*etcdstore.Store).Client()
		var seq atomic.Int64
		return func(ctx context.Context) (int, error) {
			ops := make([]clientv3.Op, n)
			for i := range ops {
				ops[i] = clientv3.OpPut(fmt.Sprintf("%s/floor-%d", path, seq.Add(1)), string(data))
			}
			_, err := cli.Txn(ctx).Then(ops...).Commit()
			return n, err
		}
	}
	conn := e.dialZK(b)
	acl := zk.WorldACL(zk.PermAll)
	return func(context.Context) (int, error) {
		ops := make([]any, n)
		for i := range ops {
			ops[i] = &zk.CreateRequest{Path: path + "/queue-", Data: data, Acl: acl, Flags: zk.FlagSequence}
		}
		_, err := conn.Multi(ops...)
		return n, err
	}
}

// selfCPU returns this process's CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the CPU time of process pid, 0 for pid 0.
func procCPU(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Past the command name, which may hold spaces: utime and stime, in
	// clock ticks of 1/100 s.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100
}

// waitSession waits for go-zookeeper's session.
func waitSession(b *testing.B, events <-chan zk.Event) {
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return
			}
		case <-t.C:
			b.Fatal("go-zookeeper: no session within a minute")
		}
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// envInts is the positive integers listed in the environment variable key,
// comma-separated.
func envInts(key string) []int {
	var out []int
	for f := range strings.SplitSeq(os.Getenv(key), ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	return out
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}
