package election

import (
	"log/slog"

	"go.opentelemetry.io/otel/metric"
)

// WithMeterProvider records the election's metrics (see the package doc,
// "Metrics") with mp instead of the global MeterProvider
// (otel.GetMeterProvider), which records nothing until the application
// installs one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.tel.MeterProvider = mp }
}

// WithPathLabel sets the value of the corral.path attribute of the metrics
// to label(path) instead of the path, to bound their cardinality when
// election paths are many.
func WithPathLabel(label func(path string) string) Option {
	return func(o *options) { o.tel.PathLabel = label }
}

// WithLogger logs debug events to l: terms won, resigned and lost, changes
// of leader an Observer sees, and node removals that were retried or left to
// the session's cleaner. By default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.tel.Logger = l }
}
