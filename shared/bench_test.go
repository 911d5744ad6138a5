package shared_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// adder adds to one counter, as one process does.
type adder interface {
	add(ctx context.Context, delta int64) error
	close()
}

// benchServer connects to the named real server directly (not through
// the test proxies), with corral's stores and with the store's own client.
type benchServer struct {
	name string
	zk   []string // ZooKeeper's servers
	etcd *etcdbackend.Backend
}

func newBenchServer(b *testing.B, name string) *benchServer {
	if !backends.Selected(name) {
		b.Skipf("%s not in CORRAL_STORES", name)
	}
	s := &benchServer{name: name}
	switch bk := backends.Get(b, name).(type) {
	case *zkbackend.Backend:
		s.zk = bk.Servers()
	case *etcdbackend.Backend:
		s.etcd = bk
	}
	return s
}

// store opens a session of corral's store.
func (s *benchServer) store(b *testing.B) store.Store {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st store.Store
	var err error
	if s.zk != nil {
		st, err = zkstore.Open(ctx, s.zk, zkstore.WithLogger(nil))
	} else {
		st, err = etcdstore.Dial(ctx, s.etcd.Cluster().ClientConfig())
	}
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// corralAdder adds with a shared.Counter on a session of its own.
type corralAdder struct {
	st store.Store
	c  *shared.Counter
}

func (a corralAdder) add(ctx context.Context, delta int64) error {
	_, err := a.c.Add(ctx, delta)
	return err
}

func (a corralAdder) close() { _ = a.st.Close() }

// zkAdder is the compare-and-set loop written with go-zookeeper: read
// with the version, Set with it, and on ErrBadVersion read and try again
// at once.
type zkAdder struct {
	conn *zk.Conn
	path string
}

func (a zkAdder) add(_ context.Context, delta int64) error {
	for {
		data, stat, err := a.conn.Get(a.path)
		if errors.Is(err, zk.ErrNoNode) {
			_, err = a.conn.Create(a.path, binary.BigEndian.AppendUint64(nil, uint64(delta)), 0, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		v := int64(binary.BigEndian.Uint64(data)) + delta
		_, err = a.conn.Set(a.path, binary.BigEndian.AppendUint64(nil, uint64(v)), stat.Version)
		if !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
	}
}

func (a zkAdder) close() { a.conn.Close() }

// etcdAdder is the compare-and-set loop written with etcd's client: a
// transaction on the key's ModRevision that puts the sum, and whose other
// branch reads the key for the next try.
type etcdAdder struct {
	cli  *clientv3.Client
	path string
}

func (a etcdAdder) add(ctx context.Context, delta int64) error {
	resp, err := a.cli.Get(ctx, a.path)
	if err != nil {
		return err
	}
	kvs := resp.Kvs
	for {
		var rev, v int64
		if len(kvs) > 0 {
			rev, v = kvs[0].ModRevision, int64(binary.BigEndian.Uint64(kvs[0].Value))
		}
		t, err := a.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(a.path), "=", rev)).
			Then(clientv3.OpPut(a.path, string(binary.BigEndian.AppendUint64(nil, uint64(v+delta))))).
			Else(clientv3.OpGet(a.path)).
			Commit()
		if err != nil || t.Succeeded {
			return err
		}
		kvs = t.Responses[0].GetResponseRange().Kvs
	}
}

func (a etcdAdder) close() { _ = a.cli.Close() }

// adders opens n adders of kind ("corral" or "raw") on path.
func (s *benchServer) adders(b *testing.B, kind, path string, n int) []adder {
	as := make([]adder, n)
	for i := range as {
		switch {
		case kind == "corral":
			st := s.store(b)
			as[i] = corralAdder{st, shared.NewCounter(st, path)}
		case s.zk != nil:
			conn, _, err := zk.Connect(s.zk, 10*time.Second, zk.WithLogger(quietLog{}), zk.WithLogInfo(false))
			if err != nil {
				b.Fatal(err)
			}
			as[i] = zkAdder{conn, path}
		default:
			cli, err := clientv3.New(s.etcd.Cluster().ClientConfig())
			if err != nil {
				b.Fatal(err)
			}
			as[i] = etcdAdder{cli, path}
		}
	}
	return as
}

type quietLog struct{}

func (quietLog) Printf(string, ...any) {}

// BenchmarkCounterAdd measures adds per second to one counter by 1, 8 and
// 32 concurrent adders, each with a session (a client) of its own, with
// shared.Counter beside a compare-and-set loop written with the store's
// own client (go-zookeeper's Set with a version; etcd's Txn on
// ModRevision, whose other branch reads the key for the next try). The
// two run in interleaved rounds of CORRAL_SHARED_ROUND (1s) each,
// CORRAL_SHARED_ROUNDS (5) of each, so that a shared machine's load
// weighs on both alike; it reports the medians of both rates and of the
// rounds' ratios, and checks that each counter ends at exactly the number
// of adds made. Run it with -benchtime 1x.
func BenchmarkCounterAdd(b *testing.B) {
	rounds := envInt("CORRAL_SHARED_ROUNDS", 5)
	round := time.Duration(envInt("CORRAL_SHARED_ROUND_MS", 1000)) * time.Millisecond
	for _, name := range []string{"zk", "etcd"} {
		b.Run(name, func(b *testing.B) {
			s := newBenchServer(b, name)
			for _, n := range []int{1, 8, 32} {
				b.Run(fmt.Sprintf("adders=%d", n), func(b *testing.B) {
					for b.Loop() {
						benchAdd(b, s, n, rounds, round)
					}
				})
			}
		})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

var benchRuns atomic.Int64

// benchAdd runs rounds of n corral adders and n raw ones, alternately,
// each for d, and reports the medians.
func benchAdd(b *testing.B, s *benchServer, n, rounds int, d time.Duration) {
	ctx := context.Background()
	sides := make([]*benchSide, 2)
	for i, kind := range []string{"corral", "raw"} {
		path := fmt.Sprintf("/shared-bench/%d-%d-%s", time.Now().UnixNano(), benchRuns.Add(1), kind)
		side := &benchSide{kind: kind, path: path, as: s.adders(b, kind, path, n)}
		defer side.close()
		// The node made, and each adder's first read done, before any
		// round.
		for _, a := range side.as {
			if err := a.add(ctx, 0); err != nil {
				b.Fatal(err)
			}
		}
		sides[i] = side
	}
	var rates [2][]float64
	var ratios []float64
	for range rounds {
		var pair [2]float64
		for i, side := range sides {
			adds, err := side.round(ctx, d)
			if err != nil {
				b.Fatal(err)
			}
			pair[i] = float64(adds) / d.Seconds()
			rates[i] = append(rates[i], pair[i])
		}
		ratios = append(ratios, pair[0]/pair[1])
	}
	st := s.store(b)
	defer st.Close()
	for _, side := range sides {
		if got, err := shared.NewCounter(st, side.path).Get(ctx); err != nil || got != side.done {
			b.Errorf("%s counter = %d, %v; want %d, the adds made", side.kind, got, err, side.done)
		}
	}
	b.ReportMetric(median(rates[0]), "corral-adds/s")
	b.ReportMetric(median(rates[1]), "raw-adds/s")
	b.ReportMetric(median(ratios), "ratio")
	b.Logf("adders=%d: corral %v, raw %v adds/s; ratios %v", n, rounded(rates[0]), rounded(rates[1]), rounded(ratios))
}

// benchSide is one kind of adder in a benchAdd: its adders, and the adds
// they made so far.
type benchSide struct {
	kind string
	path string
	as   []adder
	done int64
}

func (side *benchSide) close() {
	for _, a := range side.as {
		a.close()
	}
}

// round lets every adder add 1 as fast as it can for d, and returns how
// many adds went in.
func (side *benchSide) round(ctx context.Context, d time.Duration) (int64, error) {
	var count atomic.Int64
	var wg gosync.WaitGroup
	errs := make(chan error, len(side.as))
	deadline := time.Now().Add(d)
	for _, a := range side.as {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := a.add(ctx, 1); err != nil {
					errs <- err
					return
				}
				count.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return 0, err
	}
	side.done += count.Load()
	return count.Load(), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func rounded(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Round(x*100) / 100
	}
	return out
}

// BenchmarkGuardedWrite measures the latency of a value's write under a
// hold (SetWhile: a guarded write, one request) beside the same write
// unguarded (Set: one request), on one session, interleaved one of each
// per iteration; it reports both means and the guard's overhead.
func BenchmarkGuardedWrite(b *testing.B) {
	for _, name := range []string{"zk", "etcd"} {
		b.Run(name, func(b *testing.B) {
			s := newBenchServer(b, name)
			ctx := context.Background()
			st := s.store(b)
			defer st.Close()
			dir := fmt.Sprintf("/shared-bench/guard-%d", time.Now().UnixNano())
			n, err := st.Create(ctx, dir+"/lock/lock-", nil, store.EphemeralSequential)
			if err != nil {
				b.Fatal(err)
			}
			h := rawHold{store.Guard{Path: n.Path, Seq: n.Seq}}
			plain, guarded := shared.NewValue(st, dir+"/plain"), shared.NewValue(st, dir+"/guarded")
			data := []byte("0123456789abcdef")
			if _, err := plain.Set(ctx, data); err != nil {
				b.Fatal(err)
			}
			if _, err := guarded.SetWhile(ctx, h, data); err != nil {
				b.Fatal(err)
			}
			var tPlain, tGuarded time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := plain.Set(ctx, data); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if _, err := guarded.SetWhile(ctx, h, data); err != nil {
					b.Fatal(err)
				}
				tPlain += mid.Sub(start)
				tGuarded += time.Since(mid)
			}
			b.ReportMetric(float64(tPlain.Microseconds())/float64(b.N), "set-µs")
			b.ReportMetric(float64(tGuarded.Microseconds())/float64(b.N), "guarded-µs")
			b.ReportMetric(100*(float64(tGuarded)/float64(tPlain)-1), "overhead-%")
		})
	}
}
