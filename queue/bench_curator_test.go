package queue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/curator"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// BenchmarkCurator puts corral's queue beside Apache Curator's
// DistributedQueue itself, on one ZooKeeper server started for it, in the
// same run: Curator runs in a JVM of its own (package curator compiles and
// starts it; the benchmark skips, saying what is missing, without javac or
// Debian's libcurator-recipes-java).
//
// Puts, with 1 and 8 producers on one session each: Curator's put from that
// many threads, in the background (its default; "curator") and in the
// foreground ("curator-fg": each put returns once stored, as corral's Put
// does), then flushPuts; corral's Put, PutBatch (of CORRAL_PUT_BATCH items,
// default 100) and PutAsync (each producer as fast as PutAsync returns,
// then a wait for every Pending) from that many goroutines, and with
// CORRAL_PUT_INFLIGHT (a list, such as "1,4,8") corral's Put again with
// that many requests in flight at most. Each
// variant runs for about CORRAL_PUT_MS (default 1000) per round (Curator: as
// many items as its last round's rate puts in that time), CORRAL_PUT_ROUNDS
// rounds (default 6) in turns, in one order and then the other. It reports
// per variant puts/s over all rounds, the median over the rounds of its
// ratio to Curator's rate in the same round, the client's CPU time per item
// (corral: this process; Curator: its JVM), the server's, and the requests
// in flight: their mean over the round's time (Little's law: the sum of
// every request's time in flight over the time) and their peak, with the
// items per request (Curator sends one per item; corral's are counted in
// a pass of their own, through a wrapper that times each request).
//
// Drain: a backlog of CORRAL_DRAIN_ITEMS (default 5,000) items, put
// beforehand, drained by one consumer on a session of its own: Curator's
// DistributedQueue consumer and corral's Consumer (at-most-once, as
// Curator's is), timed from the consumer's start (its first listing
// included) to the last item consumed, CORRAL_DRAIN_ROUNDS rounds (default
// 3), alternating which goes first.
//
//	go test ./queue/ -run '^$' -bench Curator -benchtime 1x
func BenchmarkCurator(b *testing.B) {
	if !backends.Selected("zk") {
		b.Skip("zk not in CORRAL_STORES")
	}
	if err := curator.Available(); err != nil {
		b.Skipf("needs Curator to run beside: %v", err)
	}
	zkserver.Require(b)
	srv, err := zkserver.Start(zkserver.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	cq, err := curator.Start(b.Context(), b.TempDir(), srv.Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cq.Close() })
	env := &curatorEnv{srv: srv, cq: cq}
	env.conn = (&putEnv{servers: []string{srv.Addr()}}).dialZK(b)
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("put/producers=%d", n), func(b *testing.B) {
			for b.Loop() {
				env.comparePuts(b, n)
			}
		})
	}
	b.Run("drain", func(b *testing.B) {
		for b.Loop() {
			env.compareDrains(b)
		}
	})
}

type curatorEnv struct {
	srv  *zkserver.Server
	cq   *curator.Queue
	conn *zk.Conn // to delete what a round put
}

// wipe deletes the children of dir, so that the server's heap holds the
// same few nodes at every variant's turn: a round of 1 s puts tens of
// thousands of items, which would otherwise pile up in the server's 256 MB
// over the rounds and make its collector's pauses the last variants' cost.
func (e *curatorEnv) wipe(b *testing.B, dir string) {
	kids, _, err := e.conn.Children(dir)
	if err != nil {
		b.Fatal(err)
	}
	for chunk := range slices.Chunk(kids, 1000) {
		ops := make([]any, len(chunk))
		for i, k := range chunk {
			ops[i] = &zk.DeleteRequest{Path: dir + "/" + k, Version: -1}
		}
		if _, err := e.conn.Multi(ops...); err != nil {
			b.Fatal(err)
		}
	}
}

