package sync_test

import (
	"context"
	"errors"
	"fmt"
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

// lease is the marker in the names of a semaphore's lease nodes.
const lease = "lease-"

// semAcquire starts an Acquire of s and waits until its node is there, so
// that waiters are in line in the order they were started.
func semAcquire(t *testing.T, ctx context.Context, obs store.Store, s *sync.Semaphore) <-chan semResult {
	t.Helper()
	before := len(bkids(t, obs, s.Path(), lease))
	ch := make(chan semResult, 1)
	go func() {
		l, err := s.Acquire(ctx)
		ch <- semResult{l, err}
	}()
	bwaitKids(t, obs, s.Path(), lease, func(n int) bool { return n > before })
	return ch
}

type semResult struct {
	l   *sync.Lease
	err error
}

func semGot(t *testing.T, ch <-chan semResult, what string) *sync.Lease {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: Acquire = %v; want a lease", what, r.err)
		}
		return r.l
	case <-time.After(bTimeout):
		t.Fatalf("%s: Acquire did not return", what)
		return nil
	}
}

func semFailed(t *testing.T, ch <-chan semResult, what string, want error) {
	t.Helper()
	select {
	case r := <-ch:
		if !errors.Is(r.err, want) {
			t.Errorf("%s: Acquire = %v, %v; want %v", what, r.l, r.err, want)
		}
	case <-time.After(bTimeout):
		t.Fatalf("%s: Acquire did not return", what)
	}
}

func semPending(t *testing.T, what string, chs ...<-chan semResult) {
	t.Helper()
	for i, ch := range chs {
		select {
		case r := <-ch:
			t.Fatalf("%s #%d: Acquire = %v, %v; want it still blocked", what, i, r.l, r.err)
		default:
		}
	}
}

// semLost waits until the lease is lost to its session's expiry and
// returns the cause: the expiry, or the deletion of the node when the store
// reports that first (etcd can).
func semLost(t *testing.T, l *sync.Lease) error {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(bTimeout):
		t.Fatal("lease's context not cancelled on expiry")
	}
	cause := context.Cause(l.Context())
	if !errors.Is(cause, store.ErrSessionExpired) && !errors.Is(cause, sync.ErrNodeDeleted) {
		t.Errorf("lease's context cause = %v; want %v or %v", cause, store.ErrSessionExpired, sync.ErrNodeDeleted)
	}
	return cause
}

func semRelease(t *testing.T, ctx context.Context, l *sync.Lease) {
	t.Helper()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release = %v", err)
	}
}

func TestSemaphoreBlocksAtLimit(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const n = 3
		sts := bopen(t, b, n+3)
		obs := sts[0]
		ctx, p := bctx(t), bpath(t)
		var leases []*sync.Lease
		for i := range n {
			leases = append(leases, semGot(t, semAcquire(t, ctx, obs, sync.NewSemaphore(sts[i], p, n)), "holder"))
		}
		w1 := semAcquire(t, ctx, obs, sync.NewSemaphore(sts[n], p, n))
		w2 := semAcquire(t, ctx, obs, sync.NewSemaphore(sts[n+1], p, n))
		semPending(t, "waiter", w1, w2)
		// Leases are released in any order; each release lets one waiter
		// in, first come first served.
		semRelease(t, ctx, leases[1])
		leases[1] = semGot(t, w1, "first waiter")
		semPending(t, "second waiter", w2)
		semRelease(t, ctx, leases[2])
		leases[2] = semGot(t, w2, "second waiter")
		for _, l := range leases {
			semRelease(t, ctx, l)
		}
		if kids := bkids(t, obs, p, lease); len(kids) != 0 {
			t.Errorf("after every Release the semaphore holds %q; want no lease", kids)
		}
	})
}

