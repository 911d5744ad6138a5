package sync_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// TestMisuse: nil stores, zero values, copies and paths no primitive can
// use are typed errors, the same for every primitive; never a panic, never
// a hang (every call here gets context.Background()).
func TestMisuse(t *testing.T) {
	mem := memstore.New()
	defer mem.Close()
	bg := context.Background()
	long := "/" + strings.Repeat("x", store.MaxPathSize)
	var (
		zeroBarrier sync.Barrier
		zeroDouble  sync.DoubleBarrier
		zeroSem     sync.Semaphore
		zeroLease   sync.Lease
	)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"nil store Barrier.Set", func() error { return sync.NewBarrier(nil, "/b").Set(bg) }, store.ErrInvalidArgument},
		{"nil store Barrier.Wait", func() error { return sync.NewBarrier(nil, "/b").Wait(bg) }, store.ErrInvalidArgument},
		{"zero Barrier.Wait", func() error { return zeroBarrier.Wait(bg) }, store.ErrInvalidArgument},
		{"root Barrier.Wait", func() error { return sync.NewBarrier(mem, "/").Wait(bg) }, store.ErrInvalidPath},
		{"root Barrier.Set", func() error { return sync.NewBarrier(mem, "/").Set(bg) }, store.ErrInvalidPath},
		{"root Barrier.Remove", func() error { return sync.NewBarrier(mem, "/").Remove(bg) }, store.ErrInvalidPath},
		{"empty Barrier.Wait", func() error { return sync.NewBarrier(mem, "").Wait(bg) }, store.ErrInvalidPath},
		{"long Barrier.Set", func() error { return sync.NewBarrier(mem, long).Set(bg) }, store.ErrInvalidPath},
		{"nil store DoubleBarrier.Enter", func() error { return sync.NewDoubleBarrier(nil, "/d", 2).Enter(bg) }, store.ErrInvalidArgument},
		{"zero DoubleBarrier.Enter", func() error { return zeroDouble.Enter(bg) }, store.ErrInvalidArgument},
		{"zero DoubleBarrier.Leave", func() error { return zeroDouble.Leave(bg) }, store.ErrInvalidArgument},
		{"root DoubleBarrier.Enter", func() error { return sync.NewDoubleBarrier(mem, "/", 2).Enter(bg) }, store.ErrInvalidPath},
		{"copied DoubleBarrier.Enter", func() error { return copyOf(sync.NewDoubleBarrier(mem, "/d", 2)).Enter(bg) }, store.ErrInvalidArgument},
		{"nil store Semaphore.Acquire", func() error { _, err := sync.NewSemaphore(nil, "/s", 2).Acquire(bg); return err }, store.ErrInvalidArgument},
		{"zero Semaphore.TryAcquire", func() error { _, _, err := zeroSem.TryAcquire(bg); return err }, store.ErrInvalidArgument},
		{"empty Semaphore.Acquire", func() error { _, err := sync.NewSemaphore(mem, "", 2).Acquire(bg); return err }, store.ErrInvalidPath},
		{"zero Lease.Release", func() error { return zeroLease.Release(bg) }, store.ErrInvalidArgument},
		{"zero Lease.Context", func() error { return context.Cause(zeroLease.Context()) }, sync.ErrNotLocked},
		{"nil option Mutex.Lock", func() error { return sync.NewMutex(mem, "/m", nil).Lock(bg) }, store.ErrInvalidArgument},
		{"nil option RWMutex.Lock", func() error { return sync.NewRWMutex(mem, "/m", nil).Lock(bg) }, store.ErrInvalidArgument},
		{"nil option RWMutex.TryRLock", func() error { _, _, err := sync.NewRWMutex(mem, "/m", nil).TryRLock(bg); return err }, store.ErrInvalidArgument},
		{"nil option MultiMutex.Lock", func() error { return sync.NewMultiMutex(mem, []string{"/m1", "/m2"}, nil).Lock(bg) }, store.ErrInvalidArgument},
		{"nil option StripedMutex.Lock", func() error { _, err := sync.NewStripedMutex(mem, "/m", 2, nil).Lock(bg); return err }, store.ErrInvalidArgument},
		{"nil option Semaphore.Acquire", func() error { _, err := sync.NewSemaphore(mem, "/s", 2, nil).Acquire(bg); return err }, store.ErrInvalidArgument},
		{"nil option DoubleBarrier.Enter", func() error { return sync.NewDoubleBarrier(mem, "/d", 2, nil).Enter(bg) }, store.ErrInvalidArgument},
		{"bad policy Mutex.Lock", func() error { return sync.NewMutex(mem, "/m", sync.WithDisconnectPolicy(7)).Lock(bg) }, store.ErrInvalidArgument},
		{"bad policy Semaphore.Acquire", func() error {
			_, err := sync.NewSemaphore(mem, "/s", 2, sync.WithDisconnectPolicy(7)).Acquire(bg)
			return err
		}, store.ErrInvalidArgument},
		// A double barrier's member holds nothing a lost connection
		// could end: it takes no policy, rather than ignore one.
		{"policy DoubleBarrier.Enter", func() error {
			return sync.NewDoubleBarrier(mem, "/d", 1, sync.WithDisconnectPolicy(sync.KeepOnDisconnect)).Enter(bg)
		}, store.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				defer func() {
					if r := recover(); r != nil {
						done <- errors.New("panic")
						t.Errorf("%s panicked: %v", tt.name, r)
					}
				}()
				done <- tt.call()
			}()
			if err := result(t, done, tt.name); !errors.Is(err, tt.want) {
				t.Errorf("%s = %v; want %v", tt.name, err, tt.want)
			}
		})
	}
	if got := zeroLease.Token(); got != -1 {
		t.Errorf("zero Lease.Token() = %d; want -1", got)
	}
	if kids, err := mem.Children(bg, "/"); err != nil || len(kids) != 0 {
		t.Errorf("after the calls with bad input, the store holds %v (%v); want nothing", kids, err)
	}
}

