package group_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/store/storetest"
)

// TestMetrics: a Watcher given a MeterProvider counts the changes of the
// member list it sees there (not the first list) and records the size of
// the latest; memberships count as grants and holds.
func TestMetrics(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		mr := metrictest.New(t)
		sts := backends.Open(t, b, 3)
		p := dir(t)
		opt := group.WithMeterProvider(mr.Provider())
		attrs := []attribute.KeyValue{attribute.String("corral.kind", "group"), attribute.String("corral.path", p)}

		w := group.Watch(ctxFor(t), sts[0], p, opt)
		defer w.Close()
		until(t, w)
		s := mr.Collect()
		if n, ok := s.Gauge("corral.group.members", attrs...); !ok || n != 0 {
			t.Errorf("members after the first list = %d, %v; want 0, true", n, ok)
		}
		a := join(t, sts[1], p, "a", opt)
		until(t, w, "a")
		join(t, sts[2], p, "b", opt)
		until(t, w, "a", "b")
		if err := a.Leave(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		until(t, w, "b")
		s = mr.Collect()
		// [] -> [a] -> [a b] -> [b]
		if n := s.Int("corral.group.changes", attrs...); n != 3 {
			t.Errorf("changes = %d; want 3", n)
		}
		if n, ok := s.Gauge("corral.group.members", attrs...); !ok || n != 1 {
			t.Errorf("members = %d, %v; want 1, true", n, ok)
		}
		if g, h := s.Int("corral.grants", attrs...), s.Int("corral.holders", attrs...); g != 2 || h != 1 {
			t.Errorf("grants %d, holders %d; want 2, 1", g, h)
		}
	})
}
