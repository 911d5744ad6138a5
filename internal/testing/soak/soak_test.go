package soak_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	csync "github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/twophase"
	"github.com/corral-go/corral/zkstore"
)

const (
	// longEnv sets the length of the soak on each store ("10m"); without
	// it the soak runs for shortSoak.
	longEnv   = "CORRAL_SOAK"
	shortSoak = 3 * time.Second
)

// The bounds the soak asserts. Every watch the recipes leave with the
// server is on a live node (a contender, a directory, a queue item, a
// transaction's header or slot: at most one of each kind, data and
// children, per session and path) or on a recipe path whose creation it
// waits for (a directory a queue or an election waits on, a double
// barrier's ready node), a few per session; zkstore adds one of its own per
// session.
const (
	watchesPerNode    = 4
	watchesPerSession = 3
	// heapPer100k is the most the client's heap, after a GC, may grow per
	// 100,000 cycles in the long soak.
	heapPer100k = 1 << 20
	// goroutinesPerLoop bounds the goroutines of one loop and the wait
	// it is in.
	goroutinesPerLoop = 4
)

func TestMain(m *testing.M) {
	if code, ok := etcdserver.ServeChild(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// soakLength returns how long the soak runs on each store, and whether it
// is the long soak.
func soakLength(t *testing.T) (time.Duration, bool) {
	v := os.Getenv(longEnv)
	if v == "" {
		return shortSoak, false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration such as 10m", longEnv, v)
	}
	return d, true
}

// A server is what the soak runs on: how to open a session, and how many
// watches the server holds (ZooKeeper: every kind, by mntr; etcd: its
// watchers), and, where it tells them apart, its data and exists watches
// alone (ZooKeeper's wchs).
type server struct {
	open        func(ctx context.Context) (store.Store, error)
	watches     func() (int, error)
	dataWatches func() (int, error)
}

func TestSoak(t *testing.T) {
	d, long := soakLength(t)
	t.Run("zk", func(t *testing.T) {
		zkserver.Require(t)
		srv := zkserver.ForTest(t, zkserver.Config{})
		soak(t, d, long, server{
			open: func(ctx context.Context) (store.Store, error) {
				return zkstore.Open(ctx, []string{srv.Addr()})
			},
			watches:     func() (int, error) { return zkserver.Watches(srv.Addr()) },
			dataWatches: func() (int, error) { return zkserver.DataWatches(srv.Addr()) },
		})
	})
	t.Run("etcd", func(t *testing.T) {
		ep := etcdserver.StartChild(t)
		soak(t, d, long, server{
			open: func(ctx context.Context) (store.Store, error) {
				return etcdstore.Dial(ctx, clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
			},
			watches:     func() (int, error) { return etcdWatchers(ep) },
			dataWatches: func() (int, error) { return -1, nil },
		})
	})
}

// etcdWatchers returns the number of watchers the etcd server at ep holds
// (its etcd_debugging_mvcc_watcher_total metric).
func etcdWatchers(ep string) (int, error) {
	resp, err := http.Get(ep + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "etcd_debugging_mvcc_watcher_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("soak: no watcher count in %s/metrics", ep)
}

// run is one soak on one server: the sessions it opened and the loops
// that cycle the primitives on them.
type run struct {
	t      *testing.T
	srv    server
	root   string
	sts    []store.Store
	loops  []loop
	cycles map[string]*atomic.Int64
	names  []string
	// owned are the goroutines that drain the observers; closers end
	// the observers and the queue's consumer.
	owned   gosync.WaitGroup
	closers []func() error
	// running are the Err methods of the observers and the consumer,
	// nil while they run.
	running []func() error
}

// loop cycles one primitive on one session until ctx ends.
type loop struct {
	prim string
	fn   func(ctx context.Context, i int) error
}

func (r *run) session() store.Store {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 30*time.Second)
	defer cancel()
	st, err := r.srv.open(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	r.sts = append(r.sts, st)
	return st
}

func (r *run) add(prim string, fn func(ctx context.Context, i int) error) {
	if r.cycles[prim] == nil {
		r.cycles[prim] = new(atomic.Int64)
		r.names = append(r.names, prim)
	}
	r.loops = append(r.loops, loop{prim, fn})
}

// some returns ctx for most cycles, and for every eighth one a ctx that
// ends within a few milliseconds: a wait abandoned midway.
func some(ctx context.Context, i int) (context.Context, context.CancelFunc) {
	if i%8 != 7 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(1+rand.IntN(4))*time.Millisecond)
}

// A sample is what the soak measured at one moment.
type sample struct {
	at          time.Duration
	cycles      int64
	nodes       int
	watches     int
	dataWatches int
	heap        uint64
	goroutines  int
}

func soak(t *testing.T, d time.Duration, long bool, srv server) {
	r := &run{t: t, srv: srv, root: fmt.Sprintf("/soak-%d", time.Now().UnixNano()), cycles: map[string]*atomic.Int64{}}
	probe := r.session()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	r.locks()
	r.barriers()
	r.queue(ctx)
	r.twophase()
	r.observers(ctx)
	// The goroutines of the sessions and readers, before the loops start.
	base := runtime.NumGoroutine()
	failed := make(chan error, len(r.loops))
	var lost atomic.Int64 // cycles that failed with a lost connection
	var wg gosync.WaitGroup
	for _, l := range r.loops {
		n := r.cycles[l.prim]
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				err := l.fn(ctx, i)
				switch {
				case ctx.Err() != nil:
					return
				case errors.Is(err, store.ErrDisconnected):
					// A reply slower than etcdstore's attempt
					// timeout on a loaded machine: what the
					// soak looks for is what it leaves behind.
					lost.Add(1)
					continue
				case err != nil && !errors.Is(err, context.DeadlineExceeded):
					failed <- fmt.Errorf("%s: %w", l.prim, err)
					return
				}
				n.Add(1)
			}
		})
	}
	every := d / 3
	if long {
		every = 30 * time.Second
	}
	start := time.Now()
	var samples []sample
	tick := time.NewTicker(every)
	deadline := time.NewTimer(d)
	for done := false; !done; {
		select {
		case <-tick.C:
		case <-deadline.C:
			done = true
		case err := <-failed:
			t.Error(err)
			done = true
		}
		s := r.sample(probe)
		s.at = time.Since(start)
		samples = append(samples, s)
		t.Logf("%6.0fs %8d cycles %5d live nodes %6d server watches (wchs %d) %6.2f MB heap %5d goroutines",
			s.at.Seconds(), s.cycles, s.nodes, s.watches, s.dataWatches, float64(s.heap)/(1<<20), s.goroutines)
	}
	tick.Stop()
	for _, err := range r.running {
		if err := err(); err != nil {
			t.Errorf("a reader stopped during the soak: %v", err)
		}
	}
	stop()
	wg.Wait()
	for _, c := range r.closers {
		_ = c()
	}
	r.owned.Wait()
	for _, st := range r.sts {
		_ = st.Close()
	}
	var counts []string
	for _, name := range r.names {
		counts = append(counts, fmt.Sprintf("%s %d", name, r.cycles[name].Load()))
	}
	t.Logf("cycles: %s; %d failed with a lost connection", strings.Join(counts, ", "), lost.Load())
	r.check(samples, base, long)
}

