package sync_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/zkstore"
)

// timeout bounds every wait of these tests; real stores are slower than
// memstore.
const timeout = 30 * time.Second

// lockPath returns a fresh lock path for one test.
func lockPath(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/synctest/%s-%08x", name, rand.Uint32())
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// open opens n sessions that are closed when the test ends.

// children lists the names under p (none when p does not exist).
func children(t *testing.T, st store.Store, p string) []string {
	t.Helper()
	kids, err := st.Children(testCtx(t), p)
	if errors.Is(err, store.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("Children(%q) = %v", p, err)
	}
	names := []string{}
	for _, k := range kids {
		names = append(names, k.Name)
	}
	return names
}

// waitChildren waits until p has n children.
func waitChildren(t *testing.T, st store.Store, p string, n int) {
	t.Helper()
	backends.WaitChildren(t, st, p, backends.Count(n))
}

// settle waits until the children of p are exactly want, after a create
// that quitter abandoned in flight. zkstore lets such a create run on and
// deletes its node once the reply comes: a call on quitter's session,
// served after the create, makes sure the node exists by now if it is ever
// going to, and the wait then sees it go.
func settle(t *testing.T, quitter, st store.Store, p string, want []string) {
	t.Helper()
	if _, _, _, err := quitter.ExistsW(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for {
		kids, ev, err := st.(store.ChildrenWatcher).ChildrenW(ctx, p)
		if errors.Is(err, store.ErrNoNode) && len(want) == 0 {
			return // the directory went with its last node
		}
		if err != nil {
			t.Fatalf("ChildrenW(%q) = %v", p, err)
		}
		var got []string
		for _, k := range kids {
			got = append(got, k.Name)
		}
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-ev:
		case <-ctx.Done():
			t.Fatalf("children of %q = %q; want %q: a contender that gave up left its node", p, got, want)
		}
	}
}

// result waits for one result of a goroutine.
func result(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(timeout):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// expiredCause reports whether cause is what a holder may see when its
// session expires: store.ErrSessionExpired, or ErrNodeDeleted on etcd, where
// the server deletes the lease's keys at once and the client learns that the
// lease is gone only at its next keepalive.
func expiredCause(cause error) bool {
	return errors.Is(cause, store.ErrSessionExpired) || errors.Is(cause, sync.ErrNodeDeleted)
}

// pending fails the test if ch already has a result.
func pending(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned %v; want it still blocked", what, err)
	default:
	}
}

// cancelled waits until ctx is done and returns its cause.
func cancelled(t *testing.T, ctx context.Context) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(timeout):
		t.Fatal("hold context not cancelled")
		return nil
	}
}

