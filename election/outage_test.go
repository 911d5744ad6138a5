package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
)

// TestOutageSweep: a campaign waiting behind a leader is cut off for a
// sweep of outage lengths (see sync's TestOutageSweep) and gives up after
// 1 s. It returns within its ctx plus the cleanup grace, and once the link
// heals (or the session ends) its node is gone within one session timeout,
// so a fresh candidate leads as soon as the leader resigns.
func TestOutageSweep(t *testing.T) {
	const session = 3 * time.Second
	outages := []time.Duration{500 * time.Millisecond, 2 * time.Second, 4 * time.Second, session + 2*time.Second}
	campaign := backends.OutageOp{
		Name: "Campaign",
		Run: func(e *backends.OutageEnv) {
			leader, err := election.New(e.Other, e.Dir).Campaign(e.Ctx, []byte("leader"))
			if err != nil {
				e.T.Fatalf("Campaign = %v", err)
			}
			got := make(chan error, 1)
			go func() {
				got <- e.Call(func(ctx context.Context) error {
					_, err := election.New(e.St, e.Dir).Campaign(ctx, []byte("cut off"))
					return err
				})
			}()
			waitCandidates(e.T, e.Other, e.Dir, 2)
			e.Cut()
			if err := <-got; !errors.Is(err, context.DeadlineExceeded) {
				e.T.Errorf("Campaign cut off while it waited = %v; want context.DeadlineExceeded", err)
			}
			if err := leader.Resign(e.Ctx); err != nil {
				e.T.Errorf("Resign = %v", err)
			}
		},
		Again: func(ctx context.Context, st store.Store, dir string) error {
			l, err := election.New(st, dir).Campaign(ctx, []byte("fresh"))
			if err != nil {
				return err
			}
			return l.Resign(ctx)
		},
	}
	bound := recipe.CleanupGrace + time.Second
	for _, name := range []string{"zk", "etcd"} {
		for _, r := range backends.OutageSweep(t, name, session, bound, outages, []backends.OutageOp{campaign}) {
			t.Logf("%-4s %-6v %-10s overrun %-8v orphans %d", r.Store, r.Outage, r.Op, r.Overrun.Round(time.Millisecond), r.Orphans)
		}
	}
}
