package sync_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	gosync "sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

func TestRWMutexReadersShareWritersExclude(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		p, ctx := lockPath(t), testCtx(t)
		r1, r2, w := sync.NewRWMutex(sts[0], p), sync.NewRWMutex(sts[1], p), sync.NewRWMutex(sts[2], p)

		h1, err := r1.RLock(ctx)
		if err != nil {
			t.Fatalf("RLock(%q) = %v", p, err)
		}
		h2, err := r2.RLock(ctx)
		if err != nil {
			t.Fatalf("second RLock(%q) while read-held = %v", p, err)
		}
		if ok, err := w.TryLock(ctx); ok || err != nil {
			t.Errorf("TryLock(%q) while read-held = %v, %v; want false, nil", p, ok, err)
		}
		wgot := make(chan error, 1)
		go func() { wgot <- w.Lock(ctx) }()
		waitChildren(t, sts[0], p, 3)
		// A reader that asks after a waiting writer waits for it.
		if h, ok, err := r1.TryRLock(ctx); ok || h != nil || err != nil {
			t.Errorf("TryRLock(%q) behind a waiting writer = %v, %v, %v; want nil, false, nil", p, h, ok, err)
		}
		if err := h1.Unlock(ctx); err != nil {
			t.Fatalf("read hold's Unlock(%q) = %v", p, err)
		}
		pending(t, wgot, "writer's Lock")
		if err := h2.Unlock(ctx); err != nil {
			t.Fatalf("read hold's Unlock(%q) = %v", p, err)
		}
		if err := result(t, wgot, "writer's Lock"); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		if _, ok, err := r1.TryRLock(ctx); ok || err != nil {
			t.Errorf("TryRLock(%q) while write-held = %v, %v; want false, nil", p, ok, err)
		}
		if err := h1.Unlock(ctx); !errors.Is(err, sync.ErrNotLocked) {
			t.Errorf("read hold's Unlock(%q) again = %v; want ErrNotLocked", p, err)
		}
		if err := r1.Unlock(ctx); !errors.Is(err, sync.ErrNotLocked) {
			t.Errorf("Unlock(%q) not write-held = %v; want ErrNotLocked", p, err)
		}
		tok := w.Token()
		held := w.Context()
		if err := w.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		if cause := context.Cause(held); !errors.Is(cause, sync.ErrUnlocked) {
			t.Errorf("cause after Unlock = %v; want ErrUnlocked", cause)
		}
		h2, err = r2.RLock(ctx)
		if err != nil {
			t.Fatalf("RLock(%q) = %v", p, err)
		}
		if got := h2.Token(); got <= tok {
			t.Errorf("read hold's Token() = %d; want > %d", got, tok)
		}
		if h2.Context().Err() != nil {
			t.Errorf("Context() of a read hold is done: %v", context.Cause(h2.Context()))
		}
		if err := h2.Unlock(ctx); err != nil {
			t.Fatalf("read hold's Unlock(%q) = %v", p, err)
		}
		if got := children(t, sts[0], p); len(got) != 0 {
			t.Errorf("children after all unlocked = %q; want none", got)
		}
	})
}

