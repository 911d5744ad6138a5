package sync_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/zkstore"
)

// expiryRuns is how many times each case of the expiry tests freezes a
// holder; the runs of a case go in parallel.
const expiryRuns = 10

// expirySession is the session timeout (lease TTL) of the frozen holders.
const expirySession = 2 * time.Second

// TestHoldEndsBeforeNextGrant is corral's central promise under the worst
// fault: a holder's connection freezes (no bytes, no FIN) for longer than
// its session timeout. The server expires the session and grants the lock,
// or the semaphore's lease, to a waiter in another session; the frozen
// holder's context must be cancelled before that, under both disconnect
// policies, every time, on ZooKeeper under KeepOnDisconnect too.
func TestHoldEndsBeforeNextGrant(t *testing.T) {
	for _, name := range []string{"zk", "etcd"} {
		t.Run(name, func(t *testing.T) {
			if !backends.Selected(name) {
				t.Skipf("%s not in CORRAL_STORES", name)
			}
			expiryCases(t, backends.Short(t, name, expirySession), backends.Get(t, name))
		})
	}
	// A server that grants a shorter session than asked: the client must
	// count in the granted one.
	t.Run("zk-clamped", func(t *testing.T) {
		if !backends.Selected("zk") {
			t.Skip("zk not in CORRAL_STORES")
		}
		zkserver.Require(t)
		srv := zkserver.ForTest(t, zkserver.Config{MaxSessionTimeout: expirySession})
		hb := zkbackend.New([]string{srv.Addr()}, zkstore.WithSessionTimeout(3*expirySession))
		expiryCases(t, hb, zkbackend.New([]string{srv.Addr()}))
	})
}

func expiryCases(t *testing.T, hb, nb storetest.Backend) {
	for _, policy := range []sync.DisconnectPolicy{sync.LoseOnDisconnect, sync.KeepOnDisconnect} {
		mutex := func(p string) backends.Handover {
			return backends.Handover{
				Hold: func(ctx context.Context, st store.Store) (context.Context, error) {
					m := sync.NewMutex(st, p, sync.WithDisconnectPolicy(policy))
					err := m.Lock(ctx)
					return m.Context(), err
				},
				Next: func(ctx context.Context, st store.Store) error { return sync.NewMutex(st, p).Lock(ctx) },
			}
		}
		semaphore := func(p string) backends.Handover {
			return backends.Handover{
				Hold: func(ctx context.Context, st store.Store) (context.Context, error) {
					l, err := sync.NewSemaphore(st, p, 1, sync.WithDisconnectPolicy(policy)).Acquire(ctx)
					if err != nil {
						return nil, err
					}
					return l.Context(), nil
				},
				Next: func(ctx context.Context, st store.Store) error {
					_, err := sync.NewSemaphore(st, p, 1).Acquire(ctx)
					return err
				},
			}
		}
		for _, c := range []struct {
			name string
			h    func(p string) backends.Handover
		}{{"Mutex", mutex}, {"Semaphore", semaphore}} {
			t.Run(fmt.Sprintf("%s/%v", c.name, policy), func(t *testing.T) {
				expiryRace(t, hb, nb, policy, c.h)
			})
		}
	}
}

// expiryRace runs expiryRuns races in parallel, each on a path of its own,
// and checks every margin and cause.
func expiryRace(t *testing.T, hb, nb storetest.Backend, policy sync.DisconnectPolicy, handover func(p string) backends.Handover) {
	margins := make([]time.Duration, expiryRuns)
	t.Run("runs", func(t *testing.T) {
		for i := range expiryRuns {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				p := lockPath(t)
				h := handover(p)
				h.Queued = func(t testing.TB, st store.Store) { backends.WaitChildren(t, st, p, backends.Count(2)) }
				margin, cause := backends.ExpiryRace(t, hb, nb, h)
				margins[i] = margin
				if margin <= 0 {
					t.Errorf("the frozen holder's context was cancelled %v after the next grant; want before", -margin)
				}
				want := store.ErrSessionExpired
				if policy == sync.LoseOnDisconnect && errors.Is(cause, sync.ErrDisconnected) {
					want = sync.ErrDisconnected // it saw the connection fail first
				}
				if !errors.Is(cause, want) {
					t.Errorf("cause = %v; want %v", cause, want)
				}
			})
		}
	})
	if !t.Failed() {
		least, median := backends.Margins(margins)
		t.Logf("margin before the next grant over %d runs: least %v, median %v", expiryRuns, least, median)
	}
}