func TestMutexExclusion(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const sessions, goroutines, rounds = 3, 3, 4
		p := lockPath(t)
		ctx := testCtx(t)
		var held atomic.Bool
		var counter int // guarded by the distributed lock alone
		var wg gosync.WaitGroup
		errs := make(chan error, sessions*goroutines)
		for _, st := range backends.Open(t, b, sessions) {
			m := sync.NewMutex(st, p) // shared by the goroutines below
			for range goroutines {
				wg.Go(func() {
					for range rounds {
						if err := m.Lock(ctx); err != nil {
							errs <- fmt.Errorf("Lock(%q) = %v", p, err)
							return
						}
						if !held.CompareAndSwap(false, true) {
							errs <- errors.New("two holders at once")
						}
						counter++
						runtime.Gosched() // let another would-be holder in
						held.Store(false)
						if err := m.Unlock(ctx); err != nil {
							errs <- fmt.Errorf("Unlock(%q) = %v", p, err)
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
		if want := sessions * goroutines * rounds; counter != want {
			t.Errorf("counter = %d; want %d", counter, want)
		}
	})
}

func TestMutexHoldAndToken(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		m1, m2 := sync.NewMutex(sts[0], p), sync.NewMutex(sts[1], p)

		if got := context.Cause(m1.Context()); !errors.Is(got, sync.ErrNotLocked) {
			t.Errorf("Context() before Lock: cause %v; want ErrNotLocked", got)
		}
		if got := m1.Token(); got != -1 {
			t.Errorf("Token() before Lock = %d; want -1", got)
		}
		if err := m1.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		held, tok1 := m1.Context(), m1.Token()
		if held.Err() != nil || tok1 < 0 {
			t.Fatalf("after Lock: Context().Err() = %v, Token() = %d", held.Err(), tok1)
		}
		if ok, err := m2.TryLock(ctx); ok || err != nil {
			t.Errorf("TryLock(%q) while held = %v, %v; want false, nil", p, ok, err)
		}
		if ok, err := m1.TryLock(ctx); ok || err != nil {
			t.Errorf("TryLock(%q) on the holding Mutex = %v, %v; want false, nil", p, ok, err)
		}
		if err := m1.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		if got := context.Cause(held); !errors.Is(got, sync.ErrUnlocked) {
			t.Errorf("hold cause after Unlock = %v; want ErrUnlocked", got)
		}
		if err := m1.Unlock(ctx); !errors.Is(err, sync.ErrNotLocked) {
			t.Errorf("second Unlock(%q) = %v; want ErrNotLocked", p, err)
		}
		if ok, err := m2.TryLock(ctx); !ok || err != nil {
			t.Fatalf("TryLock(%q) when free = %v, %v; want true, nil", p, ok, err)
		}
		if tok2 := m2.Token(); tok2 <= tok1 {
			t.Errorf("Token() of the next grant = %d; want > %d", tok2, tok1)
		}
		if err := m2.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		if got := children(t, sts[0], p); len(got) != 0 {
			t.Errorf("children after all unlocked = %q; want none", got)
		}
	})
}

func TestMutexHolderExpires(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		// KeepOnDisconnect: ZooKeeper's client sees its connection drop
		// before it learns of the expiry, which the default policy would
		// report first.
		holder := sync.NewMutex(sts[0], p, sync.WithDisconnectPolicy(sync.KeepOnDisconnect))
		waiter := sync.NewMutex(sts[1], p)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }()
		waitChildren(t, sts[1], p, 2)
		pending(t, got, "waiter's Lock")

		held := holder.Context()
		b.Expire(t, sts[0])
		cause := cancelled(t, held)
		if !expiredCause(cause) {
			t.Errorf("holder's cause = %v; want store.ErrSessionExpired", cause)
		}
		if err := result(t, got, "waiter's Lock"); err != nil {
			t.Fatalf("waiter's Lock(%q) = %v", p, err)
		}
		if err := holder.Unlock(ctx); !errors.Is(err, sync.ErrLockLost) || !errors.Is(err, cause) {
			t.Errorf("Unlock(%q) after expiry = %v; want ErrLockLost and %v", p, err, cause)
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Errorf("waiter's Unlock(%q) = %v", p, err)
		}
	})
}

func TestMutexWaiterExpires(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		holder, waiter := sync.NewMutex(sts[0], p), sync.NewMutex(sts[1], p)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }()
		waitChildren(t, sts[0], p, 2)
		b.Expire(t, sts[1])
		if err := result(t, got, "waiter's Lock"); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("waiter's Lock(%q) = %v; want store.ErrSessionExpired", p, err)
		}
		if tok := waiter.Token(); tok != -1 {
			t.Errorf("waiter's Token() = %d; want -1 (not held)", tok)
		}
		if err := holder.Context().Err(); err != nil {
			t.Errorf("holder lost the lock: %v", context.Cause(holder.Context()))
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Errorf("Unlock(%q) = %v", p, err)
		}
	})
}

func TestMutexWaiterRidesOutDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect")
		}
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		holder, waiter := sync.NewMutex(sts[0], p), sync.NewMutex(sts[1], p)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }()
		waitChildren(t, sts[0], p, 2)
		d.Disconnect(t, sts[1])
		// The release must come while the waiter knows it is cut off.
		select {
		case <-sts[1].Disconnected():
		case <-ctx.Done():
			t.Fatal("the waiter's store never reported the disconnection")
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		d.Reconnect(t, sts[1])
		if err := result(t, got, "waiter's Lock"); err != nil {
			t.Fatalf("waiter's Lock(%q) across a disconnection = %v", p, err)
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Errorf("Unlock(%q) = %v", p, err)
		}
	})
}

