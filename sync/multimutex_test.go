package sync_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// memberPaths returns n fresh lock paths for one test, under one parent.
func memberPaths(t *testing.T, n int) []string {
	base := lockPath(t)
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("%s/m%d", base, i)
	}
	return ps
}

// TestMultiMutexOverlapNoDeadlock: sessions lock random overlapping sets of
// four paths, each asked in a random order, beside a plain Mutex on one of
// them; nobody ever waits for ever (the test's timeout), and no path ever
// has two holders.
func TestMultiMutexOverlapNoDeadlock(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const sessions, rounds = 4, 6
		ps, ctx := memberPaths(t, 4), testCtx(t)
		held := make([]atomic.Int32, len(ps))
		enter := func(set []int) error {
			for _, i := range set {
				if !held[i].CompareAndSwap(0, 1) {
					return fmt.Errorf("%q has two holders", ps[i])
				}
			}
			runtime.Gosched() // let another would-be holder in
			for _, i := range set {
				held[i].Store(0)
			}
			return nil
		}
		var wg gosync.WaitGroup
		errs := make(chan error, sessions+1)
		for _, st := range backends.Open(t, b, sessions) {
			wg.Go(func() {
				for range rounds {
					// Two or three of the paths, in a random order.
					idx := rand.Perm(len(ps))[:2+rand.IntN(2)]
					var set []string
					for _, i := range idx {
						set = append(set, ps[i])
					}
					m := sync.NewMultiMutex(st, set)
					if err := m.Lock(ctx); err != nil {
						errs <- fmt.Errorf("Lock(%q) = %v", set, err)
						return
					}
					if err := enter(idx); err != nil {
						errs <- err
					}
					if err := m.Unlock(ctx); err != nil {
						errs <- fmt.Errorf("Unlock(%q) = %v", set, err)
						return
					}
				}
			})
		}
		plain := sync.NewMutex(backends.Open(t, b, 1)[0], ps[2])
		wg.Go(func() {
			for range rounds {
				if err := plain.Lock(ctx); err != nil {
					errs <- fmt.Errorf("Mutex.Lock = %v", err)
					return
				}
				if err := enter([]int{2}); err != nil {
					errs <- err
				}
				if err := plain.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("Mutex.Unlock = %v", err)
					return
				}
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for _, p := range ps {
			if got := children(t, backends.Open(t, b, 1)[0], p); len(got) != 0 {
				t.Errorf("children of %q after every Unlock = %q; want none", p, got)
			}
		}
	})
}

func TestMultiMutexHoldAndTokens(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		ps, ctx := memberPaths(t, 3), testCtx(t)
		// Asked in any order, with a repetition.
		m := sync.NewMultiMutex(sts[0], []string{ps[2], ps[0], ps[1], ps[0]})
		if got := m.Paths(); !slices.Equal(got, ps) {
			t.Errorf("Paths() = %q; want %q", got, ps)
		}
		if got := context.Cause(m.Context()); !errors.Is(got, sync.ErrNotLocked) {
			t.Errorf("Context() before Lock: cause %v; want ErrNotLocked", got)
		}
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock = %v", err)
		}
		held := m.Context()
		if held.Err() != nil {
			t.Fatalf("Context() after Lock ended: %v", context.Cause(held))
		}
		toks := map[string]int64{}
		for _, p := range ps {
			if toks[p] = m.Token(p); toks[p] < 0 {
				t.Errorf("Token(%q) = %d; want a token", p, toks[p])
			}
			// Each member is an ordinary lock.
			if ok, err := sync.NewMutex(sts[1], p).TryLock(ctx); ok || err != nil {
				t.Errorf("Mutex(%q).TryLock while the MultiMutex holds = %v, %v; want false, nil", p, ok, err)
			}
		}
		if got := m.Token("/not/a/member"); got != -1 {
			t.Errorf("Token(non-member) = %d; want -1", got)
		}
		if ok, err := m.TryLock(ctx); ok || err != nil {
			t.Errorf("TryLock on the holding MultiMutex = %v, %v; want false, nil", ok, err)
		}
		other := sync.NewMultiMutex(sts[1], []string{ps[1], "/synctest/elsewhere"})
		if ok, err := other.TryLock(ctx); ok || err != nil {
			t.Errorf("TryLock of an overlapping set = %v, %v; want false, nil", ok, err)
		}
		if got := children(t, sts[1], "/synctest/elsewhere"); len(got) != 0 {
			t.Errorf("a failed TryLock left %q", got)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock = %v", err)
		}
		if got := context.Cause(held); !errors.Is(got, sync.ErrUnlocked) {
			t.Errorf("cause after Unlock = %v; want ErrUnlocked", got)
		}
		if err := m.Unlock(ctx); !errors.Is(err, sync.ErrNotLocked) {
			t.Errorf("second Unlock = %v; want ErrNotLocked", err)
		}
		for _, p := range ps {
			if got := children(t, sts[0], p); len(got) != 0 {
				t.Errorf("children of %q after Unlock = %q; want none", p, got)
			}
		}
		// The next grant of each member has a greater token, to a Mutex
		// as well.
		mu := sync.NewMutex(sts[1], ps[1])
		if err := mu.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if got := mu.Token(); got <= toks[ps[1]] {
			t.Errorf("Mutex token after the MultiMutex = %d; want > %d", got, toks[ps[1]])
		}
		if err := mu.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMultiMutexCancelLeavesNoNode: a MultiMutex that holds its first member
