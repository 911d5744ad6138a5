package sync_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/sync"
)

// A lock's metrics, read through the OpenTelemetry SDK: the instruments
// its grants and holds record.
func Example_metrics() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	id := "42"

	reader := sdkmetric.NewManualReader()                          // or an exporter's reader
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)) // or otel.SetMeterProvider(mp) for every primitive
	m := sync.NewMutex(st, "/locks/tenant/"+id,
		sync.WithMeterProvider(mp),
		sync.WithLabel("billing"), // in the identity record
		sync.WithPathLabel(func(string) string { return "/locks/tenant/*" }), // bound the cardinality
		sync.WithLogger(slog.Default()))                                      // debug events; none by default

	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if sum, ok := mt.Data.(metricdata.Sum[int64]); ok && mt.Name == "corral.grants" {
				fmt.Println(mt.Name, sum.DataPoints[0].Value)
			}
		}
	}
	// Output:
	// corral.grants 1
}
