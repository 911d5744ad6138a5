package inspect_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

func TestMain(m *testing.M) { backends.Main(m) }

const timeout = 30 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func dir(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/inspecttest/%s-%08x", name, rand.Uint32())
}

func wait(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s = %v", what, err)
		}
	case <-time.After(timeout):
		t.Fatalf("%s did not return in %v", what, timeout)
	}
}

func read(t *testing.T, st store.Store, p string) inspect.Report {
	t.Helper()
	rep, err := inspect.Read(testCtx(t), st, p)
	if err != nil {
		t.Fatalf("Read(%q) = %v", p, err)
	}
	return rep
}

// who describes contenders as "label/mode" for comparisons.
func who(cs []inspect.Contender) []string {
	out := []string{}
	for _, c := range cs {
		l := "?"
		if c.Identity != nil {
			l = c.Identity.Label
		} else if len(c.Data) > 0 {
			l = string(c.Data)
		}
		out = append(out, l+"/"+string(c.Mode))
	}
	return out
}

func want(t *testing.T, rep inspect.Report, kind inspect.Kind, holders, waiters []string) {
	t.Helper()
	if rep.Kind != kind || !slices.Equal(who(rep.Holders), holders) || !slices.Equal(who(rep.Waiters), waiters) {
		t.Errorf("Read(%q) = %v holders %v waiters %v; want %v holders %v waiters %v",
			rep.Path, rep.Kind, who(rep.Holders), who(rep.Waiters), kind, holders, waiters)
	}
	all := slices.Concat(rep.Holders, rep.Waiters)
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq && rep.Kind != inspect.Semaphore {
			t.Errorf("Read(%q): contender %d has Seq %d after %d; want increasing", rep.Path, i, all[i].Seq, all[i-1].Seq)
		}
	}
}

// checkIdentity checks that c carries this process's identity record,
// started between before and now, from session st.
func checkIdentity(t *testing.T, c inspect.Contender, st store.Store, before time.Time) {
	t.Helper()
	host, _ := os.Hostname()
	id := c.Identity
	if id == nil {
		t.Fatalf("contender %s has no identity (data %q)", c.Name, c.Data)
	}
	if id.Host != host || id.PID != os.Getpid() {
		t.Errorf("identity of %s = %+v; want host %q pid %d", c.Name, *id, host, os.Getpid())
	}
	if id.Start.Before(before.Truncate(time.Millisecond)) || id.Start.After(time.Now()) || !c.Since.Equal(id.Start) {
		t.Errorf("identity of %s starts %v (Since %v); want between %v and now", c.Name, id.Start, c.Since, before)
	}
	if c.Session != st.SessionID() {
		t.Errorf("session of %s = %#x; want %#x", c.Name, c.Session, st.SessionID())
	}
}

// TestLock: holder and waiters of a Mutex, in order, with their identity,
// as the lock changes hands.
func TestLock(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		p, ctx := dir(t), testCtx(t)
		before := time.Now()
		ms := make([]*sync.Mutex, 3)
		for i, l := range []string{"first", "second", "third"} {
			ms[i] = sync.NewMutex(sts[i], p, sync.WithLabel(l))
		}
		if err := ms[0].Lock(ctx); err != nil {
			t.Fatal(err)
		}
		second := backends.Async(func() error { return ms[1].Lock(ctx) })
		backends.WaitChildren(t, sts[0], p, backends.Count(2))
		third := backends.Async(func() error { return ms[2].Lock(ctx) })
		backends.WaitChildren(t, sts[0], p, backends.Count(3))

		rep := read(t, sts[0], p)
		want(t, rep, inspect.Lock, []string{"first/exclusive"}, []string{"second/exclusive", "third/exclusive"})
		for i, c := range slices.Concat(rep.Holders, rep.Waiters) {
			checkIdentity(t, c, sts[i], before)
		}
		if got := rep.Holders[0].Seq; got != ms[0].Token() {
			t.Errorf("holder's Seq = %d; want its token %d", got, ms[0].Token())
		}
		// The record's start has millisecond precision.
		if age, most := rep.Waiters[1].Age(rep.Time), rep.Time.Sub(before.Truncate(time.Millisecond)); age <= 0 || age > most {
			t.Errorf("waiter's Age = %v; want in (0, %v]", age, most)
		}

		if err := ms[0].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wait(t, second, "second Lock")
		want(t, read(t, sts[0], p), inspect.Lock, []string{"second/exclusive"}, []string{"third/exclusive"})
		if err := ms[1].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wait(t, third, "third Lock")
		want(t, read(t, sts[0], p), inspect.Lock, []string{"third/exclusive"}, []string{})
		if err := ms[2].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// The lock's directory went with its last node.
		backends.WaitGone(t, sts[0], p)
		if _, err := inspect.Read(ctx, sts[0], p); !errors.Is(err, store.ErrNoNode) {
			t.Errorf("Read(%q) after the last Unlock = %v; want %v", p, err, store.ErrNoNode)
		}
	})
}

