package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/goleak"

	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDeleted = errors.New("node deleted")

func TestCause(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", store.ErrSessionExpired), "session_expired"},
		{store.ErrClosed, "session_closed"},
		{fmt.Errorf("sync: connection lost: %w", store.ErrDisconnected), "disconnected"},
		{fmt.Errorf("lost: %w", errDeleted), "node_deleted"},
		{errors.New("other"), "error"},
	} {
		if got := telemetry.Cause(tt.err, errDeleted); got != tt.want {
			t.Errorf("Cause(%v) = %q; want %q", tt.err, got, tt.want)
		}
	}
}

// TestNil: a nil Recorder and Holding record nothing and never panic.
func TestNil(t *testing.T) {
	var r *telemetry.Recorder
	ctx := context.Background()
	a := r.Begin(ctx)
	a.Granted(ctx, store.Node{}).End(nil)
	r.Try().Busy(ctx)
	r.Begin(ctx).Failed(ctx, errors.New("x"))
	r.Put(ctx)
	r.LeaderChanged(ctx, "", 0)
	r.CleanupRetried(ctx, "/a", 1, nil)
	r.CleanupHandedOver(ctx, "/a", nil)
	r.CleanupDone("/a", nil)
}

// TestEndOnce: a hold's end counts once, whoever reports it.
func TestEndOnce(t *testing.T) {
	mr := metrictest.New(t)
	r := telemetry.New(telemetry.Config{MeterProvider: mr.Provider()}, telemetry.KindMutex, "/l", errDeleted)
	ctx := context.Background()
	h := r.Begin(ctx).Granted(ctx, store.Node{Path: "/l/a", Seq: 1})
	h.End(errDeleted)
	h.End(nil)
	s := mr.Collect()
	if n, hs := s.Int("corral.lost", attribute.String("corral.cause", "node_deleted")), s.Int("corral.holders"); n != 1 || hs != 0 {
		t.Errorf("lost %d, holders %d; want 1, 0", n, hs)
	}
	if n, _ := s.Hist("corral.hold.duration"); n != 1 {
		t.Errorf("hold.duration count %d; want 1", n)
	}
	for _, c := range []func(context.Context){r.Put, r.Take, r.Ack, r.Nack, r.Redelivery} {
		c(ctx)
	}
	s = mr.Collect()
	for _, name := range []string{"corral.queue.puts", "corral.queue.takes", "corral.queue.acks", "corral.queue.nacks", "corral.queue.redeliveries"} {
		if s.Int(name, attribute.String("corral.path", "/l")) != 1 {
			t.Errorf("%s = %d; want 1", name, s.Int(name))
		}
	}
}

// TestRecordsWithoutAllocating: what an acquisition records costs it no
// allocation but its Holding, whatever the provider does with the
// measurements (here nothing): a lock records at every grant and release.
func TestRecordsWithoutAllocating(t *testing.T) {
	r := telemetry.New(telemetry.Config{MeterProvider: noop.NewMeterProvider()}, telemetry.KindMutex, "/l", errDeleted)
	ctx, n, err := context.Background(), store.Node{Path: "/l/a", Seq: 1}, errors.New("x")
	for _, tt := range []struct {
		name string
		f    func()
		want float64
	}{
		{"Begin, Granted, End", func() { r.Begin(ctx).Granted(ctx, n).End(nil) }, 1},
		{"Begin, Failed", func() { r.Begin(ctx).Failed(ctx, err) }, 0},
		{"Try, Busy", func() { r.Try().Busy(ctx) }, 0},
		{"Put", func() { r.Put(ctx) }, 0},
	} {
		if got := testing.AllocsPerRun(100, tt.f); got > tt.want {
			t.Errorf("%s: %v allocations; want at most %v", tt.name, got, tt.want)
		}
	}
}
