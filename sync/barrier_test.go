package sync_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// The helpers of the barrier and semaphore tests carry a "b" so that they
// never collide with the lock tests' own.

// bTimeout bounds every wait of these tests; real stores are slower than
// memstore.
const bTimeout = 30 * time.Second

// bpath returns a fresh path for one test.
func bpath(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/synctest/%s-%08x", name, rand.Uint32())
}

func bctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), bTimeout)
	t.Cleanup(cancel)
	return ctx
}

// bopen opens n sessions that are closed when the test ends.
func bopen(t testing.TB, b storetest.Backend, n int) []store.Store {
	sts := make([]store.Store, n)
	for i := range sts {
		sts[i] = b.Open(t)
		t.Cleanup(func() { _ = sts[i].Close() })
	}
	return sts
}

// bcount opens n counting sessions that are closed when the test ends.
func bcount(t testing.TB, b storetest.Backend, n int) []*countstore.Store {
	sts := make([]*countstore.Store, n)
	for i := range sts {
		sts[i] = countstore.New(b.Open(t))
		t.Cleanup(func() { _ = sts[i].Close() })
	}
	return sts
}

// bkids returns the names of the children of p that contain marker (all of
// them when marker is ""); none when p does not exist.
func bkids(t testing.TB, st store.Store, p, marker string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), bTimeout)
	defer cancel()
	kids, err := st.Children(ctx, p)
	if errors.Is(err, store.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("Children(%q) = %v", p, err)
	}
	var names []string
	for _, k := range kids {
		if strings.Contains(k.Name, marker) {
			names = append(names, k.Name)
		}
	}
	return names
}

// bwaitKids waits until the number of children of p that contain marker
// satisfies ok.
func bwaitKids(t testing.TB, st store.Store, p, marker string, ok func(n int) bool) {
	t.Helper()
	ctx, cancelAll := context.WithTimeout(t.Context(), bTimeout)
	defer cancelAll()
	for {
		wctx, cancel := context.WithCancel(ctx)
		kids, ev, err := st.(store.ChildrenWatcher).ChildrenW(wctx, p)
		if errors.Is(err, store.ErrNoNode) {
			var exists bool
			exists, _, ev, err = st.ExistsW(wctx, p)
			if exists {
				cancel()
				continue // created meanwhile: list it
			}
		}
		if err != nil {
			cancel()
			t.Fatalf("watching the children of %q: %v", p, err)
		}
		n := 0
		for _, k := range kids {
			if strings.Contains(k.Name, marker) {
				n++
			}
		}
		if ok(n) {
			cancel()
			return
		}
		if testing.Verbose() {
			var names []string
			for _, k := range kids {
				names = append(names, fmt.Sprintf("%s@%d", k.Name, k.Seq))
			}
			t.Logf("children of %q: %d of %q", p, n, names)
		}
		select {
		case <-ev:
			cancel()
		case <-ctx.Done():
			cancel()
			t.Fatalf("waiting on the children of %q: have %q", p, bkids(t, st, p, marker))
		}
	}
}

// bresult waits for one result of a goroutine.
func bresult(t testing.TB, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(bTimeout):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// bpending fails the test if ch already has a result.
func bpending(t testing.TB, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned %v; want it still blocked", what, err)
	default:
	}
}

// bcalls waits until the counting sessions have made n calls of method
// between them.
func bcalls(t testing.TB, sts []*countstore.Store, method string, n int) {
	t.Helper()
	ctx := bctx(t)
	for {
		before, total := make([]int, len(sts)), 0
		for i, st := range sts {
			before[i] = st.Counts().Calls[method]
			total += before[i]
		}
		if total >= n {
			return
		}
		// Wait for the next call on any of the sessions.
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{}, len(sts))
		var wg gosync.WaitGroup
		for i, st := range sts {
			wg.Go(func() {
				if st.Wait(wctx, func(c countstore.Counts) bool { return c.Calls[method] > before[i] }) == nil {
					done <- struct{}{}
				}
			})
		}
		select {
		case <-done:
		case <-ctx.Done():
		}
		cancel()
		wg.Wait()
		if ctx.Err() != nil {
			t.Fatalf("waiting for %d %s calls: have %d", n, method, total)
		}
	}
}

func TestBarrierReleasesAll(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const sessions, perSession = 4, 5
		sts := bcount(t, b, sessions+1)
		ctx, p := bctx(t), bpath(t)
		setter := sync.NewBarrier(sts[sessions], p)
		if err := setter.Set(ctx); err != nil {
			t.Fatalf("Set = %v", err)
		}
		var removed atomic.Bool
		errs := make(chan error, sessions*perSession)
		for i := range sessions * perSession {
			w := sync.NewBarrier(sts[i%sessions], p)
			go func() {
				err := w.Wait(ctx)
				if err == nil && !removed.Load() {
					err = errors.New("returned before Remove")
				}
				errs <- err
			}()
		}
		// Every waiter has checked the barrier and found it set.
		bcalls(t, sts[:sessions], "NodeW", sessions*perSession)
		bpending(t, errs, "Wait")
		removed.Store(true)
		if err := setter.Remove(ctx); err != nil {
			t.Fatalf("Remove = %v", err)
		}
		for i := range sessions * perSession {
			if err := bresult(t, errs, "Wait"); err != nil {
				t.Errorf("Wait #%d = %v; want nil", i, err)
			}
		}
	})
}

