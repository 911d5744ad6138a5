package election_test

import (
	"context"
	"testing"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// BenchmarkFailover measures the time from the moment a leader goes to the
// moment the waiting candidate is told it leads: after Resign, after the
// leader's session is closed, and after the server expires it (forced by
// the backend: ZooKeeper takes the session over and closes it, etcd revokes
// the lease). One op is one failover.
func BenchmarkFailover(b *testing.B) {
	ends := []struct {
		name string
		end  func(b *testing.B, be storetest.Backend, st store.Store, l *election.Leadership)
	}{
		{"resign", func(b *testing.B, _ storetest.Backend, _ store.Store, l *election.Leadership) {
			if err := l.Resign(context.Background()); err != nil {
				b.Fatalf("Resign = %v", err)
			}
		}},
		{"close", func(b *testing.B, _ storetest.Backend, st store.Store, _ *election.Leadership) {
			if err := st.Close(); err != nil {
				b.Fatalf("Close = %v", err)
			}
		}},
		{"expire", func(b *testing.B, be storetest.Backend, st store.Store, _ *election.Leadership) {
			be.Expire(b, st)
		}},
	}
	for _, end := range ends {
		b.Run(end.name, func(b *testing.B) {
			for _, name := range backends.Names {
				b.Run(name, func(b *testing.B) {
					if !backends.Selected(name) {
						b.Skipf("%s not in CORRAL_STORES", name)
					}
					be := backends.Get(b, name)
					failover(b, be, func(st store.Store, l *election.Leadership) { end.end(b, be, st, l) })
				})
			}
		})
	}
}

// failover runs b.N failovers between sessions: the leader is ended by end,
// which may end its session; a new session then queues behind the new
// leader.
func failover(b *testing.B, be storetest.Backend, end func(store.Store, *election.Leadership)) {
	// Every wait below is bounded on its own; the whole run may be long.
	ctx := b.Context()
	path := dir(b)
	leaderSt := open(b, be)
	leader, err := election.New(leaderSt, path).Campaign(ctx, []byte("first"))
	if err != nil {
		b.Fatalf("Campaign = %v", err)
	}
	for b.Loop() {
		b.StopTimer()
		waiterSt := open(b, be)
		ch := campaign(ctx, election.New(waiterSt, path), "next")
		waitCandidates(b, waiterSt, path, 2)
		b.StartTimer()

		end(leaderSt, leader)
		next := elected(b, "waiter", ch)

		b.StopTimer()
		_ = leader.Resign(ctx)
		_ = leaderSt.Close()
		leaderSt, leader = waiterSt, next
		b.StartTimer()
	}
	_ = leader.Resign(ctx)
}
