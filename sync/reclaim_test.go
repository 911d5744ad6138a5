package sync_test

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// leftBehind returns what is left below root, which the test created
// itself: every recipe directory below it must be gone after use.
func leftBehind(t *testing.T, st store.Store, root string) []string {
	t.Helper()
	kids, err := st.Children(testCtx(t), root)
	if err != nil {
		t.Fatalf("Children(%q) = %v", root, err)
	}
	var names []string
	for _, k := range kids {
		names = append(names, k.Name)
	}
	return names
}

// TestDirectoriesReclaimed: after use, no recipe leaves its directory (or
// the directories above it that Create made) in the store.
func TestDirectoriesReclaimed(t *testing.T) {
	uses := []struct {
		name string
		use  func(ctx context.Context, sts []store.Store, p string) error
	}{
		{"Mutex", func(ctx context.Context, sts []store.Store, p string) error {
			a, b := sync.NewMutex(sts[0], p), sync.NewMutex(sts[1], p)
			if err := a.Lock(ctx); err != nil {
				return err
			}
			got := make(chan error, 1)
			go func() { got <- b.Lock(ctx) }() // waits behind a
			if err := a.Unlock(ctx); err != nil {
				return err
			}
			if err := <-got; err != nil {
				return err
			}
			return b.Unlock(ctx)
		}},
		{"RWMutex", func(ctx context.Context, sts []store.Store, p string) error {
			rw := sync.NewRWMutex(sts[0], p)
			if err := rw.RLock(ctx); err != nil {
				return err
			}
			if err := rw.RUnlock(ctx); err != nil {
				return err
			}
			if err := rw.Lock(ctx); err != nil {
				return err
			}
			return rw.Unlock(ctx)
		}},
		{"MultiMutex", func(ctx context.Context, sts []store.Store, p string) error {
			m := sync.NewMultiMutex(sts[0], []string{p + "/a", p + "/b"})
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		}},
		{"StripedMutex", func(ctx context.Context, sts []store.Store, p string) error {
			s, err := sync.NewStripedMutex(sts[0], p, 4).Lock(ctx, 0, 3)
			if err != nil {
				return err
			}
			return s.Unlock(ctx)
		}},
		{"Semaphore", func(ctx context.Context, sts []store.Store, p string) error {
			l, err := sync.NewSemaphore(sts[0], p, 2).Acquire(ctx)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}},
		{"Barrier", func(ctx context.Context, sts []store.Store, p string) error {
			b := sync.NewBarrier(sts[0], p)
			if err := b.Set(ctx); err != nil {
				return err
			}
			if err := b.Remove(ctx); err != nil {
				return err
			}
			return b.Wait(ctx)
		}},
		{"DoubleBarrier", func(ctx context.Context, sts []store.Store, p string) error {
			var wg gosync.WaitGroup
			errs := make([]error, 2)
			for i := range 2 {
				wg.Go(func() {
					b := sync.NewDoubleBarrier(sts[i], p, 2)
					if errs[i] = b.Enter(ctx); errs[i] == nil {
						errs[i] = b.Leave(ctx)
					}
				})
			}
			wg.Wait()
			return errors.Join(errs...)
		}},
	}
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		for _, u := range uses {
			t.Run(u.name, func(t *testing.T) {
				ctx, root := testCtx(t), lockPath(t)
				if _, err := sts[0].Create(ctx, root, nil, store.Persistent); err != nil {
					t.Fatal(err)
				}
				for i := range 3 { // distinct names, and one used again
					p := fmt.Sprintf("%s/entity-%d/x", root, i%2)
					if err := u.use(ctx, sts, p); err != nil {
						t.Fatalf("use %d of %q: %v", i, p, err)
					}
				}
				if left := leftBehind(t, sts[1], root); len(left) != 0 {
					t.Errorf("after use, %q holds %q; want nothing", root, left)
				}
			})
		}
	})
}
