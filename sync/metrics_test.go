package sync_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/metrictest"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

var (
	kindMutex = attribute.String("corral.kind", "mutex")
	granted   = attribute.String("corral.outcome", "granted")
	released  = attribute.String("corral.outcome", "released")
)

// TestMetricsHandover: a contended hand-over shows as a waiter and a holder
// while it lasts, records the wait in the acquire histogram, and leaves the
// up/down counters at zero.
func TestMetricsHandover(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		mr := metrictest.New(t)
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		m1 := sync.NewMutex(sts[0], p, sync.WithMeterProvider(mr.Provider()))
		m2 := sync.NewMutex(sts[1], p, sync.WithMeterProvider(mr.Provider()))
		if err := m1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { got <- m2.Lock(ctx) }()
		waitChildren(t, sts[0], p, 2)
		waiting := time.Now() // m2 waits from before this
		s := mr.Collect()
		if w, h, g := s.Int("corral.waiters", kindMutex), s.Int("corral.holders", kindMutex), s.Int("corral.grants", kindMutex); w != 1 || h != 1 || g != 1 {
			t.Errorf("while one waits: waiters %d, holders %d, grants %d; want 1, 1, 1", w, h, g)
		}
		unlocking := time.Now()
		if err := m1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := result(t, got, "Lock"); err != nil {
			t.Fatal(err)
		}
		if err := m2.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		s = mr.Collect()
		if w, h, g := s.Int("corral.waiters"), s.Int("corral.holders"), s.Int("corral.grants", kindMutex); w != 0 || h != 0 || g != 2 {
			t.Errorf("after both: waiters %d, holders %d, grants %d; want 0, 0, 2", w, h, g)
		}
		n, longest := s.Hist("corral.acquire.duration", kindMutex, granted, attribute.String("corral.path", p))
		if min := unlocking.Sub(waiting).Seconds(); n != 2 || longest < min {
			t.Errorf("acquire.duration: %d grants, longest %.4fs; want 2, the wait at least %.4fs", n, longest, min)
		}
		if n, _ := s.Hist("corral.hold.duration", kindMutex, released); n != 2 {
			t.Errorf("hold.duration: %d released holds; want 2", n)
		}
		if n := s.Int("corral.lost"); n != 0 {
			t.Errorf("lost = %d; want 0", n)
		}
	})
}

// TestMetricsLost: a hold lost to a deleted node, and one lost to an
// expired session, count with their cause, once.
func TestMetricsLost(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		mr := metrictest.New(t)
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		m := sync.NewMutex(sts[0], p, sync.WithMeterProvider(mr.Provider()))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		held := m.Context()
		kids := children(t, sts[1], p)
		if err := sts[1].Delete(ctx, p+"/"+kids[0]); err != nil {
			t.Fatal(err)
		}
		select {
		case <-held.Done():
		case <-ctx.Done():
			t.Fatal("hold not lost after its node was deleted")
		}
		cause := func(c string) attribute.KeyValue { return attribute.String("corral.cause", c) }
		s := mr.Collect()
		if n, h := s.Int("corral.lost", kindMutex, cause("node_deleted")), s.Int("corral.holders"); n != 1 || h != 0 {
			t.Errorf("after the node was deleted: lost{node_deleted} %d, holders %d; want 1, 0", n, h)
		}
		if err := m.Unlock(ctx); !errors.Is(err, sync.ErrLockLost) {
			t.Fatalf("Unlock = %v; want ErrLockLost", err)
		}
		if n := mr.Collect().Int("corral.lost"); n != 1 {
			t.Errorf("after Unlock of the lost hold: lost %d; want still 1", n)
		}

		// A lazy hold nobody watches counts its loss at Unlock, with the
		// cause Unlock reports: the session's end where the client knows
		// of it by then (memstore), else the lost connection or the node
		// found gone.
		st := b.Open(t)
		defer st.Close()
		m = sync.NewMutex(st, p, sync.WithMeterProvider(mr.Provider()))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		b.Expire(t, st)
		err := m.Unlock(ctx)
		if !errors.Is(err, sync.ErrLockLost) {
			t.Fatalf("Unlock after expiry = %v; want ErrLockLost", err)
		}
		want := "node_deleted"
		switch {
		case errors.Is(err, store.ErrSessionExpired):
			want = "session_expired"
		case errors.Is(err, store.ErrDisconnected):
			want = "disconnected"
		}
		if strings.HasSuffix(t.Name(), "/mem") && want != "session_expired" {
			t.Errorf("Unlock after expiry on memstore = %v; want store.ErrSessionExpired", err)
		}
		s = mr.Collect()
		if n, all, h := s.Int("corral.lost", kindMutex, cause(want)), s.Int("corral.lost"), s.Int("corral.holders"); n < 1 || all != 2 || h != 0 {
			t.Errorf("after the session expired: lost{%s} %d, lost %d, holders %d; want >= 1, 2, 0 (causes %q)", want, n, all, h, s.Values("corral.lost", "corral.cause"))
		}
		if n, _ := s.Hist("corral.hold.duration", attribute.String("corral.outcome", "lost")); n != 2 {
			t.Errorf("hold.duration{lost} count = %d; want 2", n)
		}
	})
}