// and waits for the second gives up; it releases the first and leaves no
// node in any member.
func TestMultiMutexCancelLeavesNoNode(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		ps, ctx := memberPaths(t, 3), testCtx(t)
		holder := sync.NewMutex(sts[0], ps[1])
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		want := children(t, sts[0], ps[1])

		cctx, cancel := context.WithCancelCause(ctx)
		why := errors.New("caller gave up")
		got := make(chan error, 1)
		go func() { got <- sync.NewMultiMutex(sts[1], ps).Lock(cctx) }()
		waitChildren(t, sts[0], ps[0], 1) // holds the first member
		waitChildren(t, sts[0], ps[1], 2) // waits for the second
		pending(t, got, "Lock")
		cancel(why)
		err := result(t, got, "Lock")
		if !errors.Is(err, context.Canceled) || !errors.Is(err, why) {
			t.Fatalf("cancelled Lock = %v; want context.Canceled and its cause", err)
		}
		for i, p := range ps {
			w := []string(nil)
			if i == 1 {
				w = want
			}
			if got := children(t, sts[0], p); !slices.Equal(got, w) && !(len(got) == 0 && len(w) == 0) {
				t.Errorf("children of %q after the cancel = %q; want %q", p, got, w)
			}
		}

		// Giving up at random moments: before, during or after any create.
		for i := range 15 {
			wctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(4000))*time.Microsecond)
			err := sync.NewMultiMutex(sts[2], ps).Lock(wctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d: timed-out Lock = %v; want context.DeadlineExceeded", i, err)
			}
			settle(t, sts[2], sts[0], ps[1], want)
			settle(t, sts[2], sts[0], ps[0], nil)
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		m := sync.NewMultiMutex(sts[1], ps)
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock after the holder left = %v", err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMultiMutexMemberLost: the hold ends as soon as one member is lost, and
// its cause says which member and why.
func TestMultiMutexMemberLost(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		ps, ctx := memberPaths(t, 3), testCtx(t)
		m := sync.NewMultiMutex(sts[0], ps)
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		held := m.Context()
		kids := children(t, sts[1], ps[1])
		if len(kids) != 1 {
			t.Fatalf("children of %q = %q; want the holder's", ps[1], kids)
		}
		// An operator deletes one member's node.
		if err := sts[1].Delete(ctx, ps[1]+"/"+kids[0]); err != nil {
			t.Fatal(err)
		}
		cause := cancelled(t, held)
		var me *sync.MemberError
		if !errors.As(cause, &me) || me.Path != ps[1] || !errors.Is(cause, sync.ErrNodeDeleted) {
			t.Fatalf("cause = %v; want a *MemberError for %q wrapping ErrNodeDeleted", cause, ps[1])
		}
		err := m.Unlock(ctx)
		if !errors.Is(err, sync.ErrLockLost) || !errors.As(err, &me) || me.Path != ps[1] {
			t.Errorf("Unlock after the loss = %v; want ErrLockLost and the member %q", err, ps[1])
		}
		for _, p := range ps {
			if got := children(t, sts[1], p); len(got) != 0 {
				t.Errorf("children of %q after Unlock = %q; want none", p, got)
			}
		}
	})
}

