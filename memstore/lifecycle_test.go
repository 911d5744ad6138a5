package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
)

// waitFor fails t unless ch is closed, or delivers, within 5 seconds.
func waitFor[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5s", what)
	case <-t.Context().Done():
		t.Fatalf("%s: %v", what, t.Context().Err())
	}
	var zero T
	return zero
}

// TestExpireEndsContextBeforeNodes: an expiring session's Context ends
// while its ephemeral node still exists for every other session, as on a
// real store, whose client ends its session before the server does.
func TestExpireEndsContextBeforeNodes(t *testing.T) {
	ctx := t.Context()
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer b.Close()
	n, err := a.Create(ctx, "/w/a", nil, store.Ephemeral)
	if err != nil {
		t.Fatal(err)
	}
	existed := make(chan error, 1)
	context.AfterFunc(a.Context(), func() {
		_, err := b.Get(ctx, n.Path)
		existed <- err
	})
	a.Expire()
	if err := waitFor(t, "a's Context to end", existed); err != nil {
		t.Errorf("Get(%q) by another session once a's Context ended = %v; want the node still there", n.Path, err)
	}
	if _, err := b.Get(ctx, n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get(%q) after Expire returned = %v; want ErrNoNode", n.Path, err)
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, store.ErrSessionExpired) {
		t.Errorf("a's cause = %v; want ErrSessionExpired", cause)
	}
}

// TestExpireNoMargin: WithExpiryMargin(0) ends both halves in one step.
func TestExpireNoMargin(t *testing.T) {
	ctx := t.Context()
	srv := memstore.NewServer(memstore.WithExpiryMargin(0))
	a, b := srv.Open(), srv.Open()
	defer b.Close()
	n, err := a.Create(ctx, "/w/a", nil, store.Ephemeral)
	if err != nil {
		t.Fatal(err)
	}
	_, _, ev, err := b.ExistsW(ctx, n.Path)
	if err != nil {
		t.Fatal(err)
	}
	a.Expire()
	if a.Context().Err() == nil {
		t.Error("a's Context not ended when Expire returned")
	}
	select {
	case e := <-ev:
		if e.Type != store.EventDeleted {
			t.Errorf("b's watch = %+v; want deleted", e)
		}
	default:
		t.Error("b's watch had not fired when Expire returned")
	}
}

// TestCloseDuringExpiryMargin: a Close while an expiry waits out its
// margin removes the nodes at once, and the expiry returns.
func TestCloseDuringExpiryMargin(t *testing.T) {
	ctx := t.Context()
	srv := memstore.NewServer(memstore.WithExpiryMargin(time.Hour))
	a, b := srv.Open(), srv.Open()
	defer b.Close()
	n, err := a.Create(ctx, "/w/a", nil, store.Ephemeral)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Expire()
	}()
	waitFor(t, "a's Context to end", a.Context().Done())
	if _, err := b.Get(ctx, n.Path); err != nil {
		t.Fatalf("Get(%q) within the margin = %v; want the node", n.Path, err)
	}
	_ = a.Close()
	waitFor(t, "Expire to return after Close", done)
	if _, err := b.Get(ctx, n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get(%q) after Close = %v; want ErrNoNode", n.Path, err)
	}
}

// TestExpireOldWorkerStoppedFirst is a user's test: a worker runs while
// it holds a lock and stops when the lock's context ends; its session
// expires; the next worker, waiting for the lock, starts. The old one
// must have stopped before the new one started, every time, as on the
// real stores.
func TestExpireOldWorkerStoppedFirst(t *testing.T) {
	for run := range 20 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			ctx := t.Context()
			srv := memstore.NewServer()
			old, next := srv.Open(), srv.Open()
			defer old.Close()
			defer next.Close()
			var (
				mu  gosync.Mutex
				log []string
			)
			note := func(s string) {
				mu.Lock()
				defer mu.Unlock()
				log = append(log, s)
			}
			work := func(st store.Store, name string, started chan<- struct{}) func() error {
				return func() error {
					m := sync.NewMutex(st, "/jobs/report")
					if err := m.Lock(ctx); err != nil {
						return err
					}
					note(name + " started")
					close(started)
					<-m.Context().Done()
					note(name + " stopped")
					return nil
				}
			}
			oldStarted, newStarted := make(chan struct{}), make(chan struct{})
			var wg gosync.WaitGroup
			errs := make(chan error, 2)
			wg.Go(func() { errs <- work(old, "old", oldStarted)() })
			waitFor(t, "old worker to start", oldStarted)
			wg.Go(func() { errs <- work(next, "new", newStarted)() })
			waitContenders(t, next, "/jobs/report", 2)

			old.Expire()
			waitFor(t, "new worker to start", newStarted)
			_ = next.Close() // stops the new worker
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			want := []string{"old started", "old stopped", "new started", "new stopped"}
			if !slices.Equal(log, want) {
				t.Errorf("events = %q; want %q", log, want)
			}
		})
	}
}

// waitContenders waits until dir has n children.
func waitContenders(t *testing.T, st store.Store, dir string, n int) {
	t.Helper()
	for {
		kids, ev, err := st.ChildrenW(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) == n {
			return
		}
		waitFor(t, "contenders", ev)
	}
}