// TestMetricsCanceled: a Lock given up counts as canceled, and stops
// counting as a waiter.
func TestMetricsCanceled(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		mr := metrictest.New(t)
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		holder := sync.NewMutex(sts[0], p)
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer holder.Unlock(ctx)
		m := sync.NewMutex(sts[1], p, sync.WithMeterProvider(mr.Provider()))
		lctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() { got <- m.Lock(lctx) }()
		waitChildren(t, sts[0], p, 2)
		cancel()
		if err := result(t, got, "Lock"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock = %v; want context.Canceled", err)
		}
		if ok, err := m.TryLock(ctx); ok || err != nil {
			t.Fatalf("TryLock = %v, %v; want false, nil", ok, err)
		}
		s := mr.Collect()
		n, _ := s.Hist("corral.acquire.duration", attribute.String("corral.outcome", "canceled"))
		busy, _ := s.Hist("corral.acquire.duration", attribute.String("corral.outcome", "busy"))
		if n != 1 || busy != 1 || s.Int("corral.waiters") != 0 || s.Int("corral.grants") != 0 {
			t.Errorf("canceled %d, busy %d, waiters %d, grants %d; want 1, 1, 0, 0", n, busy, s.Int("corral.waiters"), s.Int("corral.grants"))
		}
	})
}

// TestMetricsKinds: each primitive reports under its kind, and WithPathLabel
// replaces the path.
func TestMetricsKinds(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		mr := metrictest.New(t)
		sts := backends.Open(t, b, 2)
		p, ctx := lockPath(t), testCtx(t)
		opts := []sync.LockOption{sync.WithMeterProvider(mr.Provider()), sync.WithPathLabel(func(string) string { return "tenant-locks" })}
		rw := sync.NewRWMutex(sts[0], p+"/rw", opts...)
		r, err := rw.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rw.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rw.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		lease, err := sync.NewSemaphore(sts[0], p+"/sem", 2, opts...).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var wg gosync.WaitGroup
		for _, st := range sts {
			db := sync.NewDoubleBarrier(st, p+"/db", 2, opts...)
			wg.Go(func() {
				if err := db.Enter(ctx); err != nil {
					t.Error(err)
					return
				}
				if err := db.Leave(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		s := mr.Collect()
		for kind, want := range map[string]int64{"rwmutex.read": 1, "rwmutex.write": 1, "semaphore": 1, "double_barrier": 2} {
			k := attribute.String("corral.kind", kind)
			if g := s.Int("corral.grants", k); g != want {
				t.Errorf("grants{%s} = %d; want %d", kind, g, want)
			}
			if n, _ := s.Hist("corral.hold.duration", k, released); n != uint64(want) {
				t.Errorf("hold.duration{%s, released} count = %d; want %d", kind, n, want)
			}
		}
		if paths := s.Values("corral.grants", "corral.path"); len(paths) != 1 || paths[0] != "tenant-locks" {
			t.Errorf("corral.path values = %q; want only tenant-locks", paths)
		}
		if w, h := s.Int("corral.waiters"), s.Int("corral.holders"); w != 0 || h != 0 {
			t.Errorf("waiters %d, holders %d; want 0, 0", w, h)
		}
	})
}

// TestLogger: WithLogger gets the debug events; nothing is logged at info.
func TestLogger(t *testing.T) {
	st := backends.Memory().Open(t)
	defer st.Close()
	ctx := testCtx(t)
	var buf bytes.Buffer
	var mu gosync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := sync.NewMutex(st, "/logged", sync.WithLogger(logger))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{`msg="corral: granted"`, `msg="corral: released"`, "kind=mutex", "path=/logged", "token="} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	var quiet bytes.Buffer
	m = sync.NewMutex(st, "/quiet", sync.WithLogger(slog.New(slog.NewTextHandler(&quiet, nil))))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if quiet.Len() != 0 {
		t.Errorf("an info-level logger got:\n%s", quiet.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *gosync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestIdentityData: the identity record is the default data; WithData
// replaces it, and WithData(nil) stores nothing.
func TestIdentityData(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := backends.Open(t, b, 1)[0]
		p, ctx := lockPath(t), testCtx(t)
		for _, tt := range []struct {
			opts []sync.LockOption
			want func([]byte) bool
		}{
			{nil, func(d []byte) bool {
				return bytes.HasPrefix(d, []byte(`{"host":`)) && !bytes.Contains(d, []byte("label"))
			}},
			{[]sync.LockOption{sync.WithLabel("x")}, func(d []byte) bool { return bytes.HasSuffix(d, []byte(`,"label":"x"}`)) }},
			{[]sync.LockOption{sync.WithData([]byte("10.0.0.1"))}, func(d []byte) bool { return string(d) == "10.0.0.1" }},
			{[]sync.LockOption{sync.WithData(nil), sync.WithLabel("ignored")}, func(d []byte) bool { return len(d) == 0 }},
		} {
			m := sync.NewMutex(st, p, tt.opts...)
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			kids := children(t, st, p)
			n, err := st.Get(ctx, store.Join(p, kids[0]))
			if err != nil || !tt.want(n.Data) {
				t.Errorf("node data = %q, %v; not what the options ask for", n.Data, err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
