package shared_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
)

// TestTelemetry: writes are counted by outcome on the MeterProvider given,
// with the path label given, and those not applied are logged to the
// logger given; nothing is logged without one.
func TestTelemetry(t *testing.T) {
	ctx := t.Context()
	srv := memstore.NewServer()
	st, holder := srv.Open(), srv.Open()
	defer st.Close()
	mr := metrictest.New(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	label := func(string) string { return "label" }
	opts := []shared.Option{shared.WithMeterProvider(mr.Provider()), shared.WithLogger(log), shared.WithPathLabel(label)}

	v := shared.NewValue(st, "/t/v", opts...)
	if _, err := v.Set(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	_, _ = v.CompareAndSet(ctx, []byte("b"), 7)
	c := shared.NewCounter(st, "/t/c", opts...)
	for range 3 {
		if _, err := c.Add(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	n, _ := holder.Create(ctx, "/t/lock-", nil, store.EphemeralSequential)
	holder.Expire()
	_, _ = shared.Write(ctx, st, rawHold{store.Guard{Path: n.Path, Seq: n.Seq}}, []store.Op{store.SetOp("/t/v", nil, store.AnyVersion)}, opts...)

	s := mr.Collect()
	for _, tt := range []struct {
		kind, outcome string
		want          int64
	}{
		{"value", "written", 1}, {"value", "conflict", 1},
		{"counter", "written", 3},
		{"guarded_write", "lost", 1},
	} {
		if got := s.Int("corral.shared.writes", attribute.String("corral.kind", tt.kind), attribute.String("corral.outcome", tt.outcome), attribute.String("corral.path", "label")); got != tt.want {
			t.Errorf("corral.shared.writes{%s, %s} = %d; want %d", tt.kind, tt.outcome, got, tt.want)
		}
	}
	for _, want := range []string{"outcome=conflict", "outcome=lost", "node=/t/v"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}