// TestFreezeServerExpires: a frozen holder's session expires at the
// server after its timeout: its lock passes to a waiter while the frozen
// process still believes it holds it (its Context is live, its calls
// block); on Thaw it sees the end, and its blocked call fails with it.
func TestFreezeServerExpires(t *testing.T) {
	ctx := t.Context()
	srv := memstore.NewServer(memstore.WithSessionTimeout(50 * time.Millisecond))
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	ma, mb := sync.NewMutex(a, "/l"), sync.NewMutex(b, "/l")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	held := ma.Context()

	a.Freeze()
	blocked := make(chan error, 1)
	go func() {
		_, err := a.Get(ctx, "/l")
		blocked <- err
	}()
	if err := mb.Lock(ctx); err != nil { // granted once the server expires a
		t.Fatalf("Lock by the next holder = %v", err)
	}
	if held.Err() != nil || a.Context().Err() != nil {
		t.Errorf("frozen holder's contexts ended while frozen: hold %v, session %v", context.Cause(held), context.Cause(a.Context()))
	}
	select {
	case err := <-blocked:
		t.Fatalf("Get by a frozen session returned %v; want it blocked", err)
	default:
	}

	a.Thaw()
	if err := waitFor(t, "the blocked call", blocked); !errors.Is(err, store.ErrSessionExpired) {
		t.Errorf("blocked Get after Thaw = %v; want ErrSessionExpired", err)
	}
	waitFor(t, "the old hold to end", held.Done())
	if cause := context.Cause(held); !errors.Is(cause, store.ErrSessionExpired) {
		t.Errorf("old hold's cause = %v; want ErrSessionExpired", cause)
	}
	if mb.Context().Err() != nil {
		t.Errorf("next holder's hold ended: %v", context.Cause(mb.Context()))
	}
}

// TestFreezeThawInTime: a session thawed before its timeout goes on as if
// nothing happened; what its watches saw meanwhile comes on Thaw.
func TestFreezeThawInTime(t *testing.T) {
	ctx := t.Context()
	srv := memstore.NewServer(memstore.WithSessionTimeout(time.Hour))
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	if _, err := b.Create(ctx, "/n", nil, store.Persistent); err != nil {
		t.Fatal(err)
	}
	mine, err := a.Create(ctx, "/mine", nil, store.Ephemeral)
	if err != nil {
		t.Fatal(err)
	}
	_, _, ev, err := a.ExistsW(ctx, "/n")
	if err != nil {
		t.Fatal(err)
	}
	a.Freeze()
	if _, err := b.Set(ctx, "/n", []byte("x"), store.AnyVersion); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ev:
		t.Fatalf("a frozen session's watch delivered %+v", e)
	default:
	}
	a.Thaw()
	if e := waitFor(t, "the held event", ev); e.Type != store.EventDataChanged {
		t.Errorf("event after Thaw = %+v; want data-changed", e)
	}
	if _, err := b.Get(ctx, mine.Path); err != nil {
		t.Errorf("ephemeral node of a session thawed in time: Get = %v", err)
	}
	if _, err := a.Get(ctx, "/n"); err != nil {
		t.Errorf("Get after Thaw = %v", err)
	}
}

// TestFreezeBlockedCallCancelled: a frozen session's call ends with its
// ctx; Expire on a frozen session is the server's expiry alone; Close
// thaws it.
func TestFreezeBlockedCallCancelled(t *testing.T) {
	srv := memstore.NewServer(memstore.WithSessionTimeout(time.Hour))
	a, b := srv.Open(), srv.Open()
	defer b.Close()
	n, err := a.Create(t.Context(), "/e", nil, store.Ephemeral)
	if err != nil {
		t.Fatal(err)
	}
	a.Freeze()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := a.Get(ctx, "/e"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get by a frozen session with a short ctx = %v; want DeadlineExceeded", err)
	}
	a.Expire()
	if _, err := b.Get(t.Context(), n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get(%q) after the server expired a frozen session = %v; want ErrNoNode", n.Path, err)
	}
	if a.Context().Err() != nil {
		t.Errorf("frozen session's Context ended before Thaw: %v", context.Cause(a.Context()))
	}
	_ = a.Close()
	if cause := context.Cause(a.Context()); !errors.Is(cause, store.ErrSessionExpired) {
		t.Errorf("cause after Close of a frozen, expired session = %v; want ErrSessionExpired", cause)
	}
}

// TestLifecycleMisuse: options out of range are clamped, a nil option is
// skipped, and Freeze, Thaw and Expire out of turn do nothing harmful.
func TestLifecycleMisuse(t *testing.T) {
	ctx := t.Context()
	srv := memstore.NewServer(nil, memstore.WithExpiryMargin(-time.Second), memstore.WithSessionTimeout(-time.Second), memstore.WithSessionTimeout(0))
	a, b := srv.Open(), srv.Open()
	defer b.Close()
	a.Thaw() // not frozen
	a.Freeze()
	a.Freeze() // frozen already
	a.Thaw()
	a.Thaw()
	n, err := a.Create(ctx, "/e", nil, store.Ephemeral)
	if err != nil {
		t.Fatalf("Create after Freeze, Thaw = %v", err)
	}
	a.Expire() // a negative margin counts as 0
	a.Expire()
	if _, err := b.Get(ctx, n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get(%q) after Expire = %v; want ErrNoNode", n.Path, err)
	}
	a.Freeze() // ended: nothing to freeze
	if _, err := a.Get(ctx, "/"); !errors.Is(err, store.ErrSessionExpired) {
		t.Errorf("Get after Freeze of an ended session = %v; want ErrSessionExpired", err)
	}
	a.Thaw()
	_ = a.Close()
}
