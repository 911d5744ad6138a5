package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	corralsync "github.com/corral-go/corral/sync"
)

func init() {
	commands["demo"] = command{summary: "run every primitive in-process", run: runDemo}
}

func runDemo(ctx context.Context, e *env, args []string) error {
	fs, _ := newFlagSet(e, "demo", "",
		"Runs simulated workers, each with its own session on an in-process memstore:\n"+
			"they contend for a Mutex, share an RWMutex, meet at a DoubleBarrier, elect a\n"+
			"leader and lose it when its session expires, and drain a priority queue.\n"+
			"The timeline shows fencing tokens growing and never two holders at once.")
	if _, _, err := parse(fs, args); err != nil {
		return err
	}
	return (&demo{w: e.stdout, start: time.Now(), srv: memstore.NewServer()}).run(ctx)
}

// demo is one run of the demo: a timeline printer over one shared tree.
type demo struct {
	w     io.Writer
	start time.Time
	srv   *memstore.Server
	mu    gosync.Mutex // serialises lines
}

func (d *demo) say(who, format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ms := time.Since(d.start).Milliseconds()
	fmt.Fprintf(d.w, "%5dms  %-9s %s\n", ms, who, fmt.Sprintf(format, args...))
}

func (d *demo) section(title string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.w, "\n== %s\n", title)
}

// workers opens one session per worker.
func (d *demo) workers(n int) ([]store.Store, func()) {
	ss := make([]store.Store, n)
	for i := range ss {
		ss[i] = d.srv.Open()
	}
	return ss, func() {
		for _, s := range ss {
			s.Close()
		}
	}
}

func (d *demo) run(ctx context.Context) error {
	for _, step := range []func(context.Context) error{d.mutex, d.rwmutex, d.barrier, d.election, d.queue} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	d.section("done: every invariant held")
	return nil
}

// work stands for a critical section: long enough for the others to queue
// up behind the holder.
const work = 20 * time.Millisecond

