package sync_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

type stripeResult struct {
	s   *sync.Stripe
	err error
}

// stripeLock starts sm.Lock(ctx, stripes...) and waits until it waits: in a
// line and, when it can be handed a stripe, watching its registration. cs
// must be sm's store.
func stripeLock(t *testing.T, ctx context.Context, cs *countstore.Store, sm *sync.StripedMutex, stripes ...int) <-chan stripeResult {
	t.Helper()
	ch := make(chan stripeResult, 1)
	before := cs.Counts().NodeWatches()
	go func() {
		s, err := sm.Lock(ctx, stripes...)
		ch <- stripeResult{s, err}
	}()
	watches := 1 // the contender before it
	if len(stripes) == 0 && sm.Stripes() > 1 {
		watches = 2 // and its own node, for a hand-over
	}
	if err := cs.Wait(ctx, func(c countstore.Counts) bool { return c.NodeWatches() >= before+watches }); err != nil {
		t.Fatalf("Lock does not wait: %v", err)
	}
	return ch
}

func stripeGot(t *testing.T, ch <-chan stripeResult, what string) *sync.Stripe {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: Lock = %v; want a stripe", what, r.err)
		}
		return r.s
	case <-time.After(timeout):
		t.Fatalf("%s: Lock did not return", what)
		return nil
	}
}

func stripePending(t *testing.T, what string, chs ...<-chan stripeResult) {
	t.Helper()
	for i, ch := range chs {
		select {
		case r := <-ch:
			t.Fatalf("%s #%d: Lock = %v, %v; want it still waiting", what, i, r.s, r.err)
		default:
		}
	}
}

// lines returns the number of contenders in each stripe's line.
func lines(t *testing.T, st store.Store, sm *sync.StripedMutex) []int {
	t.Helper()
	n := make([]int, sm.Stripes())
	for _, name := range children(t, st, sm.Path()+"/stripes") {
		var i int
		if _, err := fmt.Sscanf(recipeStrip(name), "s%d-", &i); err != nil || i < 0 || i >= len(n) {
			t.Fatalf("node %q in the stripes' directory", name)
		}
		n[i]++
	}
	return n
}

// recipeStrip drops ZooKeeper's protected prefix "_c_<uuid>-".
func recipeStrip(name string) string {
	if strings.HasPrefix(name, "_c_") && len(name) > 40 {
		return name[40:]
	}
	return name
}

// holdAll makes one session per stripe hold it, and returns the stripes and
// their sessions by index.
func holdAll(t *testing.T, ctx context.Context, b storetest.Backend, p string, k int) ([]*sync.Stripe, []*countstore.Store) {
	t.Helper()
	held, byStripe := make([]*sync.Stripe, k), make([]*countstore.Store, k)
	for _, st := range bcount(t, b, k) {
		s, ok, err := sync.NewStripedMutex(st, p, k).TryLock(ctx)
		if !ok || err != nil {
			t.Fatalf("TryLock with free stripes = %v, %v, %v; want a stripe", s, ok, err)
		}
		if held[s.Index()] != nil {
			t.Fatalf("stripe %d granted twice", s.Index())
		}
		held[s.Index()], byStripe[s.Index()] = s, st
	}
	return held, byStripe
}