// TestKindMismatch: two kinds of recipe on one path would not exclude each
// other; whichever comes second refuses, on every store, and leaves no node
// (nor, for a Semaphore or DoubleBarrier, its limit in a lock's directory).
func TestKindMismatch(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := backends.Open(t, b, 1)[0]
		ctx := testCtx(t)
		p := lockPath(t)
		lease, err := sync.NewSemaphore(st, p, 2).Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire(%q) = %v", p, err)
		}
		if err := sync.NewMutex(st, p).Lock(ctx); !errors.Is(err, sync.ErrKindMismatch) {
			t.Errorf("Lock on a semaphore's path = %v; want ErrKindMismatch", err)
		}
		if _, _, err := sync.NewRWMutex(st, p).TryRLock(ctx); !errors.Is(err, sync.ErrKindMismatch) {
			t.Errorf("TryRLock on a semaphore's path = %v; want ErrKindMismatch", err)
		}
		if err := sync.NewDoubleBarrier(st, p, 2).Enter(ctx); !errors.Is(err, sync.ErrKindMismatch) {
			t.Errorf("Enter on a semaphore's path = %v; want ErrKindMismatch", err)
		}
		if got := children(t, st, p); len(got) != 1 {
			t.Errorf("children = %q; want only the lease", got)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("Release = %v", err)
		}

		q := lockPath(t)
		m := sync.NewMutex(st, q)
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock(%q) = %v", q, err)
		}
		if _, _, err := sync.NewSemaphore(st, q, 2).TryAcquire(ctx); !errors.Is(err, sync.ErrKindMismatch) {
			t.Errorf("TryAcquire on a lock's path = %v; want ErrKindMismatch", err)
		}
		if err := sync.NewDoubleBarrier(st, q, 2).Enter(ctx); !errors.Is(err, sync.ErrKindMismatch) {
			t.Errorf("Enter on a lock's path = %v; want ErrKindMismatch", err)
		}
		if got := children(t, st, q); len(got) != 1 {
			t.Errorf("children = %q; want only the lock's", got)
		}
		// Refused before its limit was stored: the lock's directory is
		// as the lock made it, and goes with it.
		if dir, err := st.Get(ctx, q); err != nil || len(dir.Data) != 0 {
			t.Errorf("Get(%q) = %q, %v; want the lock's directory with no data", q, dir.Data, err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Errorf("Unlock = %v", err)
		}
	})
}
