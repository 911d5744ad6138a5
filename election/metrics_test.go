package election_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/store/storetest"
)

// TestMetrics: terms count as grants and holds, a deleted leader's node as
// a lost hold, and an observer counts the changes of leader it sees.
func TestMetrics(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		mr := metrictest.New(t)
		a, c := open(t, b), open(t, b)
		p, ctx := dir(t), ctxFor(t)
		opt := election.WithMeterProvider(mr.Provider())
		kind := attribute.String("corral.kind", "election")

		obs := election.New(c, p, opt).Observe(ctx)
		defer obs.Close()
		if l, _ := next(t, "first observation", obs.Leaders()); !l.IsZero() {
			t.Fatalf("first observation = %v; want no leader", l)
		}
		first := elected(t, "a", campaign(ctx, election.New(a, p, opt), "a"))
		second := campaign(ctx, election.New(c, p, opt), "c")
		waitCandidates(t, a, p, 2)
		s := mr.Collect()
		if g, h, w := s.Int("corral.grants", kind), s.Int("corral.holders", kind), s.Int("corral.waiters", kind); g != 1 || h != 1 || w != 1 {
			t.Errorf("one leader, one candidate: grants %d, holders %d, waiters %d; want 1, 1, 1", g, h, w)
		}
		for l := range obs.Leaders() {
			if string(l.Value) == "a" {
				break
			}
		}
		if err := first.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		lead := elected(t, "c", second)
		for l := range obs.Leaders() {
			if string(l.Value) == "c" {
				break
			}
		}
		// Someone deletes the leader's node: the term is lost.
		if err := a.Delete(ctx, lead.Path()); err != nil {
			t.Fatal(err)
		}
		waitDone(t, "c", lead)
		for l := range obs.Leaders() {
			if l.IsZero() {
				break
			}
		}
		if err := lead.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		s = mr.Collect()
		lost := s.Int("corral.lost", kind, attribute.String("corral.cause", "node_deleted"))
		released, _ := s.Hist("corral.hold.duration", kind, attribute.String("corral.outcome", "released"))
		if lost != 1 || released != 1 || s.Int("corral.holders") != 0 || s.Int("corral.waiters") != 0 {
			t.Errorf("lost %d, released %d, holders %d, waiters %d; want 1, 1, 0, 0",
				lost, released, s.Int("corral.holders"), s.Int("corral.waiters"))
		}
		// no leader -> a -> c -> no leader
		if n := s.Int("corral.election.leader_changes", kind); n != 3 {
			t.Errorf("leader_changes = %d; want 3", n)
		}
	})
}