// open opens a session of corral's on the server, closed when b ends.
func (e *curatorEnv) open(b *testing.B) store.Store {
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	st, err := zkstore.Open(ctx, []string{e.srv.Addr()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// flight is what a variant's requests in flight were.
type flight struct {
	mean     float64 // over the variant's time
	peak     int
	perItems float64 // items per request
}

func (e *curatorEnv) comparePuts(b *testing.B, producers int) {
	data := []byte("payload")
	path := benchPath(b)
	batchN := envInt("CORRAL_PUT_BATCH", 100)
	batch := slices.Repeat([][]byte{data}, batchN)
	st := e.open(b)
	newVariants := func(st store.Store) []*putVariant {
		q := mustQueue(b, st, path+"/corral")
		vs := []*putVariant{
			{name: "corral", put: func(ctx context.Context) (int, error) { return 1, q.Put(ctx, data) }},
			{name: "corral-batch", put: func(ctx context.Context) (int, error) { return batchN, q.PutBatch(ctx, batch) }},
		}
		vs = append(vs, asyncVariant("corral-async", q, data))
		for _, n := range envInts("CORRAL_PUT_INFLIGHT") {
			qn := mustQueue(b, st, path+"/corral", queue.WithPutsInFlight(n))
			vs = append(vs, &putVariant{name: fmt.Sprintf("corral-if%d", n),
				put: func(ctx context.Context) (int, error) { return 1, qn.Put(ctx, data) }})
		}
		return vs
	}
	cur := &curatorPuts{dir: path + "/curator"}
	curFg := &curatorPuts{dir: path + "/curator-fg", fg: true}
	curs := map[*putVariant]*curatorPuts{}
	for _, c := range []*curatorPuts{cur, curFg} {
		c.v = &putVariant{name: filepath.Base(c.dir)}
		curs[c.v] = c
	}
	variants := append([]*putVariant{cur.v, curFg.v}, newVariants(st)...)
	d := time.Duration(envInt("CORRAL_PUT_MS", 1000)) * time.Millisecond
	// Warm up: the queues' first checks, the JVM's compiler.
	for _, c := range []*curatorPuts{cur, curFg} {
		for range 2 {
			e.curatorRound(b, c, producers, d)
		}
		*c.v = putVariant{name: c.v.name}
		c.flight, c.peak = 0, 0
	}
	for _, v := range variants[2:] {
		warmUp(b, v)
	}
	rounds := envInt("CORRAL_PUT_ROUNDS", 6)
	ratios := make([][]float64, len(variants))
	for r := range rounds {
		order := slices.Clone(variants)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		rates := map[*putVariant]float64{}
		for _, v := range order {
			if c, ok := curs[v]; ok {
				rates[v] = e.curatorRound(b, c, producers, d)
				continue
			}
			rates[v] = runPuts(b, v, producers, d, e.srv.Pid())
			e.wipe(b, path+"/corral/"+names.Items)
		}
		for i, v := range variants {
			ratios[i] = append(ratios[i], rates[v]/rates[cur.v])
		}
	}
	flights := map[string]flight{}
	for _, c := range curs {
		flights[c.v.name] = flight{mean: c.flight / c.v.took.Seconds(), peak: c.peak, perItems: 1}
	}
	// Requests in flight, counted apart: the timing wrapper's own cost
	// stays out of the rates.
	fs := &flightStore{Store: st, bc: st.(store.BatchCreator)}
	for _, v := range newVariants(fs) {
		warmUp(b, v)
		fs.reset()
		runPuts(b, v, producers, d/2, 0)
		flights[v.name] = fs.flight()
		e.wipe(b, path+"/corral/"+names.Items)
	}
	var line strings.Builder
	for i, v := range variants {
		b.ReportMetric(v.rate(), v.name+"-puts/s")
		b.ReportMetric(float64(v.cpu.Microseconds())/float64(v.items), v.name+"-cpu-µs/item")
		b.ReportMetric(float64(v.srvCPU.Microseconds())/float64(v.items), v.name+"-srv-µs/item")
		f := flights[v.name]
		b.ReportMetric(f.mean, v.name+"-inflight")
		b.ReportMetric(float64(f.peak), v.name+"-inflight-peak")
		b.ReportMetric(f.perItems, v.name+"-items/req")
		if i > 0 {
			b.ReportMetric(median(ratios[i]), v.name+"/curator")
			fmt.Fprintf(&line, "%s %.2fx (rounds %.2f), ", v.name, median(ratios[i]), ratios[i])
		}
	}
	b.ReportMetric(0, "ns/op")
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("producers=%d: %sCurator's %.0f puts/s; load %s", producers, line.String(), cur.v.rate(), load)
}

// curatorPuts is a variant of Curator's puts, in the background or in the
// foreground, into the queue at dir.
type curatorPuts struct {
	v      *putVariant
	dir    string
	fg     bool
	rate   float64 // the last round's: it sizes the next
	flight float64 // the mean in flight × the time, over the rounds
	peak   int
}

// curatorRound runs a round of c, with as many items as its last rate puts
// in d, and returns its rate; then it deletes what it put.
func (e *curatorEnv) curatorRound(b *testing.B, c *curatorPuts, producers int, d time.Duration) float64 {
	if c.rate == 0 {
		c.rate = 2000
	}
	n := max(int(c.rate*d.Seconds()), 100)
	cpu0, srv0 := procCPU(b, e.cq.Pid()), procCPU(b, e.srv.Pid())
	took, peak, mean, err := e.cq.Put(b.Context(), c.dir, producers, n, c.fg)
	if err != nil {
		b.Fatal(err)
	}
	c.v.cpu += procCPU(b, e.cq.Pid()) - cpu0
	c.v.srvCPU += procCPU(b, e.srv.Pid()) - srv0
	c.v.items += int64(n)
	c.v.took += took
	c.flight += mean * took.Seconds()
	c.peak = max(c.peak, peak)
	c.rate = float64(n) / took.Seconds()
	e.wipe(b, c.dir)
	return c.rate
}

func (e *curatorEnv) compareDrains(b *testing.B) {
	ctx := b.Context()
	items := envInt("CORRAL_DRAIN_ITEMS", 5000)
	rounds := envInt("CORRAL_DRAIN_ROUNDS", 3)
	prodSt := e.open(b)
	cons := e.open(b)
	type result struct {
		took, cpu, srvCPU time.Duration
	}
	var cur, cor result
	var ratios []float64
	data := slices.Repeat([][]byte{[]byte("payload")}, store.MaxBatchNodes)
	for r := range rounds {
		path := benchPath(b)
		curatorDrain := func() time.Duration {
			if _, _, _, err := e.cq.Put(ctx, path+"/curator", 8, items, false); err != nil {
				b.Fatal(err)
			}
			cpu0, srv0 := procCPU(b, e.cq.Pid()), procCPU(b, e.srv.Pid())
			took, err := e.cq.Drain(ctx, path+"/curator", items)
			if err != nil {
				b.Fatal(err)
			}
			cur.took += took
			cur.cpu += procCPU(b, e.cq.Pid()) - cpu0
			cur.srvCPU += procCPU(b, e.srv.Pid()) - srv0
			return took
		}
		corralDrain := func() time.Duration {
			prod := mustQueue(b, prodSt, path+"/corral")
			for left := items; left > 0; left -= len(data) {
				if err := prod.PutBatch(ctx, data[:min(left, len(data))]); err != nil {
					b.Fatal(err)
				}
			}
			q := mustQueue(b, cons, path+"/corral")
			cpu0, srv0 := selfCPU(), procCPU(b, e.srv.Pid())
			res := drain(b, items, time.Now(), []func(ctx context.Context, done func()) error{corralConsumer(q)}, nil, nil)
			cor.took += res.took
			cor.cpu += selfCPU() - cpu0
			cor.srvCPU += procCPU(b, e.srv.Pid()) - srv0
			return res.took
		}
		var ct, qt time.Duration
		if r%2 == 0 {
			ct, qt = curatorDrain(), corralDrain()
		} else {
			qt, ct = corralDrain(), curatorDrain()
		}
		ratios = append(ratios, ct.Seconds()/qt.Seconds())
	}
	n := float64(items * rounds)
	for name, r := range map[string]result{"curator": cur, "corral": cor} {
		b.ReportMetric(n/r.took.Seconds(), name+"-items/s")
		b.ReportMetric(float64(r.cpu.Microseconds())/n, name+"-cpu-µs/item")
		b.ReportMetric(float64(r.srvCPU.Microseconds())/n, name+"-srv-µs/item")
	}
	b.ReportMetric(median(ratios), "corral/curator")
	b.ReportMetric(0, "ns/op")
	b.Logf("drain of %d items: corral %.2fx Curator (rounds %.2f)", items, median(ratios), ratios)
}

// flightStore times the batch creates sent through it: how many were in
// flight, on average over the time since reset and at most, and how many
// items each carried.
type flightStore struct {
	store.Store
	bc store.BatchCreator

	mu        gosync.Mutex
	n, peak   int
	since     time.Time // of the last change of n
	start     time.Time
	area      time.Duration // the sum of n over time
	reqs, all int
}

var _ store.Wrapper = (*flightStore)(nil)

func (f *flightStore) Unwrap() store.Store { return f.Store }

func (f *flightStore) CreateBatch(ctx context.Context, parent string, batch []store.BatchNode, mode store.Mode) ([]store.Node, error) {
	f.change(+1, len(batch))
	defer f.change(-1, 0)
	return f.bc.CreateBatch(ctx, parent, batch, mode)
}

func (f *flightStore) change(d, items int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	f.area += time.Duration(f.n) * now.Sub(f.since)
	f.since = now
	f.n += d
	f.peak = max(f.peak, f.n)
	if d > 0 {
		f.reqs++
		f.all += items
	}
}

func (f *flightStore) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start, f.since = time.Now(), time.Now()
	f.area, f.peak, f.reqs, f.all = 0, f.n, 0, 0
}

func (f *flightStore) flight() flight {
	f.change(0, 0)
	f.mu.Lock()
	defer f.mu.Unlock()
	return flight{
		mean:     float64(f.area) / float64(f.since.Sub(f.start)),
		peak:     f.peak,
		perItems: float64(f.all) / float64(max(f.reqs, 1)),
	}
}

// asyncVariant puts data into q with PutAsync, each producer as fast as
// PutAsync returns; flush waits for every put started.
func asyncVariant(name string, q *queue.Queue, data []byte) *putVariant {
	var mu gosync.Mutex
	var started []*queue.Pending
	return &putVariant{
		name: name,
		put: func(ctx context.Context) (int, error) {
			p := q.PutAsync(ctx, data, 0)
			mu.Lock()
			started = append(started, p)
			mu.Unlock()
			return 1, nil
		},
		flush: func(ctx context.Context) error {
			mu.Lock()
			ps := started
			started = nil
			mu.Unlock()
			for _, p := range ps {
				if err := p.Wait(ctx); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// warmUp puts once with v: the Queue's first check.
func warmUp(b *testing.B, v *putVariant) {
	_, err := v.put(b.Context())
	if err == nil && v.flush != nil {
		err = v.flush(b.Context())
	}
	if err != nil {
		b.Fatal(err)
	}
}