func TestStripedExclusion(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const k, sessions, goroutines, rounds = 3, 3, 3, 4
		p, ctx := lockPath(t), testCtx(t)
		var held [k]atomic.Bool
		var last [k]atomic.Int64
		for i := range last {
			last[i].Store(-1) // ZooKeeper's first Seq is 0
		}
		used := make([]atomic.Int32, k)
		var wg gosync.WaitGroup
		errs := make(chan error, sessions*goroutines*rounds)
		for _, st := range backends.Open(t, b, sessions) {
			sm := sync.NewStripedMutex(st, p, k) // shared by the goroutines below
			for range goroutines {
				wg.Go(func() {
					for range rounds {
						s, err := sm.Lock(ctx)
						if err != nil {
							errs <- fmt.Errorf("Lock = %v", err)
							return
						}
						i := s.Index()
						if !held[i].CompareAndSwap(false, true) {
							errs <- fmt.Errorf("stripe %d has two holders", i)
						}
						if tok := s.Token(); tok <= last[i].Load() {
							errs <- fmt.Errorf("stripe %d: token %d after %d", i, tok, last[i].Load())
						} else {
							last[i].Store(tok)
						}
						used[i].Add(1)
						runtime.Gosched()
						held[i].Store(false)
						if err := s.Unlock(ctx); err != nil {
							errs <- fmt.Errorf("Unlock = %v", err)
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
		obs := backends.Open(t, b, 1)[0]
		for i := range k {
			if used[i].Load() == 0 {
				t.Errorf("stripe %d never granted in %d grants", i, sessions*goroutines*rounds)
			}
		}
		if got := children(t, obs, p+"/stripes"); len(got) != 0 {
			t.Errorf("stripes after every Unlock: %q; want no node", got)
		}
	})
}

func TestStripedTryLock(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const k = 3
		p, ctx := lockPath(t), testCtx(t)
		sts := backends.Open(t, b, 2)
		sm := sync.NewStripedMutex(sts[0], p, k)
		var held []*sync.Stripe
		seen := map[int]bool{}
		for range k {
			s, ok, err := sm.TryLock(ctx)
			if !ok || err != nil {
				t.Fatalf("TryLock with a free stripe = %v, %v", ok, err)
			}
			if seen[s.Index()] {
				t.Fatalf("stripe %d granted twice", s.Index())
			}
			seen[s.Index()] = true
			held = append(held, s)
		}
		none, ok, err := sync.NewStripedMutex(sts[1], p, k).TryLock(ctx)
		if none != nil || ok || err != nil {
			t.Fatalf("TryLock with every stripe held = %v, %v, %v; want nil, false, nil", none, ok, err)
		}
		// The natural defer of a TryLock that got none: a typed error,
		// no panic, nothing released.
		if err := none.Unlock(ctx); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Unlock of the nil Stripe = %v; want store.ErrInvalidArgument", err)
		}
		if none.Index() != -1 || none.Token() != -1 || !errors.Is(context.Cause(none.Context()), sync.ErrNotLocked) {
			t.Errorf("nil Stripe: Index, Token, Context cause = %d, %d, %v; want -1, -1, ErrNotLocked", none.Index(), none.Token(), context.Cause(none.Context()))
		}
		if err := held[1].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := held[1].Unlock(ctx); !errors.Is(err, sync.ErrNotLocked) {
			t.Errorf("second Unlock = %v; want ErrNotLocked", err)
		}
		s, ok, err := sync.NewStripedMutex(sts[1], p, k).TryLock(ctx)
		if !ok || err != nil || s.Index() != held[1].Index() {
			t.Fatalf("TryLock after stripe %d was unlocked = %v, %v; want that stripe", held[1].Index(), ok, err)
		}
		// Limited to held stripes: nothing.
		if _, ok, err := sync.NewStripedMutex(sts[1], p, k).TryLock(ctx, held[0].Index(), held[2].Index()); ok || err != nil {
			t.Errorf("TryLock of held stripes = %v, %v; want false, nil", ok, err)
		}
		for _, x := range []*sync.Stripe{held[0], held[2], s} {
			if err := x.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}
	})
}

// TestStripedNoHerd: with every stripe held and six waiters in the lines,
// one release wakes one waiter: the next in that stripe's line.
func TestStripedNoHerd(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const k, waiters = 2, 6
		p, ctx := lockPath(t), testCtx(t)
		held, holders := holdAll(t, ctx, b, p, k)
		ws := bcount(t, b, waiters)
		var chs []<-chan stripeResult
		for _, w := range ws {
			chs = append(chs, stripeLock(t, ctx, w, sync.NewStripedMutex(w, p, k)))
		}
		obs := backends.Open(t, b, 1)[0]
		sm := sync.NewStripedMutex(obs, p, k)
		// Shortest line first: the waiters split evenly.
		if got := lines(t, obs, sm); !slices.Equal(got, []int{1 + waiters/k, 1 + waiters/k}) {
			t.Errorf("lines = %v; want %d waiters in each", got, waiters/k)
		}
		for _, w := range ws {
			w.Reset()
		}
		holders[0].Reset()
		if err := held[0].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// One waiter gets stripe 0; nobody else moves.
		granted := first(chs)
		var got *sync.Stripe
		select {
		case <-time.After(timeout):
			t.Fatal("no waiter got the released stripe")
		case got = <-granted:
		}
		if got.Index() != 0 {
			t.Errorf("released stripe 0; a waiter got %d", got.Index())
		}
		woken := 0
		for _, w := range ws {
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			woken += w.Counts().Wakeups
		}
		if handOvers := holders[0].Counts().Calls["Set"]; woken != 1 || handOvers != 0 {
			t.Errorf("one release woke %d waiters and handed over %d times; want 1 and 0", woken, handOvers)
		}
		if err := got.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := held[1].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// The rest drain, each once.
		for range waiters - 1 {
			select {
			case s := <-granted:
				if err := s.Unlock(ctx); err != nil {
					t.Error(err)
				}
			case <-time.After(timeout):
				t.Fatal("waiters did not drain")
			}
		}
	})
}

