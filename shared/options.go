package shared

import (
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/metric"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Option configures a Value, a Counter or a Write.
type Option func(*options)

type options struct {
	tel    telemetry.Config
	nilOpt bool
}

// WithLogger logs debug events to l: writes not applied (a version that
// moved, a hold found gone, an error). By default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.tel.Logger = l }
}

// WithMeterProvider records metrics (corral.shared.writes, by outcome) to
// mp instead of the global MeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.tel.MeterProvider = mp }
}

// WithPathLabel records metrics with label(path) as corral.path instead of
// the path, to bound the number of label values.
func WithPathLabel(label func(path string) string) Option {
	return func(o *options) { o.tel.PathLabel = label }
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt == nil {
			o.nilOpt = true
			continue
		}
		opt(&o)
	}
	return o
}

// check reports what no handle can use: a nil store, a path no recipe may
// use, a nil option.
func (o options) check(st store.Store, path string) error {
	if st == nil {
		return fmt.Errorf("%w: nil store", store.ErrInvalidArgument)
	}
	if err := recipe.ValidateDir(path); err != nil {
		return err
	}
	if o.nilOpt {
		return fmt.Errorf("%w: nil option", store.ErrInvalidArgument)
	}
	return nil
}