func TestMutexCancelLeavesNoNode(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		p, ctx := lockPath(t), testCtx(t)
		holder, queued := sync.NewMutex(sts[0], p), sync.NewMutex(sts[2], p)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		// A waiter queued before the ones that give up must keep waiting
		// for the real holder.
		qgot := make(chan error, 1)
		go func() { qgot <- queued.Lock(ctx) }()
		waitChildren(t, sts[0], p, 2)
		want := children(t, sts[0], p)

		for i := range 20 {
			// Give up at a random moment: before, during or after the
			// create, or while watching.
			wctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(3000))*time.Microsecond)
			err := sync.NewMutex(sts[1], p).Lock(wctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d: Lock(%q) timed out = %v; want context.DeadlineExceeded", i, p, err)
			}
			settle(t, sts[1], sts[0], p, want)
		}
		// Another waiter gives up while queued behind the queued one.
		wctx, cancel := context.WithCancel(ctx)
		wgot := make(chan error, 1)
		go func() { wgot <- sync.NewMutex(sts[1], p).Lock(wctx) }()
		waitChildren(t, sts[0], p, 3)
		cancel()
		if err := result(t, wgot, "Lock"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock(%q) cancelled = %v; want context.Canceled", p, err)
		}
		settle(t, sts[1], sts[0], p, want)
		pending(t, qgot, "queued Lock")
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		if err := result(t, qgot, "queued Lock"); err != nil {
			t.Fatalf("queued Lock(%q) = %v", p, err)
		}
		if err := queued.Unlock(ctx); err != nil {
			t.Errorf("Unlock(%q) = %v", p, err)
		}
	})
}

func TestMutexStaleUnlock(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		m1, m2 := sync.NewMutex(sts[0], p), sync.NewMutex(sts[1], p)
		if err := m1.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		held := m1.Context()
		// An operator deletes the holder's node; the next contender gets
		// the lock.
		kids := children(t, sts[1], p)
		if len(kids) != 1 {
			t.Fatalf("children = %q; want one", kids)
		}
		if err := sts[1].Delete(ctx, p+"/"+kids[0]); err != nil {
			t.Fatal(err)
		}
		if cause := cancelled(t, held); !errors.Is(cause, sync.ErrNodeDeleted) {
			t.Errorf("cause = %v; want ErrNodeDeleted", cause)
		}
		if err := m2.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		if err := m1.Unlock(ctx); !errors.Is(err, sync.ErrLockLost) || !errors.Is(err, sync.ErrNodeDeleted) {
			t.Errorf("stale Unlock(%q) = %v; want ErrLockLost and ErrNodeDeleted", p, err)
		}
		if err := m2.Context().Err(); err != nil {
			t.Errorf("a stale Unlock ended the newer hold: %v", context.Cause(m2.Context()))
		}
		if got := children(t, sts[1], p); len(got) != 1 {
			t.Errorf("children = %q; want the newer holder's node", got)
		}
		if err := m2.Unlock(ctx); err != nil {
			t.Errorf("Unlock(%q) = %v", p, err)
		}
	})
}

func TestMutexDisconnectPolicy(t *testing.T) {
	tests := []struct {
		policy   sync.DisconnectPolicy
		wantLost bool
	}{
		{sync.LoseOnDisconnect, true},
		{sync.KeepOnDisconnect, false},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			backends.Run(t, func(t *testing.T, b storetest.Backend) {
				d, ok := b.(storetest.Disconnector)
				if !ok {
					t.Skip("backend cannot disconnect")
				}
				sts := backends.Open(t, b, 1)
				p, ctx := lockPath(t), testCtx(t)
				m := sync.NewMutex(sts[0], p, sync.WithDisconnectPolicy(tt.policy))
				if err := m.Lock(ctx); err != nil {
					t.Fatalf("Lock(%q) = %v", p, err)
				}
				held := m.Context()
				d.Disconnect(t, sts[0])
				if tt.wantLost {
					if cause := cancelled(t, held); !errors.Is(cause, sync.ErrDisconnected) || !errors.Is(cause, store.ErrDisconnected) {
						t.Errorf("cause = %v; want ErrDisconnected", cause)
					}
				}
				d.Reconnect(t, sts[0])
				if !tt.wantLost && held.Err() != nil {
					t.Errorf("hold ended under %v: %v", tt.policy, context.Cause(held))
				}
				err := m.Unlock(ctx)
				if tt.wantLost != errors.Is(err, sync.ErrLockLost) {
					t.Errorf("Unlock(%q) = %v; want ErrLockLost: %v", p, err, tt.wantLost)
				}
				if got := children(t, sts[0], p); len(got) != 0 {
					t.Errorf("children after Unlock = %q; want none", got)
				}
			})
		})
	}
}