func TestSemaphoreNoHerd(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const n, waiters = 2, 4
		sts := bcount(t, b, n+waiters)
		obs := bopen(t, b, 1)[0]
		ctx, p := bctx(t), bpath(t)
		var leases []*sync.Lease
		for i := range n {
			leases = append(leases, semGot(t, semAcquire(t, ctx, obs, sync.NewSemaphore(sts[i], p, n)), "holder"))
		}
		var ws []<-chan semResult
		for i := range waiters {
			ws = append(ws, semAcquire(t, ctx, obs, sync.NewSemaphore(sts[n+i], p, n)))
		}
		// Every waiter watches: the first both holders, the others the one
		// before them.
		for i := range waiters {
			want := 1
			if i == 0 {
				want = n
			}
			if err := sts[n+i].Wait(ctx, func(c countstore.Counts) bool { return c.NodeWatches() >= want }); err != nil {
				t.Fatalf("waiter %d does not watch: %v", i, err)
			}
			sts[n+i].Reset()
		}
		semRelease(t, ctx, leases[1])
		leases[1] = semGot(t, ws[0], "first waiter")
		// The new holder hands the watch of the holders down to the next
		// waiter, which is woken by that alone.
		if err := sts[n+1].Wait(ctx, func(c countstore.Counts) bool { return c.NodeWatches() >= n }); err != nil {
			t.Fatalf("second waiter does not move up: %v", err)
		}
		semPending(t, "waiter", ws[1:]...)
		for i := range waiters {
			want := 0
			if i < 2 {
				want = 1
			}
			if got := sts[n+i].Counts().Wakeups; got != want {
				t.Errorf("waiter %d woken %d times by one release; want %d", i, got, want)
			}
		}
		for _, l := range leases {
			semRelease(t, ctx, l)
		}
		for _, w := range ws[1:] {
			semRelease(t, ctx, semGot(t, w, "waiter"))
		}
	})
}

func TestSemaphoreCancel(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := bcount(t, b, 3)
		obs := bopen(t, b, 1)[0]
		ctx, p := bctx(t), bpath(t)
		held := semGot(t, semAcquire(t, ctx, obs, sync.NewSemaphore(sts[0], p, 1)), "holder")
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w1 := semAcquire(t, cctx, obs, sync.NewSemaphore(sts[1], p, 1))
		w2 := semAcquire(t, ctx, obs, sync.NewSemaphore(sts[2], p, 1))
		if err := sts[1].Wait(ctx, func(c countstore.Counts) bool { return c.NodeWatches() > 0 }); err != nil {
			t.Fatalf("waiter does not watch: %v", err)
		}
		cancel()
		semFailed(t, w1, "cancelled waiter", context.Canceled)
		bwaitKids(t, obs, p, lease, func(n int) bool { return n == 2 }) // its node is gone
		semPending(t, "waiter behind", w2)
		semRelease(t, ctx, held)
		semRelease(t, ctx, semGot(t, w2, "waiter behind"))
	})
}

func TestSemaphoreSessionExpires(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		t.Run("holder", func(t *testing.T) {
			sts := bopen(t, b, 2)
			ctx, p := bctx(t), bpath(t)
			// KeepOnDisconnect: ZooKeeper's client sees its connection
			// drop before it learns of the expiry, which the default
			// policy would report first.
			holder := sync.NewSemaphore(sts[0], p, 1, sync.WithDisconnectPolicy(sync.KeepOnDisconnect))
			held := semGot(t, semAcquire(t, ctx, sts[1], holder), "holder")
			w := semAcquire(t, ctx, sts[1], sync.NewSemaphore(sts[1], p, 1))
			b.Expire(t, sts[0])
			cause := semLost(t, held)
			l := semGot(t, w, "waiter")
			if err := held.Release(ctx); !errors.Is(err, sync.ErrLockLost) || !errors.Is(err, cause) {
				t.Errorf("Release of an expired lease = %v; want %v and %v", err, sync.ErrLockLost, cause)
			}
			semRelease(t, ctx, l)
		})
		t.Run("waiter", func(t *testing.T) {
			sts := bopen(t, b, 3)
			ctx, p := bctx(t), bpath(t)
			held := semGot(t, semAcquire(t, ctx, sts[2], sync.NewSemaphore(sts[0], p, 1)), "holder")
			w1 := semAcquire(t, ctx, sts[2], sync.NewSemaphore(sts[1], p, 1))
			w2 := semAcquire(t, ctx, sts[2], sync.NewSemaphore(sts[2], p, 1))
			b.Expire(t, sts[1])
			semFailed(t, w1, "expired waiter", store.ErrSessionExpired)
			bwaitKids(t, sts[2], p, lease, func(n int) bool { return n == 2 })
			semPending(t, "waiter behind", w2)
			semRelease(t, ctx, held)
			semRelease(t, ctx, semGot(t, w2, "waiter behind"))
		})
	})
}

