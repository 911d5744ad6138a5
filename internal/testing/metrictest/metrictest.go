// Package metrictest reads what corral's instruments recorded, through the
// OpenTelemetry SDK's manual reader, for tests.
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package metrictest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Reader is a MeterProvider whose metrics a test reads back.
type Reader struct {
	t        testing.TB
	reader   *sdkmetric.ManualReader
	provider *sdkmetric.MeterProvider
}

// New returns a Reader; its provider is shut down when the test ends.
func New(t testing.TB) *Reader {
	r := sdkmetric.NewManualReader()
	p := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return &Reader{t: t, reader: r, provider: p}
}

// Provider returns the MeterProvider to give to the code under test.
func (r *Reader) Provider() metric.MeterProvider { return r.provider }

// Snapshot is the metrics collected at one moment.
type Snapshot map[string]metricdata.Metrics

// Collect collects the metrics now.
func (r *Reader) Collect() Snapshot {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		r.t.Fatalf("Collect = %v", err)
	}
	s := Snapshot{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			s[m.Name] = m
		}
	}
	return s
}

// has reports whether set has every one of attrs.
func has(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// Int returns the sum of the int64 sum (counter or up/down counter) named
// name over the data points that have attrs; 0 when there are none.
func (s Snapshot) Int(name string, attrs ...attribute.KeyValue) int64 {
	sum, _ := s[name].Data.(metricdata.Sum[int64])
	var n int64
	for _, dp := range sum.DataPoints {
		if has(dp.Attributes, attrs) {
			n += dp.Value
		}
	}
	return n
}

// Gauge returns the last value of the int64 gauge named name among the data
// points that have attrs, and whether there was one.
func (s Snapshot) Gauge(name string, attrs ...attribute.KeyValue) (int64, bool) {
	g, _ := s[name].Data.(metricdata.Gauge[int64])
	for _, dp := range g.DataPoints {
		if has(dp.Attributes, attrs) {
			return dp.Value, true
		}
	}
	return 0, false
}

// Hist returns the count and the largest value of the float64 histogram
// named name over the data points that have attrs.
func (s Snapshot) Hist(name string, attrs ...attribute.KeyValue) (count uint64, maxValue float64) {
	h, _ := s[name].Data.(metricdata.Histogram[float64])
	for _, dp := range h.DataPoints {
		if !has(dp.Attributes, attrs) {
			continue
		}
		count += dp.Count
		if v, ok := dp.Max.Value(); ok && v > maxValue {
			maxValue = v
		}
	}
	return count, maxValue
}

// Values returns the values of the attribute key among the data points of
// the metric named name.
func (s Snapshot) Values(name string, key attribute.Key) []string {
	var out []string
	seen := map[string]bool{}
	add := func(set attribute.Set) {
		if v, ok := set.Value(key); ok && !seen[v.String()] {
			seen[v.String()] = true
			out = append(out, v.String())
		}
	}
	switch d := s[name].Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes)
		}
	}
	return out
}
