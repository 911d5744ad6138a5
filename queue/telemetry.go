package queue

import (
	"log/slog"

	"go.opentelemetry.io/otel/metric"
)

// WithMeterProvider records the queue's metrics (see the package doc,
// "Metrics and logs") with mp instead of the global MeterProvider
// (otel.GetMeterProvider), which records nothing until the application
// installs one. Like the options below it is the Queue's own, never stored
// with the queue.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.tel.MeterProvider = mp }
}

// WithPathLabel sets the value of the corral.path attribute of the metrics
// to label(path) instead of the path, to bound their cardinality when queue
// paths are many.
func WithPathLabel(label func(path string) string) Option {
	return func(o *options) { o.tel.PathLabel = label }
}

// WithLogger logs debug events of the queue's cleanups: removals of a
// delivery count or of an abandoned claim that were retried or left to the
// session's cleaner. By default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.tel.Logger = l }
}