// first merges the stripes granted to the pending Locks of chs (an error is
// dropped: the caller waits in vain and reports it); call it once.
func first(chs []<-chan stripeResult) <-chan *sync.Stripe {
	out := make(chan *sync.Stripe, len(chs))
	for _, ch := range chs {
		go func() {
			r := <-ch
			if r.err == nil {
				out <- r.s
			}
		}()
	}
	return out
}

// TestStripedHandOver: a release that leaves its stripe's line empty hands
// the stripe to the newest waiter elsewhere that can take it, and to nobody
// else.
func TestStripedHandOver(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const k = 3
		p, ctx := lockPath(t), testCtx(t)
		held, holders := holdAll(t, ctx, b, p, k)
		ws := bcount(t, b, 2)
		obs := backends.Open(t, b, 1)[0]
		sm := sync.NewStripedMutex(obs, p, k)

		anyW := stripeLock(t, ctx, ws[0], sync.NewStripedMutex(ws[0], p, k))
		x := slices.Index(lines(t, obs, sm), 2) // the line it joined
		y, z := (x+1)%k, (x+2)%k
		// A newer waiter that cannot take y.
		some := stripeLock(t, ctx, ws[1], sync.NewStripedMutex(ws[1], p, k), x, z)
		if got := lines(t, obs, sm); got[z] != 2 {
			t.Fatalf("lines = %v; want the second waiter in stripe %d's", got, z)
		}
		for _, w := range ws {
			w.Reset()
		}
		holders[y].Reset()
		if err := held[y].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		s := stripeGot(t, anyW, "waiter in stripe x's line")
		if s.Index() != y {
			t.Errorf("the waiter got stripe %d; want the idle %d", s.Index(), y)
		}
		stripePending(t, "waiter that cannot take the idle stripe", some)
		if n := holders[y].Counts().Calls["Set"]; n != 1 {
			t.Errorf("the release touched %d waiters; want 1", n)
		}
		if n := ws[1].Counts().Wakeups; n != 0 {
			t.Errorf("the other waiter was woken %d times; want 0", n)
		}
		// The mover left its old line.
		if got := lines(t, obs, sm); got[x] != 1 || got[y] != 1 || got[z] != 2 {
			t.Errorf("lines after the hand-over = %v; want stripe %d: 1, %d: 1, %d: 2", got, x, y, z)
		}
		if err := held[z].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if got := stripeGot(t, some, "second waiter"); got.Index() != z {
			t.Errorf("second waiter got stripe %d; want %d", got.Index(), z)
		} else if err := got.Unlock(ctx); err != nil {
			t.Error(err)
		}
		for _, h := range []*sync.Stripe{s, held[x]} {
			if err := h.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}
		if got := children(t, obs, p+"/stripes"); len(got) != 0 {
			t.Errorf("nodes left: %q", got)
		}
	})
}

func TestStripedCancelLeavesNoNode(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const k = 2
		p, ctx := lockPath(t), testCtx(t)
		held, _ := holdAll(t, ctx, b, p, k)
		obs := backends.Open(t, b, 1)[0]
		want := children(t, obs, p+"/stripes")

		w := bcount(t, b, 1)[0]
		cctx, cancel := context.WithCancel(ctx)
		ch := stripeLock(t, cctx, w, sync.NewStripedMutex(w, p, k))
		cancel()
		select {
		case r := <-ch:
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("cancelled Lock = %v, %v; want context.Canceled", r.s, r.err)
			}
		case <-time.After(timeout):
			t.Fatal("cancelled Lock did not return")
		}
		check := func(quitter store.Store) {
			t.Helper()
			settle(t, quitter, obs, p+"/stripes", want)
		}
		check(w)
		// Giving up at random moments.
		quitter := backends.Open(t, b, 1)[0]
		for i := range 15 {
			wctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(4000))*time.Microsecond)
			s, err := sync.NewStripedMutex(quitter, p, k).Lock(wctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d: timed-out Lock = %v, %v; want context.DeadlineExceeded", i, s, err)
			}
			check(quitter)
		}
		for _, s := range held {
			if err := s.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}
	})
}