// TestRWMutex: readers hold together; a writer waits for them, and a reader
// that asks after it waits for the writer.
func TestRWMutex(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 4)
		p, ctx := dir(t), testCtx(t)
		rws := make([]*sync.RWMutex, 4)
		for i, l := range []string{"r1", "r2", "w", "r3"} {
			rws[i] = sync.NewRWMutex(sts[i], p, sync.WithLabel(l))
		}
		var reads []*sync.ReadHold
		for _, rw := range rws[:2] {
			r, err := rw.RLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			reads = append(reads, r)
		}
		w := backends.Async(func() error { return rws[2].Lock(ctx) })
		backends.WaitChildren(t, sts[0], p, backends.Count(3))
		var third *sync.ReadHold // set before r3 reports
		r3 := backends.Async(func() (err error) { third, err = rws[3].RLock(ctx); return err })
		backends.WaitChildren(t, sts[0], p, backends.Count(4))
		want(t, read(t, sts[0], p), inspect.Lock, []string{"r1/read", "r2/read"}, []string{"w/write", "r3/read"})

		for _, r := range reads {
			if err := r.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		wait(t, w, "writer's Lock")
		want(t, read(t, sts[0], p), inspect.Lock, []string{"w/write"}, []string{"r3/read"})
		if err := rws[2].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wait(t, r3, "third RLock")
		want(t, read(t, sts[0], p), inspect.Lock, []string{"r3/read"}, []string{})
		if err := third.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSemaphore: the first n leases hold, the others wait; n is read from
// the semaphore's node.
func TestSemaphore(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		p, ctx := dir(t), testCtx(t)
		var leases []*sync.Lease
		for i, l := range []string{"a", "b"} {
			lease, err := sync.NewSemaphore(sts[i], p, 2, sync.WithLabel(l)).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, lease)
		}
		var third *sync.Lease
		got := backends.Async(func() (err error) {
			third, err = sync.NewSemaphore(sts[2], p, 2, sync.WithLabel("c")).Acquire(ctx)
			return err
		})
		backends.WaitChildren(t, sts[0], p, backends.Count(3))
		rep := read(t, sts[0], p)
		want(t, rep, inspect.Semaphore, []string{"a/lease", "b/lease"}, []string{"c/lease"})
		if rep.Limit != 2 {
			t.Errorf("Limit = %d; want 2", rep.Limit)
		}
		if err := leases[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		wait(t, got, "third Acquire")
		rep = read(t, sts[0], p)
		want(t, rep, inspect.Semaphore, []string{"b/lease", "c/lease"}, []string{})
		// The touch that handed the line on kept the record.
		for _, c := range rep.Holders {
			if c.Identity == nil {
				t.Errorf("lease %s lost its identity record: data %q", c.Name, c.Data)
			}
		}
		for _, l := range []*sync.Lease{leases[1], third} {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestElection: the leader first, then the candidates; their values are
// their identity, and a value that is an identity record is parsed.
func TestElection(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := dir(t), testCtx(t)
		lead, err := election.New(sts[0], p).Campaign(ctx, []byte("host-a:8080"))
		if err != nil {
			t.Fatal(err)
		}
		var second *election.Leadership
		got := backends.Async(func() (err error) {
			second, err = election.New(sts[1], p).Campaign(ctx, inspect.IdentityRecord("b"))
			return err
		})
		backends.WaitChildren(t, sts[0], p, backends.Count(2))
		rep := read(t, sts[0], p)
		want(t, rep, inspect.Election, []string{"host-a:8080/candidate"}, []string{"b/candidate"})
		if rep.Holders[0].Seq != lead.Token() {
			t.Errorf("leader's Seq = %d; want its token %d", rep.Holders[0].Seq, lead.Token())
		}
		if err := lead.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		wait(t, got, "second Campaign")
		want(t, read(t, sts[0], p), inspect.Election, []string{"b/candidate"}, []string{})
		if err := second.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDoubleBarrier: members wait until the round is released, and then
// hold.
func TestDoubleBarrier(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := dir(t), testCtx(t)
		a := sync.NewDoubleBarrier(sts[0], p, 2, sync.WithLabel("a"))
		bb := sync.NewDoubleBarrier(sts[1], p, 2, sync.WithLabel("b"))
		entered := backends.Async(func() error { return a.Enter(ctx) })
		backends.WaitChildren(t, sts[0], p, backends.Count(1))
		rep := read(t, sts[0], p)
		want(t, rep, inspect.DoubleBarrier, []string{}, []string{"a/member"})
		if rep.Limit != 2 {
			t.Errorf("Limit = %d; want 2", rep.Limit)
		}
		if err := bb.Enter(ctx); err != nil {
			t.Fatal(err)
		}
		wait(t, entered, "first Enter")
		want(t, read(t, sts[0], p), inspect.DoubleBarrier, []string{"a/member", "b/member"}, []string{})
		left := backends.Async(func() error { return a.Leave(ctx) })
		if err := bb.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		wait(t, left, "first Leave")
	})
}

// prioKey is the priority key of an item name (internal/names/item.go),
// written out here on purpose: this test writes a layout of an earlier
// corral (items without ids) as it is on the wire.
func prioKey(p int64) uint64 { return ^(uint64(p) ^ (uint64(1) << 63)) }

// TestQueue: depth by priority and claims, from a layout written directly.
func TestQueue(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := dir(t), testCtx(t)
		var names []string
		for _, prio := range []int64{10, 0, 10, -5} {
			n, err := sts[0].Create(ctx, fmt.Sprintf("%s/items/qi-%016x-", p, prioKey(prio)), []byte("job"), store.Sequential)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, n.Name())
		}
		if _, err := sts[0].Create(ctx, p+"/items/not-an-item", nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		claim := p + "/claims/" + names[0]
		if _, err := sts[1].Create(ctx, claim, inspect.IdentityRecord("worker"), store.Ephemeral); err != nil {
			t.Fatal(err)
		}
		rep := read(t, sts[0], p)
		q := rep.Queue
		if rep.Kind != inspect.Queue || q == nil {
			t.Fatalf("Read = %v %+v; want a queue", rep.Kind, q)
		}
		wantLevels := []inspect.Level{{Priority: 10, Items: 2, Claimed: 1}, {Priority: 0, Items: 1}, {Priority: -5, Items: 1}}
		if q.Items != 4 || q.Claimed != 1 || !slices.Equal(q.Levels, wantLevels) {
			t.Errorf("queue = %d items, %d claimed, levels %+v; want 4, 1, %+v", q.Items, q.Claimed, q.Levels, wantLevels)
		}
		if len(q.Claims) != 1 || q.Claims[0].Item != names[0] || q.Claims[0].Priority != 10 ||
			q.Claims[0].Session != sts[1].SessionID() || q.Claims[0].Identity == nil || q.Claims[0].Identity.Label != "worker" {
			t.Fatalf("claims = %+v; want %s claimed by session %#x, worker", q.Claims, names[0], sts[1].SessionID())
		}
		if s := q.Claims[0].Since; s.Before(before.Truncate(time.Millisecond)) {
			t.Errorf("claim Since = %v; want after %v", s, before)
		}
		// The claim's session ends: the item is no longer claimed.
		if err := sts[1].Close(); err != nil {
			t.Fatal(err)
		}
		backends.WaitChildren(t, sts[0], p+"/claims", backends.Count(0))
		if q := read(t, sts[0], p).Queue; q.Claimed != 0 || len(q.Claims) != 0 || q.Items != 4 {
			t.Errorf("after the claim's session ended: %+v; want 4 items, none claimed", q)
		}
	})
}

