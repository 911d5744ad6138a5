package partition_test

import (
	"context"
	"fmt"
	"os"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
	corralsync "github.com/corral-go/corral/sync"
)

// benchSizes are the (members, shards) of BenchmarkRebalance: small by
// default, the full grid with CORRAL_BENCH_FULL=1.
func benchSizes() [][2]int {
	if os.Getenv("CORRAL_BENCH_FULL") == "" {
		return [][2]int{{2, 64}, {8, 64}}
	}
	var s [][2]int
	for _, k := range []int{64, 1024} {
		for _, m := range []int{2, 8, 32} {
			s = append(s, [2]int{m, k})
		}
	}
	return s
}

// BenchmarkRebalance measures, on ZooKeeper and etcd, the time from a
// member's arrival, and from a member's death (its session closed: the
// server drops its nodes at once; a kill -9 adds the session timeout
// before that), to every shard being worked on again under the new
// balance, and the store requests all members made meanwhile. Beside it,
// the baseline of one sync.Mutex per shard grabbed greedily by every
// member: the time to full coverage after the death of the member that
// holds the most, and the imbalance (most minus fewest shards held) it
// leaves.
func BenchmarkRebalance(b *testing.B) {
	for _, name := range []string{"zk", "etcd"} {
		if !backends.Selected(name) {
			continue
		}
		for _, size := range benchSizes() {
			m, k := size[0], size[1]
			b.Run(fmt.Sprintf("%s/M=%d/K=%d", name, m, k), func(b *testing.B) {
				be := backends.Get(b, name)
				for range b.N {
					arrival, death, reqA, reqD := rebalance(b, be.Open, m, k)
					b.ReportMetric(float64(arrival.Milliseconds()), "arrival-ms")
					b.ReportMetric(float64(death.Milliseconds()), "death-ms")
					b.ReportMetric(float64(reqA), "arrival-req")
					b.ReportMetric(float64(reqD), "death-req")
					gd, imb := greedy(b, be.Open, m, k)
					b.ReportMetric(float64(gd.Milliseconds()), "greedy-death-ms")
					b.ReportMetric(float64(imb), "greedy-imbalance")
				}
			})
		}
	}
}

func rebalance(b *testing.B, open func(testing.TB) store.Store, m, k int) (arrival, death time.Duration, reqA, reqD int) {
	path := dir(b)
	f := newFence()
	tick := make(chan struct{}, 1)
	var (
		ws  []*worker
		cs  []*countstore.Store
		sts []store.Store
	)
	add := func(i int) {
		st := open(b)
		c := countstore.New(st)
		mem, err := partition.Join(b.Context(), c, path, k, fmt.Sprint("m", i))
		if err != nil {
			b.Fatal(err)
		}
		sts, cs, ws = append(sts, st), append(cs, c), append(ws, work(mem, f, tick))
	}
	defer func() {
		for i, w := range ws {
			_ = w.m.Leave(b.Context())
			<-w.done
			_ = sts[i].Close()
		}
	}()
	for i := range m - 1 {
		add(i)
	}
	waitBalanced(b, tick, ws, k)
	total := func() int {
		n := 0
		for _, c := range cs {
			n += c.Counts().Total()
			c.Reset()
		}
		return n
	}
	total()
	start := time.Now()
	add(m - 1)
	waitBalanced(b, tick, ws, k)
	arrival, reqA = time.Since(start), total()

	start = time.Now()
	_ = sts[0].Close() // the first member dies
	<-ws[0].done
	waitBalanced(b, tick, ws[1:], k)
	death, reqD = time.Since(start), total()
	f.check(b)
	ws, cs, sts = ws[1:], cs[1:], sts[1:]
	return arrival, death, reqA, reqD
}

// greedyBound bounds each wait of the baseline; a run that reaches it
// reports it as its time, and an imbalance of -1.
const greedyBound = time.Minute

// greedy is the baseline: every member locks every shard's Mutex, the
// first to get one keeps it. It returns the time to full coverage after
// the death of the member holding the most, and the imbalance then.
func greedy(b *testing.B, open func(testing.TB) store.Store, m, k int) (time.Duration, int) {
	path := dir(b)
	ctx, cancel := context.WithCancel(b.Context())
	var wg gosync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var (
		mu    gosync.Mutex
		owner = map[int]int{}
		tick  = make(chan struct{}, 1)
	)
	sts := make([]store.Store, m)
	for i := range sts {
		sts[i] = open(b)
		defer sts[i].Close()
	}
	for i, st := range sts {
		for s := range k {
			wg.Go(func() {
				mx := corralsync.NewMutex(st, fmt.Sprintf("%s/%d", path, s))
				if mx.Lock(ctx) != nil {
					return
				}
				mu.Lock()
				owner[s] = i
				mu.Unlock()
				select {
				case tick <- struct{}{}:
				default:
				}
				select {
				case <-mx.Context().Done():
				case <-ctx.Done():
				}
				_ = mx.Unlock(context.WithoutCancel(ctx))
			})
		}
	}
	coverage := func(dead int) (covered bool, imbalance int) {
		mu.Lock()
		defer mu.Unlock()
		load := make([]int, m)
		n := 0
		for _, o := range owner {
			if o != dead {
				load[o]++
				n++
			}
		}
		lo, hi := k, 0
		for i, l := range load {
			if i != dead {
				lo, hi = min(lo, l), max(hi, l)
			}
		}
		return n == k, hi - lo
	}
	// wait waits for full coverage and returns the imbalance, or -1 after
	// greedyBound: the baseline may not get there at the large sizes.
	wait := func(dead int) int {
		timer := time.NewTimer(greedyBound)
		defer timer.Stop()
		for {
			if ok, imb := coverage(dead); ok {
				return imb
			}
			select {
			case <-tick:
			case <-timer.C:
				b.Logf("greedy: no full coverage after %v", greedyBound)
				return -1
			}
		}
	}
	if wait(-1) < 0 {
		return greedyBound, -1
	}
	mu.Lock()
	load := make([]int, m)
	for _, o := range owner {
		load[o]++
	}
	mu.Unlock()
	dead := 0
	for i := range load {
		if load[i] > load[dead] {
			dead = i
		}
	}
	start := time.Now()
	_ = sts[dead].Close()
	imb := wait(dead)
	return time.Since(start), imb
}