func TestBarrierCancelledWaiter(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := bcount(t, b, 2)
		ctx, p := bctx(t), bpath(t)
		if err := sync.NewBarrier(sts[0], p).Set(ctx); err != nil {
			t.Fatalf("Set = %v", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var removed atomic.Bool
		gone, stay := make(chan error, 1), make(chan error, 2)
		go func() { gone <- sync.NewBarrier(sts[1], p).Wait(cctx) }()
		for _, st := range sts {
			w := sync.NewBarrier(st, p)
			go func() {
				err := w.Wait(ctx)
				if err == nil && !removed.Load() {
					err = errors.New("returned before Remove")
				}
				stay <- err
			}()
		}
		bcalls(t, sts, "NodeW", 3)
		cancel()
		if err := bresult(t, gone, "cancelled Wait"); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Wait = %v; want %v", err, context.Canceled)
		}
		bpending(t, stay, "Wait")
		removed.Store(true)
		if err := sync.NewBarrier(sts[0], p).Remove(ctx); err != nil {
			t.Fatalf("Remove = %v", err)
		}
		for range 2 {
			if err := bresult(t, stay, "Wait"); err != nil {
				t.Errorf("Wait = %v; want nil", err)
			}
		}
	})
}

func TestBarrierSessionEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, b storetest.Backend, st store.Store)
		want error
	}{
		{"expired", func(t *testing.T, b storetest.Backend, st store.Store) { b.Expire(t, st) }, store.ErrSessionExpired},
		{"closed", func(_ *testing.T, _ storetest.Backend, st store.Store) { _ = st.Close() }, store.ErrClosed},
	}
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				sts := bcount(t, b, 2)
				ctx, p := bctx(t), bpath(t)
				if err := sync.NewBarrier(sts[0], p).Set(ctx); err != nil {
					t.Fatalf("Set = %v", err)
				}
				errs := make(chan error, 1)
				go func() { errs <- sync.NewBarrier(sts[1], p).Wait(ctx) }()
				bcalls(t, sts[1:], "NodeW", 1)
				tt.end(t, b, sts[1].Unwrap())
				if err := bresult(t, errs, "Wait"); !errors.Is(err, tt.want) {
					t.Errorf("Wait after the session ended = %v; want %v", err, tt.want)
				}
			})
		}
	})
}

func TestBarrierSetRemove(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := bopen(t, b, 1)[0]
		ctx, p := bctx(t), bpath(t)
		bar := sync.NewBarrier(st, p)
		steps := []struct {
			name string
			call func() error
			set  bool // whether the barrier is set afterwards
		}{
			{"Wait", func() error { return bar.Wait(ctx) }, false},
			{"Remove", func() error { return bar.Remove(ctx) }, false},
			{"Set", func() error { return bar.Set(ctx) }, true},
			{"Set", func() error { return bar.Set(ctx) }, true},
			{"Remove", func() error { return bar.Remove(ctx) }, false},
			{"Remove", func() error { return bar.Remove(ctx) }, false},
			{"Wait", func() error { return bar.Wait(ctx) }, false},
		}
		for i, s := range steps {
			if err := s.call(); err != nil {
				t.Fatalf("step %d: %s() = %v; want nil", i, s.name, err)
			}
			_, err := st.Get(ctx, p)
			if set := err == nil; set != s.set {
				t.Fatalf("step %d: after %s() set = %v (%v); want %v", i, s.name, set, err, s.set)
			}
		}
	})
}

func TestBarrierErrors(t *testing.T) {
	st := backends.Memory().Open(t)
	defer st.Close()
	done, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		path string
		want error
	}{
		{"invalid path", t.Context(), "barrier", store.ErrInvalidPath},
		{"cancelled", done, "/barrier", context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := sync.NewBarrier(st, tt.path)
			for name, call := range map[string]func(context.Context) error{"Set": b.Set, "Remove": b.Remove, "Wait": b.Wait} {
				if err := call(tt.ctx); !errors.Is(err, tt.want) {
					t.Errorf("%s(%q) = %v; want %v", name, tt.path, err, tt.want)
				}
			}
		})
	}
}

// TestBarrierDisconnect checks that a wait rides out a lost connection
// while its session lives.
func TestBarrierDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("the backend cannot cut a connection")
		}
		sts := bcount(t, b, 2)
		ctx, p := bctx(t), bpath(t)
		if err := sync.NewBarrier(sts[0], p).Set(ctx); err != nil {
			t.Fatalf("Set = %v", err)
		}
		d.Disconnect(t, sts[1].Unwrap())
		errs := make(chan error, 1)
		go func() { errs <- sync.NewBarrier(sts[1], p).Wait(ctx) }()
		bcalls(t, sts[1:], "NodeW", 1) // it tried while disconnected
		d.Reconnect(t, sts[1].Unwrap())
		bpending(t, errs, "Wait")
		if err := sync.NewBarrier(sts[0], p).Remove(ctx); err != nil {
			t.Fatalf("Remove = %v", err)
		}
		if err := bresult(t, errs, "Wait"); err != nil {
			t.Errorf("Wait across a disconnection = %v; want nil", err)
		}
	})
}