// TestForeign: other clients' contenders are shown with what is known of
// them, and their data is never taken for an identity record.
func TestForeign(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := dir(t), testCtx(t)
		// Curator's lock stores the host address; another client anything.
		curator, err := sts[0].Create(ctx, p+"/lock-", []byte("10.1.2.3"), store.EphemeralSequential)
		if err != nil {
			t.Fatal(err)
		}
		for _, data := range [][]byte{{0xff, '{', 0}, []byte(`{"host":"h"}`), nil} {
			if _, err := sts[1].Create(ctx, p+"/lock-", data, store.EphemeralSequential); err != nil {
				t.Fatal(err)
			}
		}
		rep := read(t, sts[0], p)
		want(t, rep, inspect.Lock, []string{"10.1.2.3/exclusive"}, []string{"\xff{\x00/exclusive", `{"host":"h"}/exclusive`, "?/exclusive"})
		for _, c := range slices.Concat(rep.Holders, rep.Waiters) {
			if c.Identity != nil {
				t.Errorf("foreign contender %s has identity %+v", c.Name, c.Identity)
			}
		}
		// Its Seq is its fencing token, as the store reads it (on
		// ZooKeeper, its directory's creation zxid plus its Seq).
		h := rep.Holders[0]
		tok, err := sts[1].Get(ctx, curator.Path)
		if err != nil {
			t.Fatal(err)
		}
		if h.Session != sts[0].SessionID() || h.Seq != tok.Fence() {
			t.Errorf("holder = %+v; want session %#x, Seq %d", h, sts[0].SessionID(), tok.Fence())
		}
		// The creation time stands in for the start where the store keeps
		// it: ZooKeeper and memstore, not etcd.
		if n, err := sts[0].Get(ctx, p+"/"+h.Name); err != nil || !h.Since.Equal(n.Created) {
			t.Errorf("holder Since = %v; want the node's creation %v (%v)", h.Since, n.Created, err)
		}

		// etcd's concurrency.Mutex names its keys by lease ID, with no
		// data and no marker.
		q := dir(t)
		if _, err := sts[0].Create(ctx, q+"/694d7a2b3c4d5e6f", nil, store.Ephemeral); err != nil {
			t.Fatal(err)
		}
		rep = read(t, sts[0], q)
		if rep.Kind != inspect.Foreign || len(rep.Holders) != 1 || rep.Holders[0].Data != nil {
			t.Errorf("Read(etcd-style key) = %v holders %+v; want one foreign holder without data", rep.Kind, rep.Holders)
		}
	})
}

