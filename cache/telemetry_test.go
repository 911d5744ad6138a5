package cache_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// lines is a slog handler that keeps the messages it is given.
type lines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lines) WithGroup(string) slog.Handler      { return l }

func (l *lines) has(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.Contains(m, msg) {
			return true
		}
	}
	return false
}

// The options of telemetry are honoured: the metrics go to the given
// MeterProvider, the debug logs to the given logger.
func TestTelemetry(t *testing.T) {
	srv := memstore.NewServer()
	st, w := srv.Open(), srv.Open()
	defer st.Close()
	defer w.Close()
	ctx := ctxFor(t)
	mr, log := metrictest.New(t), &lines{}
	opts := []cache.Option{cache.WithMeterProvider(mr.Provider()), cache.WithLogger(slog.New(log))}
	tr := cache.NewTree(ctx, st, "/t", opts...)
	n := cache.NewNode(ctx, st, "/t/a", opts...)
	v := newView(t)
	v.until(tr, map[string]store.Node{})
	next(t, "first value", n.Values(), n.Err)
	must[store.Node](t)(w.Create(ctx, "/t/a", []byte("x"), store.Persistent))
	next(t, "created", n.Values(), n.Err)
	v.until(tr, subtree(t, ctx, w, "/t", store.MaxPathDepth))
	st.Disconnect()
	next(t, "stale", n.Values(), n.Err)
	for v.current {
		v.apply(next(t, "stale", tr.Events(), tr.Err))
	}
	m := mr.Collect()
	tree, node := telemetry.KeyKind.String(telemetry.KindCacheTree), telemetry.KeyKind.String(telemetry.KindCacheNode)
	if got := m.Int("corral.cache.changes", tree); got != 2 {
		t.Errorf("corral.cache.changes of the tree = %d; want 2 (/t, /t/a)", got)
	}
	if got := m.Int("corral.cache.changes", node); got != 1 {
		t.Errorf("corral.cache.changes of the node = %d; want 1", got)
	}
	if got, ok := m.Gauge("corral.cache.nodes", tree); !ok || got != 2 {
		t.Errorf("corral.cache.nodes = %d, %v; want 2", got, ok)
	}
	if got := m.Int("corral.cache.stale"); got != 2 {
		t.Errorf("corral.cache.stale = %d; want 2 (the tree and the node)", got)
	}
	if got := m.Int("corral.cache.reads", telemetry.KeyCause.String("start")); got != 1 {
		t.Errorf("corral.cache.reads (start) = %d; want 1", got)
	}
	tr.Close()
	n.Close()
	st.Reconnect()
	if got := mr.Collect().Int("corral.cache.stale"); got != 0 {
		t.Errorf("corral.cache.stale once both stopped = %d; want 0", got)
	}
	for _, msg := range []string{"cache read its subtree", "cache changed", "cache may be stale"} {
		if !log.has(msg) {
			t.Errorf("no %q in the log", msg)
		}
	}
}
