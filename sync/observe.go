package sync

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/corral-go/corral/internal/identity"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
)

// WithLabel puts label in the identity record of every contender node (see
// the package doc, "Who holds what"), beside the host name, the process ID
// and the start of the attempt, for operators who list who holds and who
// waits (corral locks, the inspect package). It has no effect with WithData.
func WithLabel(label string) LockOption {
	return func(o *lockOptions) { o.label = label }
}

// WithMeterProvider records the metrics of the lock, semaphore or barrier
// (see the package doc, "Metrics") with mp instead of the global
// MeterProvider (otel.GetMeterProvider), which records nothing until the
// application installs one.
func WithMeterProvider(mp metric.MeterProvider) LockOption {
	return func(o *lockOptions) { o.tel.MeterProvider = mp }
}

// WithPathLabel sets the value of the corral.path attribute of the metrics
// to label(path) instead of the path, to bound their cardinality when paths
// are many (one lock per customer, say): map them to a few labels.
func WithPathLabel(label func(path string) string) LockOption {
	return func(o *lockOptions) { o.tel.PathLabel = label }
}

// WithLogger logs debug events to l: grants, releases, lost holds, and
// node removals that were retried or left to the session's cleaner. By
// default nothing is logged.
func WithLogger(l *slog.Logger) LockOption {
	return func(o *lockOptions) { o.tel.Logger = l }
}

// nodeData returns the data of a contender node whose attempt started at
// start: the caller's data, or the identity record.
func (o lockOptions) nodeData(start time.Time) []byte {
	if o.dataSet {
		return o.data
	}
	return o.ident.Encode(start)
}

// recorder returns the telemetry of the recipe of kind at path.
func (o lockOptions) recorder(kind, path string, deleted error) *telemetry.Recorder {
	return telemetry.New(o.tel, kind, path, deleted)
}

// spec returns the spec of the contenders that a lock with o makes with
// prefix in dir, in order, recording to rec.
func (o lockOptions) spec(dir, prefix string, order recipe.Order, rec *telemetry.Recorder) *recipe.Spec {
	return &recipe.Spec{Dir: dir, Prefix: prefix, Data: o.nodeData, Order: order, Rec: rec, Hold: o.hold()}
}

func newIdentity(o *lockOptions) {
	if !o.dataSet {
		o.ident = identity.NewEncoder(o.label)
	}
}
