package sync_test

import (
	"context"
	"testing"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
)

// TestHoldEndsBeforeNextGrantPartitioned is corral's central promise under
// the fault a session's own connection cannot see: the server a holder
// talks to, a follower, is cut off from the other two members of its
// cluster and goes on answering the holder, while the leader expires the
// holder's 2 s session and grants the hold to a contender on another
// member. Each holder's context must be cancelled before that grant, for
// every kind of hold, every time. A ZooKeeper follower answers pings for
// syncLimit × tickTime (5 s): with a session clock that trusted every
// answer, the follower's kept the holds live up to 3.2 s after the next
// grant, in 4 runs out of 4. An etcd follower forwards lease renewals to
// its leader, so a renewal that does not come back must not extend the
// hold.
func TestHoldEndsBeforeNextGrantPartitioned(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member cluster per store")
	}
	for _, c := range []struct {
		store string
		start func(testing.TB) backends.Partitioner
	}{
		{"zk", backends.PartitionZK},
		{"etcd", backends.PartitionEtcd},
	} {
		t.Run(c.store, func(t *testing.T) {
			if !backends.Selected(c.store) {
				t.Skipf("%s not in CORRAL_STORES", c.store)
			}
			partitionHolds(t, c.start(t))
		})
	}
}

// partitionHolds races PartitionRace for every kind of hold on the
// clusters of partitioner.
func partitionHolds(t *testing.T, partitioner backends.Partitioner) {
	// The holders keep their holds across a lost connection: only their
	// session clock may end them (and the follower never drops them
	// before it gives up on its leader anyway).
	keep := sync.WithDisconnectPolicy(sync.KeepOnDisconnect)
	queued := func(p string) func(testing.TB, store.Store) {
		return func(t testing.TB, st store.Store) { backends.WaitChildren(t, st, p, backends.Count(2)) }
	}
	for _, c := range []struct {
		name string
		h    func(p string) backends.Handover
	}{
		{"Mutex", func(p string) backends.Handover {
			return backends.Handover{
				Hold: func(ctx context.Context, st store.Store) (context.Context, error) {
					m := sync.NewMutex(st, p, keep)
					err := m.Lock(ctx)
					return m.Context(), err
				},
				Next:   func(ctx context.Context, st store.Store) error { return sync.NewMutex(st, p).Lock(ctx) },
				Queued: queued(p),
			}
		}},
		{"RWMutex", func(p string) backends.Handover {
			return backends.Handover{
				Hold: func(ctx context.Context, st store.Store) (context.Context, error) {
					rw := sync.NewRWMutex(st, p, keep)
					err := rw.Lock(ctx)
					return rw.Context(), err
				},
				Next:   func(ctx context.Context, st store.Store) error { return sync.NewRWMutex(st, p).Lock(ctx) },
				Queued: queued(p),
			}
		}},
		{"Semaphore", func(p string) backends.Handover {
			return backends.Handover{
				Hold: func(ctx context.Context, st store.Store) (context.Context, error) {
					l, err := sync.NewSemaphore(st, p, 1, keep).Acquire(ctx)
					if err != nil {
						return nil, err
					}
					return l.Context(), nil
				},
				Next: func(ctx context.Context, st store.Store) error {
					_, err := sync.NewSemaphore(st, p, 1).Acquire(ctx)
					return err
				},
				Queued: queued(p),
			}
		}},
		{"Election", func(p string) backends.Handover {
			return backends.Handover{
				Hold: func(ctx context.Context, st store.Store) (context.Context, error) {
					l, err := election.New(st, p, election.WithDisconnectPolicy(election.KeepOnDisconnect)).Campaign(ctx, []byte("holder"))
					if err != nil {
						return nil, err
					}
					return l.Context(), nil
				},
				Next: func(ctx context.Context, st store.Store) error {
					_, err := election.New(st, p).Campaign(ctx, []byte("next"))
					return err
				},
				Queued: queued(p),
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			backends.PartitionMargins(t, backends.PartitionRace(t, partitioner(t), backends.PartitionRuns(t), c.h))
		})
	}
}