// TestWalk: every recipe below a path, in name order; nothing else.
func TestWalk(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := backends.Open(t, b, 1)[0]
		root, ctx := dir(t), testCtx(t)
		m := sync.NewMutex(st, root+"/b/lock")
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer m.Unlock(ctx)
		lease, err := sync.NewSemaphore(st, root+"/a/sem", 3).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
		if _, err := st.Create(ctx, fmt.Sprintf("%s/c/q/items/qi-%016x-", root, prioKey(1)), nil, store.Sequential); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(ctx, root+"/d/plain", []byte("x"), store.Persistent); err != nil {
			t.Fatal(err)
		}
		// A directory with a child named config is no queue (ZooKeeper's
		// own /zookeeper has one), unless the config is a queue's.
		if _, err := st.Create(ctx, root+"/e/settings/config", []byte("version=0"), store.Persistent); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(ctx, root+"/f/q/config", []byte("corral queue 1\ndelivery: at-least-once\n"), store.Persistent); err != nil {
			t.Fatal(err)
		}
		// A group's members are its sessions' nodes; a directory
		// below it is none.
		gm, err := group.Join(ctx, st, root+"/g", []byte("a"))
		if err != nil {
			t.Fatal(err)
		}
		defer gm.Leave(ctx)
		if _, err := st.Create(ctx, root+"/g/sub/x", nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		var got []string
		err = inspect.Walk(ctx, st, root, func(r inspect.Report) error {
			got = append(got, fmt.Sprintf("%s %v %d", strings.TrimPrefix(r.Path, root), r.Kind, len(r.Holders)))
			return nil
		})
		if w := []string{"/a/sem semaphore 1", "/b/lock lock 1", "/c/q queue 0", "/f/q queue 0", "/g group 1"}; err != nil || !slices.Equal(got, w) {
			t.Errorf("Walk = %q, %v; want %q", got, err, w)
		}
		stop := errors.New("stop")
		if err := inspect.Walk(ctx, st, root, func(inspect.Report) error { return stop }); err != stop {
			t.Errorf("Walk with a failing fn = %v; want its error", err)
		}
		if err := inspect.Walk(ctx, st, root+"/missing", func(inspect.Report) error { return nil }); !errors.Is(err, store.ErrNoNode) {
			t.Errorf("Walk(missing) = %v; want store.ErrNoNode", err)
		}
		if _, err := inspect.Read(ctx, st, "bad"); !errors.Is(err, store.ErrInvalidPath) {
			t.Errorf("Read(bad) = %v; want store.ErrInvalidPath", err)
		}
	})
}

