package sync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	gosync "sync"
	"testing"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// leftBehind returns what is left below root, which the test created
// itself: every recipe directory below it must be gone after use.
func leftBehind(t *testing.T, st store.Store, root string, allowed ...string) []string {
	t.Helper()
	// A store may remove an emptied directory some time after its last
	// node went (zkstore's reclaim delay): wait for it, on watches.
	kids := backends.WaitChildren(t, st, root, func(kids []store.Child) bool {
		return !slices.ContainsFunc(kids, func(k store.Child) bool { return !slices.Contains(allowed, k.Name) })
	})
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
			r, err := rw.RLock(ctx)
			if err != nil {
				return err
			}
			if err := r.Unlock(ctx); err != nil {
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

// TestManyNamesLeaveNothing: a service that locks a name per entity (a
// thousand of them), limits a rate per tenant (a semaphore each), shares a
// lock per resource and elects a leader per job leaves no node in the store
// once done, on every store: no lock's directory, no semaphore's limit, no
// election's. (The limits once stayed for good, one node per name.)
func TestManyNamesLeaveNothing(t *testing.T) {
	const locks, others = 1000, 20
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		ctx, root := testCtx(t), lockPath(t)
		if _, err := st.Create(ctx, root, nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		for i := range locks {
			m := sync.NewMutex(st, fmt.Sprintf("%s/locks/order-%d", root, i))
			if err := m.Lock(ctx); err != nil {
				t.Fatalf("Lock %d: %v", i, err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatalf("Unlock %d: %v", i, err)
			}
		}
		for i := range others {
			l, err := sync.NewSemaphore(st, fmt.Sprintf("%s/limits/tenant-%d", root, i), 1+i%3).Acquire(ctx)
			if err != nil {
				t.Fatalf("Acquire %d: %v", i, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release %d: %v", i, err)
			}
			rw := sync.NewRWMutex(st, fmt.Sprintf("%s/resources/r-%d", root, i))
			r, err := rw.RLock(ctx)
			if err != nil {
				t.Fatalf("RLock %d: %v", i, err)
			}
			if err := r.Unlock(ctx); err != nil {
				t.Fatalf("RUnlock %d: %v", i, err)
			}
			if err := rw.Lock(ctx); err != nil {
				t.Fatalf("Lock %d: %v", i, err)
			}
			if err := rw.Unlock(ctx); err != nil {
				t.Fatalf("Unlock %d: %v", i, err)
			}
			lead, err := election.New(st, fmt.Sprintf("%s/jobs/job-%d", root, i)).Campaign(ctx, []byte("me"))
			if err != nil {
				t.Fatalf("Campaign %d: %v", i, err)
			}
			if err := lead.Resign(ctx); err != nil {
				t.Fatalf("Resign %d: %v", i, err)
			}
		}
		if left := leftBehind(t, st, root); len(left) != 0 {
			t.Errorf("after use, %q holds %q; want nothing", root, left)
		}
	})
}

// TestReclaimRace: goroutines on several sessions lock and unlock shared
// and distinct names at once, so that contenders keep creating into
// directories being removed under them. Every Lock succeeds, a shared lock
// never has two holders, and nothing is left in the end.
func TestReclaimRace(t *testing.T) {
	const workers, rounds = 8, 15
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 4)
		ctx, root := testCtx(t), lockPath(t)
		if _, err := sts[0].Create(ctx, root, nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		var (
			wg      gosync.WaitGroup
			holders [2]int32
			mu      gosync.Mutex
			errs    []error
		)
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}
		for w := range workers {
			wg.Go(func() {
				st := sts[w%len(sts)]
				for i := range rounds {
					shared := (w + i) % 2
					p := fmt.Sprintf("%s/shared-%d/x", root, shared)
					if w%2 == 1 {
						p = fmt.Sprintf("%s/own-%d-%d", root, w, i)
					}
					m := sync.NewMutex(st, p)
					if err := m.Lock(ctx); err != nil {
						fail(fmt.Errorf("Lock(%q): %w", p, err))
						return
					}
					if w%2 == 0 {
						mu.Lock()
						holders[shared]++
						two := holders[shared] > 1
						mu.Unlock()
						if two {
							fail(fmt.Errorf("two holders of %q", p))
						}
						mu.Lock()
						holders[shared]--
						mu.Unlock()
					}
					if err := m.Unlock(ctx); err != nil {
						fail(fmt.Errorf("Unlock(%q): %w", p, err))
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			t.Error(err)
		}
		if left := leftBehind(t, sts[0], root); len(left) != 0 {
			t.Errorf("after the race, %q holds %q; want nothing", root, left)
		}
	})
}