func TestMutexWithData(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := backends.Open(t, b, 1)[0]
		p, ctx := lockPath(t), testCtx(t)
		m := sync.NewMutex(st, p, sync.WithData([]byte("host-1:8080")))
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		defer m.Unlock(ctx)
		kids := children(t, st, p)
		if len(kids) != 1 {
			t.Fatalf("children = %q; want one", kids)
		}
		n, err := st.Get(ctx, p+"/"+kids[0])
		if err != nil || string(n.Data) != "host-1:8080" || n.Owner != st.SessionID() {
			t.Errorf("Get(lock node) = %q owner %d, %v; want %q owner %d", n.Data, n.Owner, err, "host-1:8080", st.SessionID())
		}
	})
}

func TestMutexMisuse(t *testing.T) {
	ctx := testCtx(t)
	var zero sync.Mutex
	var zeroRW sync.RWMutex
	nilStore := sync.NewMutex(nil, "/l")
	mem := memstore.New()
	defer mem.Close()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"zero Lock", func() error { return zero.Lock(ctx) }, store.ErrInvalidArgument},
		{"zero TryLock", func() error { _, err := zero.TryLock(ctx); return err }, store.ErrInvalidArgument},
		{"zero Unlock", func() error { return zero.Unlock(ctx) }, store.ErrInvalidArgument},
		{"nil store Lock", func() error { return nilStore.Lock(ctx) }, store.ErrInvalidArgument},
		{"zero RLock", func() error { _, err := zeroRW.RLock(ctx); return err }, store.ErrInvalidArgument},
		{"zero TryRLock", func() error { _, _, err := zeroRW.TryRLock(ctx); return err }, store.ErrInvalidArgument},
		{"zero ReadHold Unlock", func() error { return new(sync.ReadHold).Unlock(ctx) }, store.ErrInvalidArgument},
		{"nil ReadHold Unlock", func() error { return (*sync.ReadHold)(nil).Unlock(ctx) }, store.ErrInvalidArgument},
		{"invalid path", func() error { return sync.NewMutex(mem, "no/slash").Lock(ctx) }, store.ErrInvalidPath},
		{"empty path", func() error { return sync.NewMutex(mem, "").Lock(ctx) }, store.ErrInvalidPath},
		{"root", func() error { return sync.NewMutex(mem, "/").Lock(ctx) }, store.ErrInvalidPath},
		{"root TryRLock", func() error { _, _, err := sync.NewRWMutex(mem, "/").TryRLock(ctx); return err }, store.ErrInvalidPath},
		{"long path", func() error { return sync.NewMutex(mem, "/"+strings.Repeat("x", store.MaxPathSize)).Lock(ctx) }, store.ErrInvalidPath},
		{"no room for names", func() error {
			return sync.NewMutex(mem, "/"+strings.Repeat("x", store.MaxPathSize-100)).Lock(ctx)
		}, store.ErrInvalidPath},
		{"unheld Unlock", func() error { return sync.NewMutex(mem, "/l").Unlock(ctx) }, sync.ErrNotLocked},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s = %v; want %v", tt.name, err, tt.want)
		}
	}
	if got := zero.Token(); got != -1 {
		t.Errorf("zero Token() = %d; want -1", got)
	}
}

// copyOf returns a copy of *v made behind vet's back: copying a lock is the
// misuse under test.
func copyOf[T any](v *T) *T {
	cp := new(T)
	reflect.ValueOf(cp).Elem().Set(reflect.ValueOf(v).Elem())
	return cp
}

// TestMutexCopied: a Mutex copied after NewMutex shares the original's
// state; using the copy is an error (else the original's Unlock could wait
// for ever), and the original still works.
func TestMutexCopied(t *testing.T) {
	ctx := testCtx(t)
	mem := memstore.New()
	defer mem.Close()
	m := sync.NewMutex(mem, "/copied")
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock = %v", err)
	}
	cp := copyOf(m)
	if err := cp.Unlock(ctx); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Unlock of a copy = %v; want store.ErrInvalidArgument", err)
	}
	if err := cp.Lock(ctx); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Lock of a copy = %v; want store.ErrInvalidArgument", err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Unlock(ctx) }()
	if err := result(t, done, "Unlock of the original"); err != nil {
		t.Errorf("Unlock of the original = %v", err)
	}
	rw := sync.NewRWMutex(mem, "/copied-rw")
	r, err := rw.RLock(ctx)
	if err != nil {
		t.Fatalf("RLock = %v", err)
	}
	rcp := copyOf(rw)
	if _, err := rcp.RLock(ctx); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("RLock of a copy = %v; want store.ErrInvalidArgument", err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the original's read hold = %v", err)
	}
}