// TestSemaphoreContention checks, with a counter inside the critical
// section, that no more than n leases are ever held, while workers contend,
// give up and lose their sessions.
func TestSemaphoreContention(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const n, workers, rounds = 3, 8, 8
		ctx, p := bctx(t), bpath(t)
		var cur, peak atomic.Int32
		var expiries atomic.Int32
		var wg gosync.WaitGroup
		errs := make(chan error, workers*rounds)
		for w := range workers {
			wg.Go(func() {
				st := b.Open(t)
				defer func() { _ = st.Close() }()
				for r := range rounds {
					actx, cancel := ctx, context.CancelFunc(func() {})
					if (w+r)%4 == 0 {
						// Some give up after a while.
						actx, cancel = context.WithTimeout(ctx, time.Duration(r)*time.Millisecond)
					}
					l, err := sync.NewSemaphore(st, p, n).Acquire(actx)
					cancel()
					if err != nil {
						if actx.Err() == nil || !errors.Is(err, actx.Err()) {
							errs <- fmt.Errorf("worker %d: Acquire = %v", w, err)
							return
						}
						continue
					}
					c := cur.Add(1)
					if c > n {
						errs <- fmt.Errorf("worker %d: %d holders of a semaphore of %d", w, c, n)
					}
					for m := peak.Load(); c > m && !peak.CompareAndSwap(m, c); m = peak.Load() {
					}
					if err := l.Context().Err(); err != nil {
						errs <- fmt.Errorf("worker %d: lease granted ended: %v", w, context.Cause(l.Context()))
					}
					// The work: a round trip, so that holders overlap.
					if _, err := st.Get(ctx, p); err != nil {
						errs <- fmt.Errorf("worker %d: Get = %v", w, err)
					}
					cur.Add(-1)
					if r == 3 && w < 2 && expiries.Add(1) <= 2 {
						// Lose the session while holding.
						b.Expire(t, st)
						select {
						case <-l.Context().Done():
						case <-time.After(bTimeout):
							errs <- fmt.Errorf("worker %d: lease not lost on expiry", w)
						}
						if err := l.Release(ctx); !errors.Is(err, sync.ErrLockLost) {
							errs <- fmt.Errorf("worker %d: Release after expiry = %v; want %v", w, err, sync.ErrLockLost)
						}
						_ = st.Close()
						st = b.Open(t)
						continue
					}
					if err := l.Release(ctx); err != nil {
						errs <- fmt.Errorf("worker %d: Release = %v", w, err)
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
		t.Logf("peak holders: %d of %d", peak.Load(), n)
		obs := bopen(t, b, 1)[0]
		if kids := bkids(t, obs, p, lease); len(kids) != 0 {
			t.Errorf("after the workers the semaphore holds %q; want no lease", kids)
		}
	})
}

func TestSemaphoreTryAcquire(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := bopen(t, b, 1)[0]
		ctx := bctx(t)
		s := sync.NewSemaphore(st, bpath(t), 2)
		var held []*sync.Lease
		steps := []struct {
			ok     bool
			leases int // lease nodes afterwards
		}{{true, 1}, {true, 2}, {false, 2}, {false, 2}}
		for i, step := range steps {
			l, ok, err := s.TryAcquire(ctx)
			if err != nil || ok != step.ok || (l != nil) != step.ok {
				t.Fatalf("step %d: TryAcquire = %v, %v, %v; want ok %v", i, l, ok, err, step.ok)
			}
			if ok {
				held = append(held, l)
			}
			if got := len(bkids(t, st, s.Path(), lease)); got != step.leases {
				t.Fatalf("step %d: %d lease nodes; want %d", i, got, step.leases)
			}
		}
		semRelease(t, ctx, held[0])
		l, ok, err := s.TryAcquire(ctx)
		if err != nil || !ok {
			t.Fatalf("TryAcquire after a release = %v, %v, %v; want a lease", l, ok, err)
		}
		semRelease(t, ctx, l)
		semRelease(t, ctx, held[1])
	})
}

func TestSemaphoreRelease(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := bopen(t, b, 1)[0]
		ctx := bctx(t)
		l, err := sync.NewSemaphore(st, bpath(t), 1).Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		if err := l.Context().Err(); err != nil {
			t.Fatalf("a held lease's context is done: %v", err)
		}
		if l.Token() < 0 {
			t.Errorf("Token() = %d; want >= 0", l.Token())
		}
		tests := []struct {
			name string
			want error
		}{{"first", nil}, {"second", sync.ErrUnlocked}}
		for _, tt := range tests {
			if err := l.Release(ctx); !errors.Is(err, tt.want) || (err != nil) != (tt.want != nil) {
				t.Errorf("%s Release = %v; want %v", tt.name, err, tt.want)
			}
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, sync.ErrUnlocked) {
			t.Errorf("cause after Release = %v; want %v", cause, sync.ErrUnlocked)
		}
	})
}

