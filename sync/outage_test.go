package sync_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// overrun is what a call may take beyond its ctx: the cleanup grace, and
// scheduling slack on a loaded machine.
const overrun = recipe.CleanupGrace + time.Second

// within fails t unless a call that started at start with a ctx of d
// returned within d plus the documented overrun.
func within(t *testing.T, what string, start time.Time, d time.Duration) {
	t.Helper()
	if took := time.Since(start); took > d+overrun {
		t.Errorf("%s took %v with a %v ctx; want at most %v", what, took.Round(time.Millisecond), d, d+overrun)
	}
}

// TestMutexUnlockDuringOutage: an Unlock that cannot reach the store returns
// within its ctx (plus the grace), says the node will be removed, and does
// not forget it: Unlock does not claim ErrNotLocked while the node is there,
// the session removes it as soon as the link is back, and another session
// then gets the lock. A MultiMutex's Unlock does the same for its members.
func TestMutexUnlockDuringOutage(t *testing.T) {
	// Each kind: a lock on p with KeepOnDisconnect, and the member paths
	// whose nodes the release removes.
	kinds := []struct {
		name  string
		lock  func(st store.Store, p string, opts ...sync.LockOption) (lock, tryLock, unlock func(context.Context) error)
		paths func(p string) []string
	}{
		{"Mutex", func(st store.Store, p string, opts ...sync.LockOption) (lock, tryLock, unlock func(context.Context) error) {
			m := sync.NewMutex(st, p, opts...)
			return m.Lock, tryAsLock(m.TryLock), m.Unlock
		}, func(p string) []string { return []string{p} }},
		{"MultiMutex", func(st store.Store, p string, opts ...sync.LockOption) (lock, tryLock, unlock func(context.Context) error) {
			m := sync.NewMultiMutex(st, []string{p + "/a", p + "/b"}, opts...)
			return m.Lock, tryAsLock(m.TryLock), m.Unlock
		}, func(p string) []string { return []string{p + "/a", p + "/b"} }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			backends.Run(t, func(t *testing.T, b storetest.Backend) {
				d, ok := b.(storetest.Disconnector)
				if !ok {
					t.Skip("backend cannot disconnect")
				}
				sts := backends.Open(t, b, 2)
				p, ctx := lockPath(t), testCtx(t)
				lock, _, unlock := k.lock(sts[0], p, sync.WithDisconnectPolicy(sync.KeepOnDisconnect))
				if err := lock(ctx); err != nil {
					t.Fatalf("Lock(%q) = %v", p, err)
				}
				d.Disconnect(t, sts[0])
				const short = 300 * time.Millisecond
				for i := range 2 {
					uctx, cancel := context.WithTimeout(ctx, short)
					start := time.Now()
					err := unlock(uctx)
					cancel()
					within(t, "Unlock during an outage", start, short)
					if !errors.Is(err, store.ErrDisconnected) || errors.Is(err, sync.ErrNotLocked) {
						t.Fatalf("Unlock #%d during an outage = %v; want store.ErrDisconnected (node to be removed), not ErrNotLocked", i+1, err)
					}
				}
				d.Reconnect(t, sts[0])
				for _, mp := range k.paths(p) {
					waitChildren(t, sts[1], mp, 0)
				}
				if err := unlock(ctx); err != nil {
					t.Errorf("Unlock after the node was removed = %v; want nil (the pending release is done)", err)
				}
				if err := unlock(ctx); !errors.Is(err, sync.ErrNotLocked) {
					t.Errorf("Unlock again = %v; want ErrNotLocked", err)
				}
				_, tryLock, otherUnlock := k.lock(sts[1], p)
				if err := tryLock(ctx); err != nil {
					t.Fatalf("TryLock from another session = %v; want the lock", err)
				}
				if err := otherUnlock(ctx); err != nil {
					t.Errorf("Unlock = %v", err)
				}
			})
		})
	}
}

// tryAsLock turns a TryLock into a call that fails when it gets no lock.
func tryAsLock(try func(context.Context) (bool, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		ok, err := try(ctx)
		if err == nil && !ok {
			err = errors.New("lock held by someone else")
		}
		return err
	}
}