func TestMutexLocker(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 1)
		p := lockPath(t)
		m := sync.NewMutex(sts[0], p)
		l := m.Locker()
		l.Lock()
		if m.Token() < 0 {
			t.Errorf("Token() after Locker().Lock() = %d; want a token", m.Token())
		}
		l.Unlock()
		defer func() {
			err, _ := recover().(error)
			if !errors.Is(err, sync.ErrNotLocked) {
				t.Errorf("Locker().Unlock() of an unheld lock panicked with %v; want ErrNotLocked", err)
			}
		}()
		l.Unlock()
	})
}

func TestMutexForeignContenders(t *testing.T) {
	// Nodes laid out as the other ZooKeeper clients write them (zkstore
	// puts its own protected prefix in front, which changes nothing).
	foreign := []struct{ client, name string }{
		{"curator", "_c_0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10-lock-"},
		{"go-zookeeper", "_c_3a0e2d5b9f1c4e7a8b6d0c2e4f6a8b0c-lock-"},
		{"kazoo", "8c1f0e2d3b4a59687766554433221100__lock__"},
		{"curator-rw-writer", "_c_0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10-__WRIT__"},
	}
	for _, f := range foreign {
		t.Run(f.client, func(t *testing.T) {
			backends.Run(t, func(t *testing.T, b storetest.Backend) {
				sts := backends.Open(t, b, 2)
				p, ctx := lockPath(t), testCtx(t)
				n, err := sts[0].Create(ctx, p+"/"+f.name, nil, store.EphemeralSequential)
				if err != nil {
					t.Fatal(err)
				}
				m := sync.NewMutex(sts[1], p)
				if ok, err := m.TryLock(ctx); ok || err != nil {
					t.Fatalf("TryLock(%q) with a %s holder = %v, %v; want false, nil", p, f.client, ok, err)
				}
				got := make(chan error, 1)
				go func() { got <- m.Lock(ctx) }()
				waitChildren(t, sts[0], p, 2)
				pending(t, got, "Lock")
				if err := sts[0].Delete(ctx, n.Path); err != nil {
					t.Fatal(err)
				}
				if err := result(t, got, "Lock"); err != nil {
					t.Fatalf("Lock(%q) = %v", p, err)
				}
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("Unlock(%q) = %v", p, err)
				}
			})
		})
	}
}

// TestMutexNoHerd: with 50 waiters queued, each release wakes exactly the
// next waiter, so every waiter is woken at most once.
func TestMutexNoHerd(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const waiters = 50
		p, ctx := lockPath(t), testCtx(t)
		holderSt := backends.Open(t, b, 1)[0]
		holder := sync.NewMutex(holderSt, p)
		if err := holder.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		cs := make([]*countstore.Store, waiters)
		returned := make([]context.Context, waiters) // done once waiter i has returned
		got := make(chan error, waiters)
		for i, st := range backends.Open(t, b, waiters) {
			cs[i] = countstore.New(st)
			t.Cleanup(func() { _ = cs[i].Close() })
			m := sync.NewMutex(cs[i], p)
			var done context.CancelFunc
			returned[i], done = context.WithCancel(ctx)
			go func() {
				defer done()
				if err := m.Lock(ctx); err != nil {
					got <- err
					return
				}
				got <- m.Unlock(ctx)
			}()
		}
		for i, c := range cs { // every waiter is watching
			if err := c.Wait(returned[i], func(n countstore.Counts) bool { return n.NodeWatches() > 0 }); err != nil {
				if ctx.Err() == nil {
					t.Fatalf("waiter %d returned before the holder unlocked (a waiter's result: %v)", i, <-got)
				}
				t.Fatalf("waiter %d never watched: %v", i, err)
			}
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		for range waiters {
			if err := result(t, got, "waiter"); err != nil {
				t.Errorf("waiter: %v", err)
			}
		}
		for i, c := range cs {
			if n := c.Counts().Wakeups; n > 1 {
				t.Errorf("waiter %d woken %d times; want at most 1", i, n)
			}
		}
	})
}