func TestMultiMutexSessionExpires(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		ps, ctx := memberPaths(t, 2), testCtx(t)
		m := sync.NewMultiMutex(sts[0], ps, sync.WithDisconnectPolicy(sync.KeepOnDisconnect))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		held := m.Context()
		// A waiter behind it gets every member once the session is gone.
		waiter := sync.NewMultiMutex(sts[1], ps)
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }()
		waitChildren(t, sts[1], ps[0], 2)
		b.Expire(t, sts[0])
		cause := cancelled(t, held)
		var me *sync.MemberError
		if !errors.As(cause, &me) || !slices.Contains(ps, me.Path) || !expiredCause(cause) {
			t.Errorf("cause = %v; want a *MemberError wrapping the expiry", cause)
		}
		if err := result(t, got, "waiter's Lock"); err != nil {
			t.Fatalf("waiter's Lock = %v", err)
		}
		if err := m.Unlock(ctx); !errors.Is(err, sync.ErrLockLost) {
			t.Errorf("Unlock after expiry = %v; want ErrLockLost", err)
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Errorf("waiter's Unlock = %v", err)
		}
	})
}

func TestMultiMutexMisuse(t *testing.T) {
	ctx := testCtx(t)
	st := memstore.New()
	defer st.Close()
	var zero sync.MultiMutex
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"zero Lock", func() error { return zero.Lock(ctx) }, store.ErrInvalidArgument},
		{"zero Unlock", func() error { return zero.Unlock(ctx) }, store.ErrInvalidArgument},
		{"nil Lock", func() error { return (*sync.MultiMutex)(nil).Lock(ctx) }, store.ErrInvalidArgument},
		{"nil Unlock", func() error { return (*sync.MultiMutex)(nil).Unlock(ctx) }, store.ErrInvalidArgument},
		{"the root", func() error { return sync.NewMultiMutex(st, []string{"/"}).Lock(ctx) }, store.ErrInvalidPath},
		{"the root among others", func() error { _, err := sync.NewMultiMutex(st, []string{"/a", "/"}).TryLock(ctx); return err }, store.ErrInvalidPath},
		{"nil store", func() error { return sync.NewMultiMutex(nil, []string{"/a"}).Lock(ctx) }, store.ErrInvalidArgument},
		{"no path", func() error { return sync.NewMultiMutex(st, nil).Lock(ctx) }, store.ErrInvalidArgument},
		{"invalid path", func() error { return sync.NewMultiMutex(st, []string{"/a", "b/"}).Lock(ctx) }, store.ErrInvalidPath},
		{"nested", func() error { return sync.NewMultiMutex(st, []string{"/a/b", "/a"}).Lock(ctx) }, store.ErrInvalidArgument},
		{"nested TryLock", func() error { _, err := sync.NewMultiMutex(st, []string{"/x", "/x/y"}).TryLock(ctx); return err }, store.ErrInvalidArgument},
		{"Unlock unheld", func() error { return sync.NewMultiMutex(st, []string{"/a"}).Unlock(ctx) }, sync.ErrNotLocked},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s = %v; want %v", tt.name, err, tt.want)
		}
	}
	if got := zero.Token("/a"); got != -1 {
		t.Errorf("zero Token = %d; want -1", got)
	}
	// Siblings whose names share a prefix are not nested.
	m := sync.NewMultiMutex(st, []string{"/a", "/ab"})
	if err := m.Lock(ctx); err != nil {
		t.Errorf("Lock(/a, /ab) = %v", err)
	} else if err := m.Unlock(ctx); err != nil {
		t.Error(err)
	}
}
