package sync_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	gosync "sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// optionCase is one primitive that takes the telemetry options: use grants
// and releases it want times (through every acquiring method it has), under
// kind, on the corral.path values paths(p).
type optionCase struct {
	name  string
	kind  string
	want  int64
	paths func(p string) []string
	use   func(t *testing.T, ctx context.Context, st store.Store, p string, opts []sync.LockOption)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustOK(t *testing.T, ok bool, err error) {
	t.Helper()
	must(t, err)
	if !ok {
		t.Fatal("not granted")
	}
}

var optionCases = []optionCase{
	{name: "Mutex", kind: "mutex", want: 2, paths: one, use: func(t *testing.T, ctx context.Context, st store.Store, p string, opts []sync.LockOption) {
		m := sync.NewMutex(st, p, opts...)
		must(t, m.Lock(ctx))
		must(t, m.Unlock(ctx))
		ok, err := m.TryLock(ctx)
		mustOK(t, ok, err)
		must(t, m.Unlock(ctx))
	}},
	{name: "RWMutex.read", kind: "rwmutex.read", want: 1, paths: one, use: func(t *testing.T, ctx context.Context, st store.Store, p string, opts []sync.LockOption) {
		rw := sync.NewRWMutex(st, p, opts...)
		r, err := rw.RLock(ctx)
		must(t, err)
		must(t, r.Unlock(ctx))
	}},
	{name: "RWMutex.write", kind: "rwmutex.write", want: 1, paths: one, use: func(t *testing.T, ctx context.Context, st store.Store, p string, opts []sync.LockOption) {
		rw := sync.NewRWMutex(st, p, opts...)
		must(t, rw.Lock(ctx))
		must(t, rw.Unlock(ctx))
	}},
	{name: "MultiMutex", kind: "mutex", want: 4, paths: func(p string) []string { return []string{p + "/a", p + "/b"} },
		use: func(t *testing.T, ctx context.Context, st store.Store, p string, opts []sync.LockOption) {
			m := sync.NewMultiMutex(st, []string{p + "/b", p + "/a"}, opts...)
			must(t, m.Lock(ctx))
			must(t, m.Unlock(ctx))
			ok, err := m.TryLock(ctx)
			mustOK(t, ok, err)
			must(t, m.Unlock(ctx))
		}},
	{name: "StripedMutex", kind: "striped_mutex", want: 2, paths: one, use: func(t *testing.T, ctx context.Context, st store.Store, p string, opts []sync.LockOption) {
		s := sync.NewStripedMutex(st, p, 2, opts...)
		st1, err := s.Lock(ctx)
		must(t, err)
		must(t, st1.Unlock(ctx))
		st2, ok, err := s.TryLock(ctx)
		mustOK(t, ok, err)
		must(t, st2.Unlock(ctx))
	}},
	{name: "Semaphore", kind: "semaphore", want: 2, paths: one, use: func(t *testing.T, ctx context.Context, st store.Store, p string, opts []sync.LockOption) {
		s := sync.NewSemaphore(st, p, 2, opts...)
		l, err := s.Acquire(ctx)
		must(t, err)
		must(t, l.Release(ctx))
		l, ok, err := s.TryAcquire(ctx)
		mustOK(t, ok, err)
		must(t, l.Release(ctx))
	}},
	{name: "DoubleBarrier", kind: "double_barrier", want: 1, paths: one, use: func(t *testing.T, ctx context.Context, st store.Store, p string, opts []sync.LockOption) {
		b := sync.NewDoubleBarrier(st, p, 1, opts...)
		must(t, b.Enter(ctx))
		must(t, b.Leave(ctx))
	}},
}

func one(p string) []string { return []string{p} }

// TestOptionsHonoured: every primitive that takes WithMeterProvider,
// WithPathLabel and WithLogger records its grants and releases through the
// given MeterProvider, under the path or its label, and logs them to the
// given logger.
func TestOptionsHonoured(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := backends.Open(t, b, 1)[0]
		for _, c := range optionCases {
			t.Run(c.name, func(t *testing.T) {
				ctx := testCtx(t)
				for _, labelled := range []bool{false, true} {
					p := lockPath(t)
					mr := metrictest.New(t)
					var buf bytes.Buffer
					var mu gosync.Mutex
					logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
					opts := []sync.LockOption{sync.WithMeterProvider(mr.Provider()), sync.WithLogger(logger)}
					wantPaths := c.paths(p)
					if labelled {
						opts = append(opts, sync.WithPathLabel(func(string) string { return "tenant" }))
						wantPaths = []string{"tenant"}
					}
					c.use(t, ctx, st, p, opts)

					s := mr.Collect()
					k := attribute.String("corral.kind", c.kind)
					if g := s.Int("corral.grants", k); g != c.want {
						t.Errorf("label %t: grants{%s} = %d; want %d", labelled, c.kind, g, c.want)
					}
					if n, _ := s.Hist("corral.hold.duration", k, released); n != uint64(c.want) {
						t.Errorf("label %t: hold.duration{%s, released} count = %d; want %d", labelled, c.kind, n, c.want)
					}
					got := s.Values("corral.grants", "corral.path")
					slices.Sort(got)
					if !slices.Equal(got, wantPaths) {
						t.Errorf("label %t: corral.path values = %q; want %q", labelled, got, wantPaths)
					}
					mu.Lock()
					out := buf.String()
					mu.Unlock()
					for _, want := range []string{`msg="corral: granted"`, `msg="corral: released"`, "kind=" + c.kind, "path=" + wantPathLogged(c, p)} {
						if !strings.Contains(out, want) {
							t.Errorf("label %t: log lacks %q:\n%s", labelled, want, out)
						}
					}
				}
			})
		}
	})
}

// wantPathLogged is a path the log names: the logs carry the path itself,
// never its label.
func wantPathLogged(c optionCase, p string) string { return c.paths(p)[0] }