func (d *demo) mutex(ctx context.Context) error {
	d.section("Mutex: 4 workers, one lock, each takes it twice")
	ss, closeAll := d.workers(4)
	defer closeAll()
	var holders atomic.Int32
	var last atomic.Int64
	return d.each(ss, func(name string, st store.Store) error {
		m := corralsync.NewMutex(st, "/demo/mutex")
		for range 2 {
			if err := m.Lock(ctx); err != nil {
				return err
			}
			if h := holders.Add(1); h != 1 {
				return fmt.Errorf("demo: %d holders of the mutex at once", h)
			}
			tok := m.Token()
			if prev := last.Swap(tok); tok <= prev {
				return fmt.Errorf("demo: token %d after %d", tok, prev)
			}
			d.say(name, "holds the mutex   token=%d", tok)
			time.Sleep(work)
			holders.Add(-1)
			if err := m.Unlock(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

func (d *demo) rwmutex(ctx context.Context) error {
	d.section("RWMutex: 3 readers share, 1 writer excludes them")
	ss, closeAll := d.workers(4)
	defer closeAll()
	var readers, writers atomic.Int32
	return d.each(ss, func(name string, st store.Store) error {
		rw := corralsync.NewRWMutex(st, "/demo/rwmutex")
		if name == "worker-2" {
			if err := rw.Lock(ctx); err != nil {
				return err
			}
			writers.Add(1)
			if r := readers.Load(); r != 0 {
				return fmt.Errorf("demo: writer holds beside %d readers", r)
			}
			d.say(name, "writes            token=%d (alone)", rw.Token())
			time.Sleep(work)
			writers.Add(-1)
			return rw.Unlock(ctx)
		}
		r, err := rw.RLock(ctx)
		if err != nil {
			return err
		}
		n := readers.Add(1)
		if w := writers.Load(); w != 0 {
			return fmt.Errorf("demo: reader holds beside a writer")
		}
		d.say(name, "reads             token=%d (%d reading)", r.Token(), n)
		time.Sleep(work)
		readers.Add(-1)
		return r.Unlock(ctx)
	})
}

func (d *demo) barrier(ctx context.Context) error {
	const n = 3
	d.section(fmt.Sprintf("DoubleBarrier: %d workers start together and finish together", n))
	ss, closeAll := d.workers(n)
	defer closeAll()
	var entered, left atomic.Int32
	return d.each(ss, func(name string, st store.Store) error {
		b := corralsync.NewDoubleBarrier(st, "/demo/barrier", n)
		d.say(name, "enters")
		entered.Add(1)
		if err := b.Enter(ctx); err != nil {
			return err
		}
		if e := entered.Load(); e != n {
			return fmt.Errorf("demo: past Enter with %d of %d entered", e, n)
		}
		d.say(name, "past Enter: all %d are in", n)
		left.Add(1)
		if err := b.Leave(ctx); err != nil {
			return err
		}
		if l := left.Load(); l != n {
			return fmt.Errorf("demo: past Leave with %d of %d leaving", l, n)
		}
		d.say(name, "past Leave: all %d are out", n)
		return nil
	})
}

func (d *demo) election(ctx context.Context) error {
	d.section("Election: 3 candidates; the leader's session expires, the next takes over")
	ss, closeAll := d.workers(3)
	defer closeAll()
	type term struct {
		name string
		lead *election.Leadership
		st   store.Store
	}
	terms := make(chan term)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(ss))
	for i, st := range ss {
		name := fmt.Sprintf("worker-%d", i)
		go func() {
			lead, err := election.New(st, "/demo/election").Campaign(ctx, []byte(name))
			if err != nil {
				errs <- err
				return
			}
			select {
			case terms <- term{name, lead, st}:
			case <-ctx.Done():
				_ = lead.Resign(ctx)
			}
		}()
	}
	var prev *election.Leadership
	for range ss {
		var t term
		select {
		case t = <-terms:
		case err := <-errs:
			if ctx.Err() == nil {
				return err
			}
		case <-time.After(10 * time.Second):
			return errors.New("demo: no leader elected within 10s")
		}
		if prev != nil && prev.Context().Err() == nil {
			return errors.New("demo: two live leaders")
		}
		if prev != nil && t.lead.Token() <= prev.Token() {
			return fmt.Errorf("demo: term %d after %d", t.lead.Token(), prev.Token())
		}
		d.say(t.name, "leads             term=%d", t.lead.Token())
		time.Sleep(work)
		d.say(t.name, "session expires")
		t.st.(*memstore.Store).Expire()
		<-t.lead.Done()
		d.say(t.name, "knows it lost:    %v", context.Cause(t.lead.Context()))
		prev = t.lead
	}
	return nil
}

func (d *demo) queue(ctx context.Context) error {
	d.section("Priority queue: a producer puts, a consumer drains highest first")
	ss, closeAll := d.workers(2)
	defer closeAll()
	prod := queue.New(ss[0], "/demo/queue")
	for i, p := range []int{1, 5, -3, 5, 10} {
		data := fmt.Sprintf("job-%d", i)
		if err := prod.PutPriority(ctx, []byte(data), p); err != nil {
			return err
		}
		d.say("producer", "puts %s priority=%d", data, p)
	}
	cons := queue.New(ss[1], "/demo/queue")
	last := int(^uint(0) >> 1)
	for range 5 {
		it, err := cons.Take(ctx)
		if err != nil {
			return err
		}
		if it.Priority > last {
			return fmt.Errorf("demo: priority %d after %d", it.Priority, last)
		}
		last = it.Priority
		d.say("consumer", "takes %s priority=%d", it.Data, it.Priority)
	}
	return nil
}

// each runs fn for every session as a named worker and returns the first
// error.
func (d *demo) each(ss []store.Store, fn func(name string, st store.Store) error) error {
	var wg gosync.WaitGroup
	errs := make([]error, len(ss))
	for i, st := range ss {
		wg.Go(func() { errs[i] = fn(fmt.Sprintf("worker-%d", i), st) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