func TestRWMutexExclusion(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const sessions, goroutines, rounds = 3, 4, 3
		p, ctx := lockPath(t), testCtx(t)
		var mu gosync.Mutex // guards readers and writers
		readers, writers := 0, 0
		var wg gosync.WaitGroup
		errs := make(chan error, sessions*goroutines*rounds)
		enter := func(write bool) {
			mu.Lock()
			defer mu.Unlock()
			if writers > 0 || (write && readers > 0) {
				errs <- fmt.Errorf("write=%v entered with %d readers, %d writers", write, readers, writers)
			}
			if write {
				writers++
			} else {
				readers++
			}
		}
		leave := func(write bool) {
			mu.Lock()
			defer mu.Unlock()
			if write {
				writers--
			} else {
				readers--
			}
		}
		for _, st := range backends.Open(t, b, sessions) {
			rw := sync.NewRWMutex(st, p)
			for g := range goroutines {
				write := g%2 == 0
				lock, unlock := readSide(rw)
				if write {
					lock, unlock = rw.Lock, rw.Unlock
				}
				wg.Go(func() {
					for range rounds {
						if err := lock(ctx); err != nil {
							errs <- fmt.Errorf("lock(write=%v) = %v", write, err)
							return
						}
						enter(write)
						runtime.Gosched()
						leave(write)
						if err := unlock(ctx); err != nil {
							errs <- fmt.Errorf("unlock(write=%v) = %v", write, err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// TestRWMutexWakesOnlyReadersBehind: with W1 holding and R1 R2 R3 W2 R4 R5
// queued, W1's release wakes R1, R2 and R3 and nobody else.
func TestRWMutexWakesOnlyReadersBehind(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		p, ctx := lockPath(t), testCtx(t)
		w1St := backends.Open(t, b, 1)[0]
		w1 := sync.NewRWMutex(w1St, p)
		if err := w1.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		roles := []string{"R1", "R2", "R3", "W2", "R4", "R5"}
		cs := map[string]*countstore.Store{}
		got := map[string]chan error{}
		rws := map[string]*sync.RWMutex{}
		// rholds are the readers' holds, each set by the reader's goroutine
		// and read after its result.
		rholds := map[string]**sync.ReadHold{}
		for i, st := range backends.Open(t, b, len(roles)) {
			role := roles[i]
			c := countstore.New(st)
			t.Cleanup(func() { _ = c.Close() })
			cs[role], got[role], rws[role] = c, make(chan error, 1), sync.NewRWMutex(c, p)
			hold := new(*sync.ReadHold)
			rholds[role] = hold
			rw := rws[role]
			lock := func(ctx context.Context) (err error) { *hold, err = rw.RLock(ctx); return err }
			if role[0] == 'W' {
				lock = rws[role].Lock
			}
			go func() { got[role] <- lock(ctx) }()
			// Queue them in this order, each one watching.
			if err := c.Wait(ctx, func(n countstore.Counts) bool { return n.NodeWatches() > 0 }); err != nil {
				t.Fatal(err)
			}
		}
		if err := w1.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		for _, role := range []string{"R1", "R2", "R3"} {
			if err := result(t, got[role], role+"'s RLock"); err != nil {
				t.Fatalf("%s: RLock(%q) = %v", role, p, err)
			}
		}
		for _, role := range []string{"W2", "R4", "R5"} {
			pending(t, got[role], role+"'s lock")
		}
		for _, role := range roles {
			if err := cs[role].Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// A reader behind W1 is woken once, or not at all if W1 went
			// before its watch was set.
			most := 0
			if role[0] == 'R' && role <= "R3" {
				most = 1
			}
			if n := cs[role].Counts().Wakeups; n > most {
				t.Errorf("%s woken %d times by W1's release; want at most %d", role, n, most)
			}
		}
		// Drain: the readers release, W2 gets it, then R4 and R5.
		for _, role := range []string{"R1", "R2", "R3"} {
			if err := (*rholds[role]).Unlock(ctx); err != nil {
				t.Errorf("%s: read hold's Unlock(%q) = %v", role, p, err)
			}
		}
		if err := result(t, got["W2"], "W2's Lock"); err != nil {
			t.Fatalf("W2: Lock(%q) = %v", p, err)
		}
		if err := rws["W2"].Unlock(ctx); err != nil {
			t.Errorf("W2: Unlock(%q) = %v", p, err)
		}
		for _, role := range []string{"R4", "R5"} {
			if err := result(t, got[role], role+"'s RLock"); err != nil {
				t.Fatalf("%s: RLock(%q) = %v", role, p, err)
			}
			if err := (*rholds[role]).Unlock(ctx); err != nil {
				t.Errorf("%s: read hold's Unlock(%q) = %v", role, p, err)
			}
		}
	})
}

func TestRWMutexWithMutex(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		m, rw := sync.NewMutex(sts[0], p), sync.NewRWMutex(sts[1], p)
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		if _, ok, err := rw.TryRLock(ctx); ok || err != nil {
			t.Errorf("TryRLock(%q) while a Mutex holds = %v, %v; want false, nil", p, ok, err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		r, err := rw.RLock(ctx)
		if err != nil {
			t.Fatalf("RLock(%q) = %v", p, err)
		}
		if ok, err := m.TryLock(ctx); ok || err != nil {
			t.Errorf("Mutex TryLock(%q) while read-held = %v, %v; want false, nil", p, ok, err)
		}
		if err := r.Unlock(ctx); err != nil {
			t.Fatalf("read hold's Unlock(%q) = %v", p, err)
		}
	})
}

func TestRWMutexReaderExpires(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		r := sync.NewRWMutex(sts[0], p, sync.WithDisconnectPolicy(sync.KeepOnDisconnect))
		w := sync.NewRWMutex(sts[1], p)
		rh, err := r.RLock(ctx)
		if err != nil {
			t.Fatalf("RLock(%q) = %v", p, err)
		}
		held := rh.Context()
		wgot := make(chan error, 1)
		go func() { wgot <- w.Lock(ctx) }()
		waitChildren(t, sts[1], p, 2)
		b.Expire(t, sts[0])
		if cause := cancelled(t, held); !expiredCause(cause) {
			t.Errorf("reader's cause = %v; want store.ErrSessionExpired", cause)
		}
		if err := result(t, wgot, "writer's Lock"); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		if err := rh.Unlock(ctx); !errors.Is(err, sync.ErrLockLost) {
			t.Errorf("read hold's Unlock(%q) after expiry = %v; want ErrLockLost", p, err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Errorf("Unlock(%q) = %v", p, err)
		}
	})
}

func TestRWMutexReaderCancelLeavesNoNode(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		w, r := sync.NewRWMutex(sts[0], p), sync.NewRWMutex(sts[1], p)
		if err := w.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		rctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() { _, err := r.RLock(rctx); got <- err }()
		waitChildren(t, sts[0], p, 2)
		cancel()
		if err := result(t, got, "RLock"); !errors.Is(err, context.Canceled) {
			t.Fatalf("RLock(%q) cancelled = %v; want context.Canceled", p, err)
		}
		if got := children(t, sts[0], p); len(got) != 1 {
			t.Errorf("children after cancel = %q; want only the writer", got)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Errorf("Unlock(%q) = %v", p, err)
		}
	})
}

func TestRWMutexRLocker(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 1)
		rw := sync.NewRWMutex(sts[0], lockPath(t))
		rl, wl := rw.RLocker(), rw.Locker()
		rl.Lock()
		rl.Lock() // readers share
		if got := len(children(t, sts[0], rw.Path())); got != 2 {
			t.Errorf("nodes with two read holds = %d; want 2", got)
		}
		rl.Unlock()
		rl.Unlock()
		wl.Lock()
		if rw.Token() < 0 {
			t.Errorf("Token() after Locker().Lock() = %d; want a token", rw.Token())
		}
		wl.Unlock()
		defer func() {
			err, _ := recover().(error)
			if !errors.Is(err, sync.ErrNotLocked) {
				t.Errorf("RLocker().Unlock() of an unheld lock panicked with %v; want ErrNotLocked", err)
			}
		}()
		rl.Unlock()
	})
}

