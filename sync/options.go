package sync

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/corral-go/corral/internal/identity"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// DisconnectPolicy says what losing the connection to the store does to a
// held lock.
type DisconnectPolicy = recipe.DisconnectPolicy

const (
	// LoseOnDisconnect, the default, ends a hold (cancels its context with
	// ErrDisconnected) as soon as the connection is lost. While
	// disconnected the client cannot know whether the server has expired
	// its session and granted the lock to someone else, so continuing
	// would risk two holders; this is Curator's standard policy too
	// (SUSPENDED counts as lost). The node stays until Unlock removes it,
	// or the session ends.
	LoseOnDisconnect = recipe.LoseOnDisconnect
	// KeepOnDisconnect keeps a hold across disconnections and ends it only
	// when the session ends or the node goes. A holder that acts on
	// external storage meanwhile must rely on the fencing token.
	KeepOnDisconnect = recipe.KeepOnDisconnect
)

// LockOption configures a Mutex, RWMutex, MultiMutex, StripedMutex,
// Semaphore or DoubleBarrier (the last takes those that make sense for it:
// see DoubleBarrier). A nil LockOption is bad input: every call of the value
// it was given to fails with store.ErrInvalidArgument.
type LockOption func(*lockOptions)

type lockOptions struct {
	policy    DisconnectPolicy
	policySet bool // WithDisconnectPolicy was given: a DoubleBarrier refuses it
	data      []byte
	dataSet   bool
	label     string
	ident     *identity.Encoder // nil with WithData
	tel       telemetry.Config
	bad       error // a nil option: every call of the value fails with it
}

// WithDisconnectPolicy sets what a lost connection does to a held lock; the
// default is LoseOnDisconnect. Any other value is bad input, as a nil
// option is.
func WithDisconnectPolicy(p DisconnectPolicy) LockOption {
	return func(o *lockOptions) { o.policy, o.policySet = p, true }
}

// WithData stores data in every contender node instead of the identity
// record (see WithLabel), as Curator stores the holder's address: the data
// is then the caller's, and inspection shows it as it is. WithData(nil)
// stores no data at all. It must be at most store.MaxDataSize bytes.
func WithData(data []byte) LockOption {
	return func(o *lockOptions) { o.data, o.dataSet = data, true }
}

func newLockOptions(opts []LockOption) lockOptions {
	var o lockOptions
	for _, opt := range opts {
		if opt == nil {
			o.bad = fmt.Errorf("%w: nil option", store.ErrInvalidArgument)
			continue
		}
		opt(&o)
	}
	if o.bad == nil && o.policy != LoseOnDisconnect && o.policy != KeepOnDisconnect {
		o.bad = fmt.Errorf("%w: %v", store.ErrInvalidArgument, o.policy)
	}
	newIdentity(&o)
	return o
}

func (o lockOptions) hold() recipe.HoldOptions {
	// Lazy: a holder that never asks for its Context pays the store's
	// floor (create, list, delete) and no watch of its own node.
	h := recipe.HoldOptions{Deleted: ErrNodeDeleted, Lazy: true}
	if o.policy == LoseOnDisconnect {
		h.Disconnected = ErrDisconnected
	}
	return h
}

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