// TestMutexLockCancelledDuringOutage: a Lock whose ctx ends while the link
// is down returns within its ctx (plus the grace) and leaves no node that
// blocks anyone once the link is back.
func TestMutexLockCancelledDuringOutage(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect")
		}
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		holder := sync.NewMutex(sts[1], p)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		m := sync.NewMutex(sts[0], p)
		const short = 500 * time.Millisecond
		lctx, cancel := context.WithTimeout(ctx, short)
		defer cancel()
		got := make(chan error, 1)
		start := time.Now()
		go func() { got <- m.Lock(lctx) }()
		waitChildren(t, sts[1], p, 2)
		d.Disconnect(t, sts[0])
		if err := result(t, got, "Lock"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock during an outage = %v; want context.DeadlineExceeded", err)
		}
		within(t, "Lock during an outage", start, short)
		d.Reconnect(t, sts[0])
		waitChildren(t, sts[1], p, 1)
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		if ok, err := sync.NewMutex(sts[1], p).TryLock(ctx); !ok || err != nil {
			t.Errorf("TryLock after the outage = %v, %v; want true: an orphan blocks the lock", ok, err)
		}
	})
}

// TestLazyHoldAfterDisconnect: a hold nobody watched is already cancelled
// the first time its Context is read after the store reported a lost
// connection (LoseOnDisconnect), not a moment later.
func TestLazyHoldAfterDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect")
		}
		st := backends.Open(t, b, 1)[0]
		p, ctx := lockPath(t), testCtx(t)
		m := sync.NewMutex(st, p)
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		d.Disconnect(t, st)
		select {
		case <-st.Disconnected():
		case <-ctx.Done():
			t.Fatal("the store never reported the disconnection")
		}
		d.Reconnect(t, st)
		if err := m.Context().Err(); err == nil {
			t.Fatalf("Context().Err() after a reported disconnection = nil; want it cancelled")
		}
		if cause := context.Cause(m.Context()); !errors.Is(cause, sync.ErrDisconnected) {
			t.Errorf("cause = %v; want ErrDisconnected", cause)
		}
		if err := m.Unlock(ctx); !errors.Is(err, sync.ErrLockLost) {
			t.Errorf("Unlock = %v; want ErrLockLost", err)
		}
	})
}

// TestLockKeepsCancelCause: a Lock cancelled with a cause returns an error
// that matches both context.Canceled and the cause.
func TestLockKeepsCancelCause(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		holder := sync.NewMutex(sts[0], p)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		defer holder.Unlock(ctx)
		errShutdown := errors.New("test: shutting down")
		lctx, cancel := context.WithCancelCause(ctx)
		got := make(chan error, 1)
		go func() { got <- sync.NewMutex(sts[1], p).Lock(lctx) }()
		waitChildren(t, sts[0], p, 2)
		cancel(errShutdown)
		if err := result(t, got, "Lock"); !errors.Is(err, context.Canceled) || !errors.Is(err, errShutdown) {
			t.Errorf("Lock cancelled with a cause = %v; want context.Canceled and the cause", err)
		}
		lctx, cancel = context.WithCancelCause(ctx)
		cancel(errShutdown)
		if err := sync.NewMutex(sts[1], p).Lock(lctx); !errors.Is(err, errShutdown) {
			t.Errorf("Lock on a ctx cancelled with a cause = %v; want the cause", err)
		}
	})
}

// TestOutageSweep cuts a session off for a sweep of lengths: shorter than a
// second, a few seconds, longer than any bound the code has (the cleanup
// grace, the adapters' attempt and undo bounds, the retry pauses), and
// longer than the session timeout. During each outage a lock call is made
// with a 1 s ctx. Every call must return within its ctx plus the cleanup
// grace (and scheduling slack), and once the link heals (or the session
// ends) no node the call gave up may be left after one session timeout:
// a fresh session then acquires at once. The test logs the worst overrun of
// every case.
func TestOutageSweep(t *testing.T) {
	const session = 3 * time.Second
	outages := []time.Duration{500 * time.Millisecond, 2 * time.Second, 4 * time.Second, session + 2*time.Second}
	bound := recipe.CleanupGrace + time.Second
	var results []backends.OutageResult
	for _, name := range []string{"zk", "etcd"} {
		results = append(results, backends.OutageSweep(t, name, session, bound, outages, lockOutageOps())...)
	}
	for _, r := range results {
		t.Logf("%-4s %-6v %-18s overrun %-8v orphans %d", r.Store, r.Outage, r.Op, r.Overrun.Round(time.Millisecond), r.Orphans)
	}
}