// sample measures the server's watches, the live nodes, and the client's
// heap after a GC and its goroutines.
func (r *run) sample(probe store.Store) sample {
	r.t.Helper()
	var s sample
	for _, c := range r.cycles {
		s.cycles += c.Load()
	}
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	var err error
	if s.nodes, err = count(ctx, probe, r.root); err != nil {
		r.t.Errorf("counting the live nodes: %v", err)
	}
	if s.watches, err = r.srv.watches(); err != nil {
		r.t.Errorf("counting the server's watches: %v", err)
	}
	if s.dataWatches, err = r.srv.dataWatches(); err != nil {
		r.t.Errorf("counting the server's data watches: %v", err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.heap, s.goroutines = ms.HeapAlloc, runtime.NumGoroutine()
	return s
}

// count returns the number of nodes at and under p. It rides out a lost
// connection (a reply slower than etcdstore's attempt timeout, on a loaded
// machine) as the recipes do.
func count(ctx context.Context, st store.Store, p string) (int, error) {
	kids, err := st.Children(ctx, p)
	for attempt := 0; errors.Is(err, store.ErrDisconnected) && ctx.Err() == nil; attempt++ {
		if err := recipe.Pause(ctx, st, attempt); err != nil {
			return 0, err
		}
		kids, err = st.Children(ctx, p)
	}
	if errors.Is(err, store.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 1
	for _, k := range kids {
		c, err := count(ctx, st, store.Join(p, k.Name))
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// check asserts the bounds over the samples: the server's watches within
// a constant of the live nodes and sessions at every sample, and, in the
// long soak, the heap's growth per cycle.
func (r *run) check(samples []sample, base int, long bool) {
	t := r.t
	sessions := len(r.sts)
	for _, s := range samples {
		if bound := watchesPerNode*s.nodes + watchesPerSession*sessions; s.watches > bound {
			t.Errorf("at %v (%d cycles): %d server watches for %d live nodes and %d sessions; want at most %d",
				s.at.Round(time.Second), s.cycles, s.watches, s.nodes, sessions, bound)
		}
		// Beside the sessions' and readers' own: each loop's, a few per
		// wait in flight (at most one per loop), and one per client
		// watch (zkstore serves each; at most a few per live node).
		if bound := base + goroutinesPerLoop*len(r.loops) + watchesPerNode*s.nodes; s.goroutines > bound {
			t.Errorf("at %v (%d cycles): %d goroutines for %d live nodes and %d loops; want at most %d",
				s.at.Round(time.Second), s.cycles, s.goroutines, s.nodes, len(r.loops), bound)
		}
	}
	if !long || len(samples) < 3 {
		return
	}
	// The slope of the heap over the cycles, from the second sample on
	// (the first is warm-up), by least squares.
	var n, sx, sy, sxx, sxy float64
	for _, s := range samples[1:] {
		x, y := float64(s.cycles), float64(s.heap)
		n, sx, sy, sxx, sxy = n+1, sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	t.Logf("heap growth: %.0f bytes per 100,000 cycles", slope*1e5)
	if slope*1e5 > heapPer100k {
		t.Errorf("heap grows %.0f bytes per 100,000 cycles; want under %d", slope*1e5, heapPer100k)
	}
}

// locks adds the loops of the locks: Mutex, RWMutex, MultiMutex,
// StripedMutex and Semaphore, each with waits abandoned now and then.
func (r *run) locks() {
	for range 4 {
		st := r.session()
		ms := make([]*csync.Mutex, 3)
		for i := range ms {
			ms[i] = csync.NewMutex(st, fmt.Sprintf("%s/mutex/%d", r.root, i))
		}
		r.add("Mutex", func(ctx context.Context, i int) error {
			m := ms[rand.IntN(len(ms))]
			lctx, cancel := some(ctx, i)
			defer cancel()
			if err := m.Lock(lctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		})
	}
	for w := range 3 {
		rw := csync.NewRWMutex(r.session(), r.root+"/rwmutex")
		r.add("RWMutex", func(ctx context.Context, i int) error {
			lctx, cancel := some(ctx, i)
			defer cancel()
			if w == 0 {
				if err := rw.Lock(lctx); err != nil {
					return err
				}
				return rw.Unlock(ctx)
			}
			r, err := rw.RLock(lctx)
			if err != nil {
				return err
			}
			return r.Unlock(ctx)
		})
	}
	for _, set := range [][]string{{"a", "b"}, {"b", "c"}} {
		paths := []string{r.root + "/multi/" + set[0], r.root + "/multi/" + set[1]}
		mm := csync.NewMultiMutex(r.session(), paths)
		r.add("MultiMutex", func(ctx context.Context, i int) error {
			lctx, cancel := some(ctx, i)
			defer cancel()
			if err := mm.Lock(lctx); err != nil {
				return err
			}
			return mm.Unlock(ctx)
		})
	}
	for range 3 {
		sm := csync.NewStripedMutex(r.session(), r.root+"/striped", 2)
		r.add("StripedMutex", func(ctx context.Context, i int) error {
			lctx, cancel := some(ctx, i)
			defer cancel()
			s, err := sm.Lock(lctx)
			if err != nil {
				return err
			}
			return s.Unlock(ctx)
		})
	}
	for range 3 {
		sem := csync.NewSemaphore(r.session(), r.root+"/semaphore", 2)
		r.add("Semaphore", func(ctx context.Context, i int) error {
			lctx, cancel := some(ctx, i)
			defer cancel()
			l, err := sem.Acquire(lctx)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		})
	}
}

// barriers adds the loops of Barrier (set, a wait abandoned while set, a
// wait released by the removal) and DoubleBarrier (two members entering
// and leaving together).
func (r *run) barriers() {
	p := r.root + "/barrier"
	setter, waiter := csync.NewBarrier(r.session(), p), csync.NewBarrier(r.session(), p)
	r.add("Barrier", func(ctx context.Context, i int) error {
		if err := setter.Set(ctx); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		err := waiter.Wait(wctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		released := make(chan error, 1)
		go func() { released <- waiter.Wait(ctx) }()
		err = setter.Remove(ctx)
		// Wait returns once the barrier is gone, or when ctx ends.
		return errors.Join(err, <-released)
	})
	for range 2 {
		db := csync.NewDoubleBarrier(r.session(), r.root+"/double", 2)
		r.add("DoubleBarrier", func(ctx context.Context, i int) error {
			if err := db.Enter(ctx); err != nil {
				return err
			}
			return db.Leave(ctx)
		})
	}
}

// queue adds an at-least-once queue's producer and two consumers: one
// that takes from its Consumer's channel, one that calls Take with waits
// abandoned now and then. At most 32 items are in flight.
func (r *run) queue(ctx context.Context) {
	p := r.root + "/queue"
	open := func() *queue.Queue {
		return queue.New(r.session(), p, queue.WithDelivery(queue.AtLeastOnce))
	}
	producer, consumer, taker := open(), open(), open()
	inflight := make(chan struct{}, 32)
	r.add("Queue.Put", func(ctx context.Context, i int) error {
		select {
		case inflight <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		return producer.Put(ctx, []byte(strconv.Itoa(i)))
	})
	// An item can come twice (at least once): inflight counts puts.
	done := func() {
		select {
		case <-inflight:
		default:
		}
	}
	c := consumer.Consume(ctx)
	r.closers = append(r.closers, c.Close)
	r.running = append(r.running, c.Err)
	r.add("Queue.Consume", func(ctx context.Context, i int) error {
		select {
		case it, ok := <-c.Items():
			if !ok {
				return fmt.Errorf("consumer stopped: %w", c.Err())
			}
			done()
			return it.Ack(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	r.add("Queue.Take", func(ctx context.Context, i int) error {
		tctx, cancel := some(ctx, i)
		defer cancel()
		it, err := taker.Take(tctx)
		if err != nil {
			return err
		}
		done()
		return it.Ack(ctx)
	})
}

// twophase adds a loop of two-phase transactions, each at a new path, with
// a coordinator and two participants on sessions of their own.
func (r *run) twophase() {
	coord, a, b := r.session(), r.session(), r.session()
	r.add("TwoPhase", func(ctx context.Context, i int) error {
		p := fmt.Sprintf("%s/tx/%d", r.root, i)
		c, err := twophase.Begin(ctx, coord, p, []string{"a", "b"}, time.Now().Add(time.Minute))
		if err != nil {
			return err
		}
		type vote struct {
			pt  *twophase.Participant
			err error
		}
		voted := make(chan vote, 2)
		for name, st := range map[string]store.Store{"a": a, "b": b} {
			go func() {
				pt, err := participate(ctx, st, p, name)
				voted <- vote{pt, err}
			}()
		}
		err = c.Wait(ctx)
		// The participants forget once the coordinator has seen the
		// outcome: a Wait that reads a transaction forgotten meanwhile
		// fails with twophase.ErrNoTransaction.
		forget := []func(context.Context) error{c.Forget}
		for range 2 {
			v := <-voted
			if err = errors.Join(err, v.err); v.pt != nil {
				forget = append(forget, v.pt.Forget)
			}
		}
		for _, f := range forget {
			err = errors.Join(err, f(ctx))
		}
		return err
	})
}

// participate joins the transaction at p, votes commit and waits for the
// outcome.
func participate(ctx context.Context, st store.Store, p, name string) (*twophase.Participant, error) {
	pt, err := twophase.Join(ctx, st, p, name)
	if err != nil {
		return nil, err
	}
	if err := pt.Vote(ctx, true); err != nil {
		return pt, err
	}
	return pt, pt.Wait(ctx)
}

// observers starts the readers that follow the soak until ctx ends: an
// election's observer (its candidates are loops) and an inspect watcher
// of the whole soak.
func (r *run) observers(ctx context.Context) {
	path := r.root + "/election"
	for w := range 3 {
		e := election.New(r.session(), path)
		value := []byte(strconv.Itoa(w))
		r.add("Election", func(ctx context.Context, i int) error {
			l, err := e.Campaign(ctx, value)
			if err != nil {
				return err
			}
			return l.Resign(ctx)
		})
	}
	o := election.New(r.session(), path).Observe(ctx)
	drain(r, "Observe", o.Leaders())
	w := inspect.Watch(ctx, r.session(), r.root)
	drain(r, "inspect.Watch", w.Reports())
	r.closers = append(r.closers, o.Close, w.Close)
	r.running = append(r.running, o.Err, w.Err)
}

// drain counts what ch delivers until it closes (when the soak's ctx
// ends).
func drain[T any](r *run, name string, ch <-chan T) {
	r.cycles[name] = new(atomic.Int64)
	r.names = append(r.names, name)
	n := r.cycles[name]
	r.owned.Go(func() {
		for range ch {
			n.Add(1)
		}
	})
}