// TestWatch: a Watcher reports the root missing, then each change.
func TestWatch(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		root, ctx := dir(t), testCtx(t)
		w := inspect.Watch(ctx, sts[0], root)
		defer w.Close()
		next := func(what string, ok func([]inspect.Report) bool) {
			t.Helper()
			var last []inspect.Report
			for {
				select {
				case reps, open := <-w.Reports():
					if !open {
						t.Fatalf("Watcher stopped before %s: %v", what, w.Err())
					}
					if ok(reps) {
						return
					}
					last = reps
				case <-ctx.Done():
					t.Fatalf("Watcher never reported %s; last %+v", what, last)
				}
			}
		}
		next("nothing", func(r []inspect.Report) bool { return len(r) == 0 })
		m1 := sync.NewMutex(sts[0], root+"/lock", sync.WithLabel("one"))
		if err := m1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		next("the holder", func(r []inspect.Report) bool {
			return len(r) == 1 && slices.Equal(who(r[0].Holders), []string{"one/exclusive"}) && len(r[0].Waiters) == 0
		})
		m2 := sync.NewMutex(sts[1], root+"/lock", sync.WithLabel("two"))
		got := backends.Async(func() error { return m2.Lock(ctx) })
		next("the waiter", func(r []inspect.Report) bool { return len(r) == 1 && len(r[0].Waiters) == 1 })
		if err := m1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wait(t, got, "second Lock")
		next("the hand-over", func(r []inspect.Report) bool {
			return len(r) == 1 && slices.Equal(who(r[0].Holders), []string{"two/exclusive"}) && len(r[0].Waiters) == 0
		})
		if err := m2.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if err := w.Err(); !errors.Is(err, inspect.ErrWatcherClosed) {
			t.Errorf("Err after Close = %v; want ErrWatcherClosed", err)
		}
	})
}
