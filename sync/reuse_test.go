package sync_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	gosync "sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
	"golang.org/x/sync/errgroup"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/sync"
)

// occupancy checks exclusion among the holders of one lock, whatever client
// they use: writers exclude everyone, readers only writers.
type occupancy struct {
	mu               gosync.Mutex
	readers, writers int
	grants           int
}

func (o *occupancy) enter(t *testing.T, who string, shared bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.writers > 0 || !shared && o.readers > 0 {
		t.Errorf("%s granted while %d writers and %d readers hold the lock", who, o.writers, o.readers)
	}
	if shared {
		o.readers++
	} else {
		o.writers++
	}
	o.grants++
}

func (o *occupancy) leave(shared bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if shared {
		o.readers--
	} else {
		o.writers--
	}
}

// TestLockNameReuseEtcd mixes corral's locks with etcd's own
// concurrency.Mutex on one prefix. etcd's clients name their key after their
// session's lease and use that name again for every Lock of the session;
// corral's sessions here read every reply a few milliseconds late, so the
// predecessor a corral waiter picked has often been released and made again
// under the same name, behind the waiter, by the time it watches. A waiter
// that waits for the name rather than the node deadlocks with it (the first
// scenario then hangs within its first few rounds); here every corral
// contender must finish its rounds, and no two holders may overlap.
func TestLockNameReuseEtcd(t *testing.T) {
	if !backends.Selected("etcd") {
		t.Skip("etcd not in CORRAL_STORES")
	}
	eb := backends.Get(t, "etcd").(*etcdbackend.Backend)
	type contender struct {
		lock, unlock func(context.Context) error
		shared       bool
	}
	mutex := func(t *testing.T, p string) contender {
		m := sync.NewMutex(eb.OpenDelayed(t, lateReply), p)
		return contender{m.Lock, m.Unlock, false}
	}
	writer := func(t *testing.T, p string) contender {
		rw := sync.NewRWMutex(eb.OpenDelayed(t, lateReply), p)
		return contender{rw.Lock, rw.Unlock, false}
	}
	reader := func(t *testing.T, p string) contender {
		rw := sync.NewRWMutex(eb.OpenDelayed(t, lateReply), p)
		lock, unlock := readSide(rw)
		return contender{lock, unlock, true}
	}
	tests := []struct {
		name   string
		corral []func(*testing.T, string) contender
		etcd   int // concurrency.Mutex clients
	}{
		{"Mutex", []func(*testing.T, string) contender{mutex}, 1},
		{"Writer", []func(*testing.T, string) contender{writer}, 1},
		{"Reader", []func(*testing.T, string) contender{reader}, 1},
		{"Mixed", []func(*testing.T, string) contender{mutex, mutex, writer, reader, reader}, 2},
	}
	const rounds = 30
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := lockPath(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var occ occupancy
			hold := func(who string, shared bool) {
				occ.enter(t, who, shared)
				occ.leave(shared)
			}
			// etcd's clients go on until corral's are done, so that
			// corral's waiters meet them all along.
			corralDone := make(chan struct{})
			g, gctx := errgroup.WithContext(ctx)
			for i := range tt.etcd {
				sess, err := concurrency.NewSession(eb.Cluster().Client(t), concurrency.WithTTL(10))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sess.Close() })
				em := concurrency.NewMutex(sess, p)
				g.Go(func() error {
					for {
						select {
						case <-corralDone:
							return nil
						default:
						}
						if err := em.Lock(gctx); err != nil {
							return fmt.Errorf("concurrency.Mutex %d: Lock = %w", i, err)
						}
						hold(fmt.Sprintf("concurrency.Mutex %d", i), false)
						// Unlock and line up again at once, under
						// the same key.
						if err := em.Unlock(context.WithoutCancel(gctx)); err != nil {
							return fmt.Errorf("concurrency.Mutex %d: Unlock = %w", i, err)
						}
					}
				})
			}
			var corral errgroup.Group
			for i, mk := range tt.corral {
				c := mk(t, p)
				corral.Go(func() error {
					for r := range rounds {
						if err := c.lock(gctx); err != nil {
							return fmt.Errorf("corral contender %d, round %d: lock = %w", i, r, err)
						}
						hold(fmt.Sprintf("corral contender %d", i), c.shared)
						if err := c.unlock(gctx); err != nil {
							return fmt.Errorf("corral contender %d, round %d: unlock = %w", i, r, err)
						}
					}
					return nil
				})
			}
			g.Go(func() error {
				defer close(corralDone)
				return corral.Wait()
			})
			if err := g.Wait(); err != nil {
				t.Fatalf("%v (after %d grants; a deadline here is the deadlock)", err, occ.grants)
			}
			if want := len(tt.corral) * rounds; occ.grants < want {
				t.Errorf("%d grants; want at least corral's %d", occ.grants, want)
			}
		})
	}
}

// lateReply is the reply delay of corral's sessions in the name-reuse tests:
// longer than etcd's own client takes to unlock and lock again.
func lateReply() time.Duration { return time.Duration(1+rand.IntN(4)) * time.Millisecond }
