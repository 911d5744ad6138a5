package cache

import (
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/metric"

	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// DefaultMaxNodes is the most nodes a Tree holds unless WithMaxNodes says
// otherwise.
const DefaultMaxNodes = 100_000

// The errors of the package, matched with errors.Is.
var (
	// ErrClosed is the Err of a cache after Close: the one value of every
	// Close in corral (election.ErrObserverClosed, group.ErrWatcherClosed
	// and the others are the same).
	ErrClosed = runner.ErrClosed
	// ErrTooManyNodes is the Err of a Tree whose subtree has more nodes
	// than its limit (WithMaxNodes); it wraps store.ErrTooLarge.
	ErrTooManyNodes = fmt.Errorf("cache: more nodes than the limit: %w", store.ErrTooLarge)
)

// Option configures NewNode or NewTree. An option the cache does not take
// (WithDepth, WithMaxNodes or WithBase for a Node) makes it fail, with
// store.ErrInvalidArgument, as a nil option does.
type Option func(*options)

type options struct {
	depth    int
	maxNodes int
	base     *Snapshot
	tel      telemetry.Config
	treeOnly []string // the tree's options given
	invalid  []string // what the options got wrong
}

// WithDepth sets how deep below its path a Tree follows: 0, the node
// alone; 1, the node and its children; up to store.MaxPathDepth (the
// default), the whole subtree. NewNode does not take it.
func WithDepth(d int) Option {
	return func(o *options) {
		o.treeOnly = append(o.treeOnly, "WithDepth")
		if d < 0 || d > store.MaxPathDepth {
			o.invalid = append(o.invalid, fmt.Sprintf("depth %d: want 0 to %d", d, store.MaxPathDepth))
		}
		o.depth = d
	}
}

// WithMaxNodes sets the most nodes a Tree holds (at least 1; by default
// DefaultMaxNodes): a Tree whose subtree has more stops with
// ErrTooManyNodes. NewNode does not take it.
func WithMaxNodes(n int) Option {
	return func(o *options) {
		o.treeOnly = append(o.treeOnly, "WithMaxNodes")
		if n < 1 {
			o.invalid = append(o.invalid, fmt.Sprintf("max nodes %d: want at least 1", n))
		}
		o.maxNodes = n
	}
}

// WithBase starts a Tree from s, a snapshot of a Tree of the same path
// (most often on a session that ended) that its receiver holds: the
// Tree's first events are then the changes from s to the store, where
// otherwise they create every node. NewNode does not take it.
func WithBase(s Snapshot) Option {
	return func(o *options) {
		o.treeOnly = append(o.treeOnly, "WithBase")
		o.base = &s
	}
}

// WithMeterProvider records the cache's metrics (see the package doc)
// with mp instead of the global MeterProvider (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.tel.MeterProvider = mp }
}

// WithLogger logs debug events to l: the reads of a tree's subtree, the
// changes a cache takes in, and when its view becomes stale or current.
// By default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.tel.Logger = l }
}

// newOptions applies opts over the defaults, and returns what no cache can
// take: a nil store, an invalid path, a nil option, a bad value, or an
// option of a tree given to a node (tree false).
func newOptions(st store.Store, path string, tree bool, opts []Option) (options, error) {
	o := options{depth: store.MaxPathDepth, maxNodes: DefaultMaxNodes}
	nilOpt := false
	for _, opt := range opts {
		if opt == nil {
			nilOpt = true
			continue
		}
		opt(&o)
	}
	switch {
	case st == nil:
		return o, fmt.Errorf("%w: nil store", store.ErrInvalidArgument)
	case nilOpt:
		return o, fmt.Errorf("%w: nil option", store.ErrInvalidArgument)
	case len(o.invalid) > 0:
		return o, fmt.Errorf("%w: %s", store.ErrInvalidArgument, o.invalid[0])
	case !tree && len(o.treeOnly) > 0:
		return o, fmt.Errorf("%w: %s is an option of a Tree", store.ErrInvalidArgument, o.treeOnly[0])
	case o.base != nil && o.base.path != path:
		return o, fmt.Errorf("%w: WithBase: a snapshot of %q, not %q", store.ErrInvalidArgument, o.base.path, path)
	}
	if err := store.ValidatePath(path); err != nil {
		return o, err
	}
	return o, nil
}
