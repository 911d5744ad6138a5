package sync_test

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// TestGuards: every hold's Guard names its own node, path and Seq, while
// it is held, and is the zero Guard once released (or before a grant).
func TestGuards(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		ctx := testCtx(t)
		// check checks g while held, releases with release, and then
		// checks after, the guard that after returns.
		check := func(name string, g store.Guard, release func() error, after func() store.Guard) {
			t.Helper()
			n, err := st.Get(ctx, g.Path)
			if err != nil || n.Seq != g.Seq || g.IsZero() {
				t.Errorf("%s: Guard = %+v; node there %+v, %v; want the held node", name, g, n, err)
			}
			if err := release(); err != nil {
				t.Fatalf("%s: release = %v", name, err)
			}
			if _, err := st.Get(ctx, g.Path); !errors.Is(err, store.ErrNoNode) {
				t.Errorf("%s: the guard's node is still there after the release: %v", name, err)
			}
			if after != nil {
				if g := after(); !g.IsZero() {
					t.Errorf("%s: Guard after the release = %+v; want the zero Guard", name, g)
				}
			}
		}
		p := lockPath(t)

		m := sync.NewMutex(st, p+"/mutex")
		if !m.Guard().IsZero() {
			t.Errorf("Mutex.Guard before Lock = %+v; want zero", m.Guard())
		}
		must(t, m.Lock(ctx))
		check("Mutex", m.Guard(), func() error { return m.Unlock(ctx) }, m.Guard)

		rw := sync.NewRWMutex(st, p+"/rw")
		must(t, rw.Lock(ctx))
		check("RWMutex", rw.Guard(), func() error { return rw.Unlock(ctx) }, rw.Guard)
		r, err := rw.RLock(ctx)
		must(t, err)
		check("ReadHold", r.Guard(), func() error { return r.Unlock(ctx) }, nil)

		l, err := sync.NewSemaphore(st, p+"/sem", 2).Acquire(ctx)
		must(t, err)
		check("Lease", l.Guard(), func() error { return l.Release(ctx) }, nil)

		s, err := sync.NewStripedMutex(st, p+"/striped", 2).Lock(ctx)
		must(t, err)
		check("Stripe", s.Guard(), func() error { return s.Unlock(ctx) }, nil)

		mm := sync.NewMultiMutex(st, []string{p + "/m/a", p + "/m/b"})
		must(t, mm.Lock(ctx))
		a := mm.Guard(p + "/m/a")
		if g := mm.Guard(p + "/m/c"); !g.IsZero() {
			t.Errorf("MultiMutex.Guard of no member = %+v; want zero", g)
		}
		check("MultiMutex", a, func() error { return mm.Unlock(ctx) }, func() store.Guard { return mm.Guard(p + "/m/a") })

		lead, err := election.New(st, p+"/election").Campaign(ctx, []byte("me"))
		must(t, err)
		check("Leadership", lead.Guard(), func() error { return lead.Resign(ctx) }, nil)

		ms, err := group.Join(ctx, st, p+"/group", []byte("me"))
		must(t, err)
		check("Membership", ms.Guard(), func() error { return ms.Leave(ctx) }, nil)

		pm, err := partition.Join(ctx, st, p+"/partition", 1, "me")
		must(t, err)
		shard := make(chan *partition.Shard, 1)
		ran := backends.Async(func() error {
			return pm.Run(ctx, func(ctx context.Context, s *partition.Shard) error {
				shard <- s
				<-ctx.Done()
				return nil
			})
		})
		sh := <-shard
		check("Shard", sh.Guard(), func() error { return pm.Leave(ctx) }, nil)
		must(t, <-ran)

		for name, g := range map[string]store.Guard{
			"zero ReadHold": new(sync.ReadHold).Guard(), "zero Lease": new(sync.Lease).Guard(),
			"zero Stripe": new(sync.Stripe).Guard(), "zero Leadership": new(election.Leadership).Guard(),
			"zero Membership": new(group.Membership).Guard(), "zero Shard": new(partition.Shard).Guard(),
			"nil Mutex": (*sync.Mutex)(nil).Guard(), "nil MultiMutex": (*sync.MultiMutex)(nil).Guard(p),
		} {
			if !g.IsZero() {
				t.Errorf("%s: Guard = %+v; want zero", name, g)
			}
		}
	})
}