// TestRWMutexForeignReader: a reader node laid out as Curator's
// InterProcessReadWriteLock writes it shares with corral's readers and
// excludes corral's writers.
func TestRWMutexForeignReader(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		if _, err := sts[0].Create(ctx, p+"/_c_0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10-__READ__", nil, store.EphemeralSequential); err != nil {
			t.Fatal(err)
		}
		rw := sync.NewRWMutex(sts[1], p)
		if ok, err := rw.TryLock(ctx); ok || err != nil {
			t.Errorf("TryLock(%q) beside a Curator reader = %v, %v; want false, nil", p, ok, err)
		}
		r, ok, err := rw.TryRLock(ctx)
		if !ok || err != nil {
			t.Fatalf("TryRLock(%q) beside a Curator reader = %v, %v; want true, nil", p, ok, err)
		}
		if err := r.Unlock(ctx); err != nil {
			t.Errorf("read hold's Unlock(%q) = %v", p, err)
		}
	})
}

// readSide returns lock and unlock functions over one read hold of rw at a
// time, for tests that drive readers and writers alike; one goroutine uses
// them.
func readSide(rw *sync.RWMutex) (lock, unlock func(context.Context) error) {
	var r *sync.ReadHold
	lock = func(ctx context.Context) (err error) { r, err = rw.RLock(ctx); return err }
	unlock = func(ctx context.Context) error { return r.Unlock(ctx) }
	return lock, unlock
}

// TestRWMutexReadHoldsAreOwn: two read holds of one RWMutex each have their
// own context, token and release; releasing one ends only its own, and
// releasing it again touches nothing.
func TestRWMutexReadHoldsAreOwn(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := backends.Open(t, b, 1)[0]
		p, ctx := lockPath(t), testCtx(t)
		rw := sync.NewRWMutex(st, p)
		r1, err := rw.RLock(ctx)
		if err != nil {
			t.Fatalf("RLock(%q) = %v", p, err)
		}
		r2, err := rw.RLock(ctx)
		if err != nil {
			t.Fatalf("second RLock(%q) = %v", p, err)
		}
		if r1.Token() >= r2.Token() {
			t.Errorf("Tokens = %d, %d; want the second read hold's greater", r1.Token(), r2.Token())
		}
		if err := r2.Unlock(ctx); err != nil {
			t.Fatalf("second read hold's Unlock(%q) = %v", p, err)
		}
		if cause := context.Cause(r2.Context()); !errors.Is(cause, sync.ErrUnlocked) {
			t.Errorf("second read hold's cause = %v; want ErrUnlocked", cause)
		}
		if err := r1.Context().Err(); err != nil {
			t.Errorf("first read hold's Context ended with the second's Unlock: %v", context.Cause(r1.Context()))
		}
		if err := r2.Unlock(ctx); !errors.Is(err, sync.ErrNotLocked) {
			t.Errorf("second read hold's Unlock(%q) again = %v; want ErrNotLocked", p, err)
		}
		if got := children(t, st, p); len(got) != 1 {
			t.Errorf("children with the first read hold left = %q; want its node only", got)
		}
		if err := r1.Unlock(ctx); err != nil {
			t.Fatalf("first read hold's Unlock(%q) = %v", p, err)
		}
		if got := children(t, st, p); len(got) != 0 {
			t.Errorf("children after both unlocked = %q; want none", got)
		}
	})
}