// TestSemaphoreLimit: a limit under 1 is refused; an Acquire with another
// limit than a lease there is refused with ErrMismatch and leaves no node;
// once the leases are released the limit goes with them, and the node at
// the path too, whatever it held, is no limit.
func TestSemaphoreLimit(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := bopen(t, b, 1)[0]
		ctx := bctx(t)
		for _, n := range []int{0, -2} {
			if _, err := sync.NewSemaphore(st, bpath(t), n).Acquire(ctx); !errors.Is(err, sync.ErrInvalidLimit) {
				t.Errorf("Acquire(n=%d) = %v; want %v", n, err, sync.ErrInvalidLimit)
			}
		}
		path := bpath(t)
		held, err := sync.NewSemaphore(st, path, 2).Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire(n=2) = %v", err)
		}
		other := sync.NewSemaphore(st, path, 3)
		if _, err := other.Acquire(ctx); !errors.Is(err, sync.ErrMismatch) {
			t.Errorf("Acquire(n=3) beside a lease of 2 = %v; want %v", err, sync.ErrMismatch)
		}
		if _, _, err := other.TryAcquire(ctx); !errors.Is(err, sync.ErrMismatch) {
			t.Errorf("TryAcquire(n=3) beside a lease of 2 = %v; want %v", err, sync.ErrMismatch)
		}
		if kids := bkids(t, st, path, lease); len(kids) != 1 {
			t.Errorf("after the refused calls the semaphore holds %q; want the one lease", kids)
		}
		semRelease(t, ctx, held)
		l, err := other.Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire(n=3) once the leases of 2 are released = %v; want nil", err)
		}
		semRelease(t, ctx, l)

		// A node at the path, whatever its data, stores no limit.
		for _, data := range [][]byte{[]byte("config"), []byte("7"), nil} {
			path := bpath(t)
			if _, err := st.Create(ctx, path, data, store.Persistent); err != nil {
				t.Fatal(err)
			}
			l, err := sync.NewSemaphore(st, path, 3).Acquire(ctx)
			if err != nil {
				t.Fatalf("Acquire(n=3) under a node holding %q = %v; want nil", data, err)
			}
			semRelease(t, ctx, l)
		}
	})
}

func TestSemaphoreDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("the backend cannot cut a connection")
		}
		tests := []struct {
			policy sync.DisconnectPolicy
			want   error // the cause after the disconnection; nil: still held
		}{
			{sync.LoseOnDisconnect, sync.ErrDisconnected},
			{sync.KeepOnDisconnect, nil},
		}
		for _, tt := range tests {
			t.Run(tt.policy.String(), func(t *testing.T) {
				st := bopen(t, b, 1)[0]
				ctx := bctx(t)
				l, err := sync.NewSemaphore(st, bpath(t), 1, sync.WithDisconnectPolicy(tt.policy)).Acquire(ctx)
				if err != nil {
					t.Fatalf("Acquire = %v", err)
				}
				d.Disconnect(t, st)
				if tt.want != nil {
					select {
					case <-l.Context().Done():
					case <-time.After(bTimeout):
						t.Fatal("lease's context not cancelled on disconnection")
					}
				}
				d.Reconnect(t, st)
				if cause := context.Cause(l.Context()); !errors.Is(cause, tt.want) || (cause != nil) != (tt.want != nil) {
					t.Errorf("cause after a disconnection = %v; want %v", cause, tt.want)
				}
				err = l.Release(ctx)
				if tt.want != nil && !errors.Is(err, sync.ErrLockLost) {
					t.Errorf("Release = %v; want %v", err, sync.ErrLockLost)
				}
				if tt.want == nil && err != nil {
					t.Errorf("Release = %v; want nil", err)
				}
			})
		}
	})
}

// lostListing is a store without store.CreateLister whose first Children
// call loses its reply: the connection drops after the server answered.
type lostListing struct {
	store.Store
	lost atomic.Bool
}

func (s *lostListing) Children(ctx context.Context, p string) ([]store.Child, error) {
	kids, err := s.Store.Children(ctx, p)
	if err == nil && s.lost.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("reply to Children(%q) lost: %w", p, store.ErrDisconnected)
	}
	return kids, err
}

// TestSemaphoreListingRetried: on a store without CreateLister, a listing
// after the create that loses its reply is tried again, as for a Mutex, and
// the lease is granted on its node.
func TestSemaphoreListingRetried(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		raw := backends.Open(t, b, 1)[0]
		st := &lostListing{Store: raw}
		p, ctx := lockPath(t), testCtx(t)
		l, err := sync.NewSemaphore(st, p, 1).Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire = %v; want a lease after the listing was tried again", err)
		}
		if !st.lost.Load() {
			t.Fatal("no listing lost its reply: the test tested nothing")
		}
		if kids := children(t, raw, p); len(kids) != 1 {
			t.Errorf("children = %q; want the one lease", kids)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