// lockOutageOps are the lock calls of the outage sweep.
func lockOutageOps() []backends.OutageOp {
	tryLock := func(ctx context.Context, st store.Store, dir string) error {
		m := sync.NewMutex(st, dir)
		if ok, err := m.TryLock(ctx); !ok || err != nil {
			return fmt.Errorf("TryLock = %v, %v; want true", ok, err)
		}
		return m.Unlock(ctx)
	}
	// waitBehind makes the call under test wait behind hold (taken on the
	// connected session), cuts the link while it waits, and releases hold
	// once the call has given up.
	waitBehind := func(e *backends.OutageEnv, hold, release func(context.Context) error, call func(context.Context) error) {
		if err := hold(e.Ctx); err != nil {
			e.T.Fatalf("hold: %v", err)
		}
		got := make(chan error, 1)
		go func() { got <- e.Call(call) }()
		backends.WaitChildren(e.T, e.Other, e.Dir, backends.Count(2))
		e.Cut()
		if err := <-got; !errors.Is(err, context.DeadlineExceeded) {
			e.T.Errorf("the call cut off while it waited = %v; want context.DeadlineExceeded", err)
		}
		if err := release(e.Ctx); err != nil {
			e.T.Errorf("release: %v", err)
		}
	}
	return []backends.OutageOp{
		{Name: "Lock", Again: tryLock, Run: func(e *backends.OutageEnv) {
			holder := sync.NewMutex(e.Other, e.Dir)
			waitBehind(e, holder.Lock, holder.Unlock, sync.NewMutex(e.St, e.Dir).Lock)
		}},
		{Name: "Unlock", Again: tryLock, Run: func(e *backends.OutageEnv) {
			m := sync.NewMutex(e.St, e.Dir, sync.WithDisconnectPolicy(sync.KeepOnDisconnect))
			if err := m.Lock(e.Ctx); err != nil {
				e.T.Fatalf("Lock = %v", err)
			}
			e.Cut()
			_ = e.Call(m.Unlock) // ErrDisconnected (left to the session) or nil
		}},
		{Name: "UnlockAfterWait", Again: tryLock, Run: func(e *backends.OutageEnv) {
			// A hold granted after a wait records its release where the
			// store can (store.FrontDeleter): the same delete, one put more.
			first := sync.NewMutex(e.Other, e.Dir)
			if err := first.Lock(e.Ctx); err != nil {
				e.T.Fatalf("Lock(first) = %v", err)
			}
			m := sync.NewMutex(e.St, e.Dir, sync.WithDisconnectPolicy(sync.KeepOnDisconnect))
			got := make(chan error, 1)
			go func() { got <- m.Lock(e.Ctx) }()
			backends.WaitChildren(e.T, e.Other, e.Dir, backends.Count(2))
			if err := first.Unlock(e.Ctx); err != nil {
				e.T.Fatalf("Unlock(first) = %v", err)
			}
			select {
			case err := <-got:
				if err != nil {
					e.T.Fatalf("Lock after a wait = %v", err)
				}
			case <-e.Ctx.Done():
				e.T.Fatalf("Lock after a wait: %v", e.Ctx.Err())
			}
			e.Cut()
			_ = e.Call(m.Unlock) // ErrDisconnected (left to the session) or nil
		}},
		{Name: "TryLock", Again: tryLock, Run: func(e *backends.OutageEnv) {
			e.Cut()
			_ = e.Call(func(ctx context.Context) error {
				m := sync.NewMutex(e.St, e.Dir)
				ok, err := m.TryLock(ctx)
				if ok {
					return m.Unlock(ctx)
				}
				return err
			})
		}},
		{Name: "RLock", Again: func(ctx context.Context, st store.Store, dir string) error {
			rw := sync.NewRWMutex(st, dir)
			if ok, err := rw.TryLock(ctx); !ok || err != nil {
				return fmt.Errorf("TryLock = %v, %v; want true", ok, err)
			}
			return rw.Unlock(ctx)
		}, Run: func(e *backends.OutageEnv) {
			writer := sync.NewRWMutex(e.Other, e.Dir)
			waitBehind(e, writer.Lock, writer.Unlock, func(ctx context.Context) error {
				_, err := sync.NewRWMutex(e.St, e.Dir).RLock(ctx)
				return err
			})
		}},
		{Name: "Semaphore.Acquire", Again: func(ctx context.Context, st store.Store, dir string) error {
			l, ok, err := sync.NewSemaphore(st, dir, 1).TryAcquire(ctx)
			if !ok || err != nil {
				return fmt.Errorf("TryAcquire = %v, %v; want true", ok, err)
			}
			return l.Release(ctx)
		}, Run: func(e *backends.OutageEnv) {
			var lease *sync.Lease
			hold := func(ctx context.Context) (err error) {
				lease, err = sync.NewSemaphore(e.Other, e.Dir, 1).Acquire(ctx)
				return err
			}
			release := func(ctx context.Context) error { return lease.Release(ctx) }
			waitBehind(e, hold, release, func(ctx context.Context) error {
				_, err := sync.NewSemaphore(e.St, e.Dir, 1).Acquire(ctx)
				return err
			})
		}},
	}
}