// TestMutexEtcdConcurrency: a Mutex and etcd's own concurrency.Mutex on the
// same prefix exclude each other, both ways.
func TestMutexEtcdConcurrency(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		eb, ok := b.(*etcdbackend.Backend)
		if !ok {
			t.Skip("etcd's concurrency package needs etcd")
		}
		p, ctx := lockPath(t), testCtx(t)
		sess, err := concurrency.NewSession(eb.Cluster().Client(t), concurrency.WithTTL(5))
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		em := concurrency.NewMutex(sess, p)
		m := sync.NewMutex(backends.Open(t, b, 1)[0], p)

		// etcd holds, corral waits.
		if err := em.Lock(ctx); err != nil {
			t.Fatalf("concurrency.Mutex.Lock = %v", err)
		}
		if ok, err := m.TryLock(ctx); ok || err != nil {
			t.Fatalf("TryLock(%q) while etcd's mutex holds = %v, %v; want false, nil", p, ok, err)
		}
		got := make(chan error, 1)
		go func() { got <- m.Lock(ctx) }()
		waitChildren(t, backends.Open(t, b, 1)[0], p, 2)
		pending(t, got, "Lock")
		if err := em.Unlock(ctx); err != nil {
			t.Fatalf("concurrency.Mutex.Unlock = %v", err)
		}
		if err := result(t, got, "Lock"); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}

		// corral holds, etcd waits.
		if err := em.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
			t.Fatalf("concurrency.Mutex.TryLock while corral holds = %v; want ErrLocked", err)
		}
		go func() { got <- em.Lock(ctx) }()
		waitChildren(t, backends.Open(t, b, 1)[0], p, 2)
		pending(t, got, "concurrency.Mutex.Lock")
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q) = %v", p, err)
		}
		if err := result(t, got, "concurrency.Mutex.Lock"); err != nil {
			t.Fatalf("concurrency.Mutex.Lock = %v", err)
		}
		if err := em.Unlock(ctx); err != nil {
			t.Fatalf("concurrency.Mutex.Unlock = %v", err)
		}

		// Both kinds at once, several of each, never two holders.
		var held atomic.Bool
		var wg gosync.WaitGroup
		errs := make(chan error, 64)
		critical := func() {
			if !held.CompareAndSwap(false, true) {
				errs <- errors.New("two holders at once")
			}
			runtime.Gosched()
			held.Store(false)
		}
		for _, st := range backends.Open(t, b, 2) {
			m := sync.NewMutex(st, p)
			wg.Go(func() {
				for range 5 {
					if err := m.Lock(ctx); err != nil {
						errs <- err
						return
					}
					critical()
					if err := m.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for range 2 {
			s, err := concurrency.NewSession(eb.Cluster().Client(t), concurrency.WithTTL(5))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			em := concurrency.NewMutex(s, p)
			wg.Go(func() {
				for range 5 {
					if err := em.Lock(ctx); err != nil {
						errs <- err
						return
					}
					critical()
					if err := em.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// TestMutexGoZookeeperLock: a Mutex and go-zookeeper's zk.Lock on the same
// path exclude each other, both ways, on a ZooKeeper of the test's own
// (zk.Lock needs a raw connection).
func TestMutexGoZookeeperLock(t *testing.T) {
	if !backends.Selected("zk") {
		t.Skip("zk not in CORRAL_STORES")
	}
	srv := zkserver.ForTest(t, zkserver.Config{})
	addrs := []string{srv.Addr()}
	ctx := testCtx(t)
	openZK := func() store.Store {
		st, err := zkstore.Open(ctx, addrs, zkstore.WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	newZKLock := func(p string) *zk.Lock {
		conn, events, err := zk.Connect(addrs, 15*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		waitZK(t, events)
		return zk.NewLock(conn, p, zk.WorldACL(zk.PermAll))
	}
	p := lockPath(t)
	zl, st := newZKLock(p), openZK()
	m := sync.NewMutex(st, p)

	// go-zookeeper holds, corral waits.
	if err := zl.Lock(); err != nil {
		t.Fatalf("zk.Lock.Lock = %v", err)
	}
	if ok, err := m.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock(%q) while zk.Lock holds = %v, %v; want false, nil", p, ok, err)
	}
	got := make(chan error, 1)
	go func() { got <- m.Lock(ctx) }()
	waitChildren(t, st, p, 2)
	pending(t, got, "Lock")
	if err := zl.Unlock(); err != nil {
		t.Fatalf("zk.Lock.Unlock = %v", err)
	}
	if err := result(t, got, "Lock"); err != nil {
		t.Fatalf("Lock(%q) = %v", p, err)
	}

	// corral holds, go-zookeeper waits.
	go func() { got <- zl.Lock() }()
	waitChildren(t, st, p, 2)
	pending(t, got, "zk.Lock.Lock")
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock(%q) = %v", p, err)
	}
	if err := result(t, got, "zk.Lock.Lock"); err != nil {
		t.Fatalf("zk.Lock.Lock = %v", err)
	}
	if err := zl.Unlock(); err != nil {
		t.Fatalf("zk.Lock.Unlock = %v", err)
	}

	// Both kinds at once, never two holders.
	var held atomic.Bool
	var wg gosync.WaitGroup
	errs := make(chan error, 64)
	run := func(lock, unlock func() error) {
		wg.Go(func() {
			for range 5 {
				if err := lock(); err != nil {
					errs <- err
					return
				}
				if !held.CompareAndSwap(false, true) {
					errs <- errors.New("two holders at once")
				}
				runtime.Gosched()
				held.Store(false)
				if err := unlock(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range 2 {
		m := sync.NewMutex(openZK(), p)
		run(func() error { return m.Lock(ctx) }, func() error { return m.Unlock(ctx) })
		zl := newZKLock(p)
		run(zl.Lock, zl.Unlock)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestMutexFrontHandoff: a holder granted after a wait records its release
// where the store can (store.FrontDeleter), and the waiter behind it is
// granted on that record without listing; a holder granted at once records
// nothing, and the waiter behind it reads the contenders again.
func TestMutexFrontHandoff(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		p, ctx := lockPath(t), testCtx(t)
		sts := backends.Open(t, b, 3)
		_, front := sts[0].(store.FrontDeleter)
		first := sync.NewMutex(sts[0], p)
		if err := first.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", p, err)
		}
		var (
			cs   [2]*countstore.Store
			ms   [2]*sync.Mutex
			gots [2]chan error
		)
		for i := range cs {
			cs[i] = countstore.New(sts[i+1])
			t.Cleanup(func() { _ = cs[i].Close() })
			ms[i] = sync.NewMutex(cs[i], p)
			gots[i] = make(chan error, 1)
			go func() { gots[i] <- ms[i].Lock(ctx) }()
			if err := cs[i].Wait(ctx, func(n countstore.Counts) bool { return n.NodeWatches() > 0 }); err != nil {
				t.Fatal(err)
			}
		}
		reads := func(c countstore.Counts) int { return c.Calls["ChildrenUpTo"] + c.Calls["Children"] }
		release := func(m *sync.Mutex, w int) (follows, listings int) {
			t.Helper()
			before := cs[w].Counts()
			if err := m.Unlock(ctx); err != nil {
				t.Fatalf("Unlock(%q) = %v", p, err)
			}
			if err := result(t, gots[w], "Lock"); err != nil {
				t.Fatalf("Lock(%q) = %v", p, err)
			}
			after := cs[w].Counts()
			return after.Calls["FollowsFront"] - before.Calls["FollowsFront"], reads(after) - reads(before)
		}
		// The first holder took the lock at once: no record, a listing.
		if _, listings := release(first, 0); listings == 0 {
			t.Errorf("after the release of a holder granted at once: no listing; want the view read again")
		}
		// The second waited: its release is recorded where the store can.
		follows, listings := release(ms[0], 1)
		switch {
		case front && (follows != 1 || listings != 0):
			t.Errorf("after the release of a holder that waited: %d FollowsFront, %d listings; want 1, 0", follows, listings)
		case !front && listings == 0:
			t.Errorf("after the release of a holder that waited: no listing; want the view read again (no FrontDeleter)")
		}
		if err := ms[1].Unlock(ctx); err != nil {
			t.Errorf("Unlock(%q) = %v", p, err)
		}
	})
}