// TestStripedWithMutex: a Mutex on the stripes' directory holds every
// stripe at once.
func TestStripedWithMutex(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		sm := sync.NewStripedMutex(sts[0], p, 2)
		s, err := sm.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		whole := sync.NewMutex(sts[1], p+"/stripes")
		got := make(chan error, 1)
		go func() { got <- whole.Lock(ctx) }()
		waitChildren(t, sts[0], p+"/stripes", 2)
		pending(t, got, "Mutex.Lock while a stripe is held")
		// The other stripe is free, but the Mutex asked first.
		if x, ok, err := sm.TryLock(ctx); ok || err != nil {
			t.Errorf("TryLock behind the Mutex = %v, %v, %v; want false", x, ok, err)
		}
		cs := countstore.New(sts[0])
		w := stripeLock(t, ctx, cs, sync.NewStripedMutex(cs, p, 2))
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := result(t, got, "Mutex.Lock"); err != nil {
			t.Fatalf("Mutex.Lock = %v", err)
		}
		stripePending(t, "Lock while the Mutex holds", w)
		if err := whole.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if x := stripeGot(t, w, "waiter"); x != nil {
			if err := x.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}
	})
}

func TestStripedLost(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		sm := sync.NewStripedMutex(sts[0], p, 2)
		s, err := sm.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held := s.Context()
		kids := children(t, sts[1], p+"/stripes")
		if err := sts[1].Delete(ctx, p+"/stripes/"+kids[0]); err != nil {
			t.Fatal(err)
		}
		if cause := cancelled(t, held); !errors.Is(cause, sync.ErrNodeDeleted) {
			t.Errorf("cause = %v; want ErrNodeDeleted", cause)
		}
		if err := s.Unlock(ctx); !errors.Is(err, sync.ErrLockLost) || !errors.Is(err, sync.ErrNodeDeleted) {
			t.Errorf("Unlock after the loss = %v; want ErrLockLost and ErrNodeDeleted", err)
		}

		s, err = sm.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = s.Context()
		b.Expire(t, sts[0])
		if cause := cancelled(t, held); !expiredCause(cause) && !errors.Is(cause, sync.ErrDisconnected) {
			t.Errorf("cause after expiry = %v; want the expiry", cause)
		}
		if _, err := sm.Lock(ctx); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("Lock after expiry = %v; want store.ErrSessionExpired", err)
		}
	})
}

func TestStripedMisuse(t *testing.T) {
	ctx := testCtx(t)
	srv := memstore.NewServer()
	st := srv.Open()
	defer st.Close()
	var zero sync.StripedMutex
	lockErr := func(sm *sync.StripedMutex, stripes ...int) func() error {
		return func() error { _, err := sm.Lock(ctx, stripes...); return err }
	}
	if _, err := sync.NewStripedMutex(st, "/s", 4).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"zero Lock", lockErr(&zero), store.ErrInvalidArgument},
		{"zero TryLock", func() error { _, _, err := zero.TryLock(ctx); return err }, store.ErrInvalidArgument},
		{"nil Lock", lockErr(nil), store.ErrInvalidArgument},
		{"zero Stripe Unlock", func() error { return new(sync.Stripe).Unlock(ctx) }, store.ErrInvalidArgument},
		{"no stripes", lockErr(sync.NewStripedMutex(st, "/t", 0)), sync.ErrInvalidLimit},
		{"other k", lockErr(sync.NewStripedMutex(st, "/s", 3)), sync.ErrMismatch},
		{"stripe out of range", lockErr(sync.NewStripedMutex(st, "/s", 4), 1, 4), store.ErrInvalidArgument},
		{"negative stripe", lockErr(sync.NewStripedMutex(st, "/s", 4), -1), store.ErrInvalidArgument},
		{"invalid path", lockErr(sync.NewStripedMutex(st, "s/", 4)), store.ErrInvalidPath},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s = %v; want %v", tt.name, err, tt.want)
		}
	}
}
