package sync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/zkstore"
)

// BenchmarkMutexContendedMetrics measures what the metrics cost on the
// contended lock: corral's Mutex with 8 sessions on ZooKeeper and on etcd
// (and on memstore, where a lock cycle costs microseconds, so the metrics'
// own CPU time shows),
// with the default (the global provider, a no-op until the application
// installs one) and with the OpenTelemetry SDK's provider recording every
// instrument. Compare acq/s and ns/op of metrics=noop and metrics=sdk:
//
//	CI=true go test -run '^$' -bench MutexContendedMetrics -benchtime 3000x -count 6 ./sync/
func BenchmarkMutexContendedMetrics(b *testing.B) {
	const n = 8
	zk := zkserver.ForTest(b, zkserver.Config{})
	warmZK(b, []string{zk.Addr()}, 3*time.Second)
	etcd := etcdserver.Start(b, 1)
	mem := memstore.NewServer()
	stores := []struct {
		name string
		open func() (store.Store, error)
	}{
		{"mem", func() (store.Store, error) { return mem.Open(), nil }},
		{"zk", func() (store.Store, error) {
			return zkstore.Open(b.Context(), []string{zk.Addr()}, zkstore.WithLogger(nil))
		}},
		{"etcd", func() (store.Store, error) { return etcdstore.Dial(b.Context(), etcd.ClientConfig()) }},
	}
	for _, s := range stores {
		for _, withSDK := range []bool{false, true} {
			name := fmt.Sprintf("%s/metrics=noop/sessions=%d", s.name, n)
			var opts []sync.LockOption
			if withSDK {
				name = fmt.Sprintf("%s/metrics=sdk/sessions=%d", s.name, n)
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(context.Background())
				opts = append(opts, sync.WithMeterProvider(metric.MeterProvider(mp)))
			}
			b.Run(name, func(b *testing.B) {
				path := fmt.Sprintf("/bench/metrics-%s-%v-%d", s.name, withSDK, b.N)
				ls := make([]benchLocker, n)
				for i := range ls {
					st, err := s.open()
					if err != nil {
						b.Fatal(err)
					}
					m := sync.NewMutex(st, path, opts...)
					ls[i] = benchLocker{m.Lock, m.Unlock, func() { st.Close() }}
				}
				contend(b, ls)
			})
		}
	}
}

// BenchmarkMutexMetricsCost is the CPU time the metrics add to one
// Lock+Unlock, measured where nothing else varies: one goroutine on
// memstore, default (no-op) provider against the SDK's. The difference,
// divided by the time of a contended acquisition on a real store, is the
// metrics' share of it.
//
//	go test -run '^$' -bench MutexMetricsCost -count 10 ./sync/
func BenchmarkMutexMetricsCost(b *testing.B) {
	for _, withSDK := range []bool{false, true} {
		name, opts := "metrics=noop", []sync.LockOption(nil)
		if withSDK {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			defer mp.Shutdown(context.Background())
			name, opts = "metrics=sdk", []sync.LockOption{sync.WithMeterProvider(mp)}
		}
		b.Run(name, func(b *testing.B) {
			st := memstore.New()
			defer st.Close()
			m := sync.NewMutex(st, "/bench/metrics-cost", opts...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
