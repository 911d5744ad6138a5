// Package telemetry is what corral's primitives report about themselves:
// OpenTelemetry metrics and debug logs, recorded the same way by every
// recipe. A primitive makes one [Recorder] when it is constructed (from the
// [Config] its options filled in) and calls it at the points every recipe
// shares: an acquisition begins ([Recorder.Begin]), is granted, refused or
// given up ([Attempt]), a hold ends ([Holding.End]), a removal is retried or
// left to the session's cleaner. The primitive passes its Recorder to the
// recipe machinery as an argument (internal/recipe's Acquire, Create and
// Remove, HoldOptions.Rec), never as a context value, so that a primitive
// that forgets it fails to compile instead of recording nothing.
//
// Metrics go to the MeterProvider of the Config, or the global one
// (otel.GetMeterProvider), which does nothing until the application
// installs a provider. Logs go to the Config's *slog.Logger, at debug level,
// and nowhere when it is nil: a library logs nothing by default.
//
// # Instruments
//
// Every measurement carries corral.kind (the recipe: mutex, rwmutex.read,
// rwmutex.write, semaphore, double_barrier, election, queue, group,
// partition.shard, value, counter, guarded_write) and corral.path (the recipe's path, or the label
// Config.PathLabel maps it to, to bound the cardinality).
//
//	corral.acquire.duration  histogram, s   start of an acquisition to its outcome;
//	                                        corral.outcome = granted, busy (a Try found it
//	                                        taken), canceled (ctx ended), failed
//	corral.hold.duration     histogram, s   grant to the end of the hold;
//	                                        corral.outcome = released, lost
//	corral.waiters           up/down        acquisitions under way
//	corral.holders           up/down        holds not ended
//	corral.grants            counter        acquisitions granted
//	corral.lost              counter        holds lost; corral.cause = session_expired,
//	                                        session_closed, disconnected, node_deleted, error
//	corral.election.leader_changes counter  changes of leader an Observer saw
//	corral.group.changes     counter        changes of a group's member list a Watcher saw
//	corral.group.members     gauge          members in the latest list a Watcher saw
//	corral.queue.puts        counter        items put
//	corral.queue.takes       counter        items taken (deleted or claimed)
//	corral.queue.acks        counter        items acknowledged
//	corral.queue.nacks       counter        items handed back by Nack
//	corral.queue.redeliveries counter       items taken again after a claim ended
//	corral.shared.writes     counter        writes of a shared value or counter and guarded
//	                                        writes; corral.outcome = written, conflict (the
//	                                        version moved: a counter tries again), lost (the
//	                                        hold's node was gone), failed
//
// It ships: sync, election, queue, group, partition, shared and internal/recipe record through it. Tests read
// what it recorded with internal/testing/metrictest.
package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	gosync "sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/corral-go/corral/store"
)

// The kinds of recipe, the values of corral.kind.
const (
	KindMutex         = "mutex"
	KindRead          = "rwmutex.read"
	KindWrite         = "rwmutex.write"
	KindSemaphore     = "semaphore"
	KindStriped       = "striped_mutex"
	KindDoubleBarrier = "double_barrier"
	KindElection      = "election"
	KindQueue         = "queue"
	KindGroup         = "group"
	KindShard         = "partition.shard"
	KindValue         = "value"
	KindCounter       = "counter"
	KindGuarded       = "guarded_write"
)

// The attribute keys.
const (
	KeyKind    = attribute.Key("corral.kind")
	KeyPath    = attribute.Key("corral.path")
	KeyOutcome = attribute.Key("corral.outcome")
	KeyCause   = attribute.Key("corral.cause")
)

// ScopeName is the instrumentation scope of corral's meters.
const ScopeName = "github.com/corral-go/corral"

// Config is what a primitive's options say about its telemetry. The zero
// Config records to the global MeterProvider, labels by path and logs
// nothing.
type Config struct {
	// MeterProvider receives the metrics; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// PathLabel maps a recipe's path to the value of corral.path; nil
	// means the path itself.
	PathLabel func(path string) string
	// Logger receives debug events; nil logs nothing.
	Logger *slog.Logger
}

// instruments are the instruments of one MeterProvider.
type instruments struct {
	acquire, hold                  metric.Float64Histogram
	waiters, holders               metric.Int64UpDownCounter
	grants, lost                   metric.Int64Counter
	leaderChanges                  metric.Int64Counter
	groupChanges                   metric.Int64Counter
	groupMembers                   metric.Int64Gauge
	puts, takes, acks, nacks, redo metric.Int64Counter
	writes                         metric.Int64Counter // see shared.go
}

// providers caches the instruments of each MeterProvider, so that
// constructing a primitive does not create instruments.
var providers gosync.Map // metric.MeterProvider -> *instruments

// durationBuckets suit waits and holds from a fraction of a millisecond
// (an uncontended lock) to an hour (a long-lived leader).
var durationBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
}

func instrumentsOf(mp metric.MeterProvider) *instruments {
	comparable := reflect.TypeOf(mp).Comparable()
	if comparable {
		if in, ok := providers.Load(mp); ok {
			return in.(*instruments)
		}
	}
	in := newInstruments(mp.Meter(ScopeName))
	if comparable {
		v, _ := providers.LoadOrStore(mp, in)
		in = v.(*instruments)
	}
	return in
}

func newInstruments(m metric.Meter) *instruments {
	var nop noop.Meter
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		if err != nil || h == nil {
			h, _ = nop.Float64Histogram(name)
		}
		return h
	}
	updown := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil || c == nil {
			c, _ = nop.Int64UpDownCounter(name)
		}
		return c
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil || c == nil {
			c, _ = nop.Int64Counter(name)
		}
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64Gauge {
		g, err := m.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil || g == nil {
			g, _ = nop.Int64Gauge(name)
		}
		return g
	}
	return &instruments{
		acquire:       hist("corral.acquire.duration", "Time from the start of an acquisition to its outcome."),
		hold:          hist("corral.hold.duration", "Time from a grant to the end of the hold."),
		waiters:       updown("corral.waiters", "{contender}", "Acquisitions under way."),
		holders:       updown("corral.holders", "{hold}", "Holds granted and not ended."),
		grants:        counter("corral.grants", "{grant}", "Acquisitions granted."),
		lost:          counter("corral.lost", "{hold}", "Holds lost before their release, by cause."),
		leaderChanges: counter("corral.election.leader_changes", "{change}", "Changes of leader seen by observers."),
		groupChanges:  counter("corral.group.changes", "{change}", "Changes of a group's member list seen by watchers."),
		groupMembers:  gauge("corral.group.members", "{member}", "Members in the latest list a watcher saw."),
		puts:          counter("corral.queue.puts", "{item}", "Items put."),
		takes:         counter("corral.queue.takes", "{item}", "Items taken."),
		acks:          counter("corral.queue.acks", "{item}", "Items acknowledged."),
		nacks:         counter("corral.queue.nacks", "{item}", "Items handed back by Nack."),
		redo:          counter("corral.queue.redeliveries", "{item}", "Items delivered again after a claim ended."),
		writes:        counter("corral.shared.writes", "{write}", "Writes of shared values and counters, and guarded writes, by outcome."),
	}
}

// Recorder records the telemetry of one primitive: one kind of recipe at
// one path. Its methods are safe for concurrent use, and those of a nil
// *Recorder do nothing.
type Recorder struct {
	in      *instruments
	kind    string
	path    string
	label   string
	log     *slog.Logger
	deleted error

	attrs attribute.Set
	base  metric.MeasurementOption
	// The options of every measurement, as the slices the instruments'
	// variadic methods take: made once, where passing an option by itself
	// allocates a slice at every call.
	adds                            []metric.AddOption // base
	granted, busy, canceled, failed []metric.RecordOption
	released, lostHold              []metric.RecordOption
}

// New returns the Recorder of the recipe of kind at path. deleted is the
// error the recipe reports when someone else deleted its node; a loss with
// that cause counts as node_deleted.
func New(c Config, kind, path string, deleted error) *Recorder {
	mp := c.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	label := path
	if c.PathLabel != nil {
		label = c.PathLabel(path)
	}
	r := &Recorder{in: instrumentsOf(mp), kind: kind, path: path, label: label, log: c.Logger, deleted: deleted}
	r.attrs = attribute.NewSet(KeyKind.String(kind), KeyPath.String(label))
	r.base = metric.WithAttributeSet(r.attrs)
	r.adds = []metric.AddOption{r.base}
	with := func(k attribute.Key, v string) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(KeyKind.String(kind), KeyPath.String(label), k.String(v)))}
	}
	r.granted = with(KeyOutcome, "granted")
	r.busy = with(KeyOutcome, "busy")
	r.canceled = with(KeyOutcome, "canceled")
	r.failed = with(KeyOutcome, "failed")
	r.released = with(KeyOutcome, "released")
	r.lostHold = with(KeyOutcome, "lost")
	return r
}

// Attempt is one acquisition, from Begin or Try to its outcome. Exactly one
// of Granted, Busy and Failed must be called.
type Attempt struct {
	r       *Recorder
	start   time.Time
	waiting bool
}

// Begin starts an acquisition that may wait: it counts as a waiter until its
// outcome.
func (r *Recorder) Begin(ctx context.Context) Attempt {
	a := Attempt{r: r, start: time.Now(), waiting: r != nil}
	if r != nil {
		r.in.waiters.Add(ctx, 1, r.adds...)
	}
	return a
}

// Try starts an acquisition that does not wait (TryLock and the like).
func (r *Recorder) Try() Attempt { return Attempt{r: r, start: time.Now()} }

// Start returns when the attempt began: the start of its identity record.
func (a Attempt) Start() time.Time { return a.start }

// Granted records the grant of node and returns the hold it begins.
func (a Attempt) Granted(ctx context.Context, node store.Node) *Holding {
	r := a.r
	if r == nil {
		return nil
	}
	now := time.Now()
	waited := now.Sub(a.start)
	if a.waiting {
		r.in.waiters.Add(ctx, -1, r.adds...)
	}
	r.in.acquire.Record(ctx, waited.Seconds(), r.granted...)
	r.in.grants.Add(ctx, 1, r.adds...)
	r.in.holders.Add(ctx, 1, r.adds...)
	if r.logging(ctx) {
		r.log.LogAttrs(ctx, slog.LevelDebug, "corral: granted", r.logAttrs(
			slog.String("node", node.Path), slog.Int64("token", node.Fence()), slog.Duration("waited", waited))...)
	}
	return &Holding{r: r, start: now, node: node.Path}
}

// Busy records a Try that found the recipe taken.
func (a Attempt) Busy(ctx context.Context) {
	if a.r != nil {
		a.r.in.acquire.Record(ctx, time.Since(a.start).Seconds(), a.r.busy...)
	}
}

// Failed records an acquisition that ended without a grant: canceled when
// ctx ended, failed otherwise.
func (a Attempt) Failed(ctx context.Context, err error) {
	r := a.r
	if r == nil {
		return
	}
	if a.waiting {
		r.in.waiters.Add(ctx, -1, r.adds...)
	}
	outcome, name := r.failed, "failed"
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		outcome, name = r.canceled, "canceled"
	}
	r.in.acquire.Record(ctx, time.Since(a.start).Seconds(), outcome...)
	if r.logging(ctx) {
		r.log.LogAttrs(ctx, slog.LevelDebug, "corral: not granted", r.logAttrs(
			slog.String("outcome", name), slog.Duration("waited", time.Since(a.start)), slog.Any("error", err))...)
	}
}

// Holding is a granted hold, from Attempt.Granted to End. Its methods are
// safe for concurrent use; those of a nil *Holding do nothing.
type Holding struct {
	r     *Recorder
	start time.Time
	node  string
	once  gosync.Once
}

// End records the end of the hold, once: released when lost is nil, lost
// with lost as its cause otherwise. Later calls do nothing.
func (h *Holding) End(lost error) {
	if h == nil {
		return
	}
	h.once.Do(func() { h.end(lost) })
}

func (h *Holding) end(lost error) {
	r, ctx := h.r, context.Background()
	held := time.Since(h.start)
	r.in.holders.Add(ctx, -1, r.adds...)
	if lost == nil {
		r.in.hold.Record(ctx, held.Seconds(), r.released...)
		if r.logging(ctx) {
			r.log.LogAttrs(ctx, slog.LevelDebug, "corral: released", r.logAttrs(
				slog.String("node", h.node), slog.Duration("held", held))...)
		}
		return
	}
	r.in.hold.Record(ctx, held.Seconds(), r.lostHold...)
	cause := Cause(lost, r.deleted)
	r.in.lost.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
		KeyKind.String(r.kind), KeyPath.String(r.label), KeyCause.String(cause))))
	if r.logging(ctx) {
		r.log.LogAttrs(ctx, slog.LevelDebug, "corral: lost", r.logAttrs(
			slog.String("node", h.node), slog.Duration("held", held), slog.String("cause", cause), slog.Any("error", lost))...)
	}
}

// Cause returns the value of corral.cause for a hold lost with err, where
// deleted is the recipe's error for a node deleted by someone else.
func Cause(err, deleted error) string {
	switch {
	case errors.Is(err, store.ErrSessionExpired):
		return "session_expired"
	case errors.Is(err, store.ErrClosed):
		return "session_closed"
	case errors.Is(err, store.ErrDisconnected):
		return "disconnected"
	case deleted != nil && errors.Is(err, deleted):
		return "node_deleted"
	}
	return "error"
}

// LeaderChanged records a change of leader seen by an observer; leader is
// the new leader's node, "" when nobody leads.
func (r *Recorder) LeaderChanged(ctx context.Context, leader string, token int64) {
	if r == nil {
		return
	}
	r.in.leaderChanges.Add(ctx, 1, r.adds...)
	if r.logging(ctx) {
		r.log.LogAttrs(ctx, slog.LevelDebug, "corral: leader changed", r.logAttrs(
			slog.String("leader", leader), slog.Int64("token", token))...)
	}
}

// GroupSeen records the member list of a group a watcher learned: its
// size, and, when changed is set, that it differs from the list the
// watcher knew before.
func (r *Recorder) GroupSeen(ctx context.Context, members int, changed bool) {
	if r == nil {
		return
	}
	r.in.groupMembers.Record(ctx, int64(members), r.base)
	if changed {
		r.in.groupChanges.Add(ctx, 1, r.adds...)
	}
}

// Put records an item put into a queue.
func (r *Recorder) Put(ctx context.Context) {
	r.add(ctx, func(in *instruments) metric.Int64Counter { return in.puts })
}

// Take records an item taken from a queue (deleted or claimed).
func (r *Recorder) Take(ctx context.Context) {
	r.add(ctx, func(in *instruments) metric.Int64Counter { return in.takes })
}

// Ack records an item acknowledged.
func (r *Recorder) Ack(ctx context.Context) {
	r.add(ctx, func(in *instruments) metric.Int64Counter { return in.acks })
}

// Nack records an item handed back by Nack.
func (r *Recorder) Nack(ctx context.Context) {
	r.add(ctx, func(in *instruments) metric.Int64Counter { return in.nacks })
}

// Redelivery records an item taken again after a claim on it ended.
func (r *Recorder) Redelivery(ctx context.Context) {
	r.add(ctx, func(in *instruments) metric.Int64Counter { return in.redo })
}

func (r *Recorder) add(ctx context.Context, c func(*instruments) metric.Int64Counter) {
	if r != nil {
		c(r.in).Add(ctx, 1, r.adds...)
	}
}

// CleanupRetried logs that the removal of the node at path failed with err
// and is tried again (attempt counts from 1).
func (r *Recorder) CleanupRetried(ctx context.Context, path string, attempt int, err error) {
	if r.logging(ctx) {
		r.log.LogAttrs(ctx, slog.LevelDebug, "corral: cleanup retried", r.logAttrs(
			slog.String("node", path), slog.Int("attempt", attempt), slog.Any("error", err))...)
	}
}

// CleanupHandedOver logs that the node at path could not be removed in
// time (err) and was handed to the session's cleaner, which removes it as
// soon as the connection allows.
func (r *Recorder) CleanupHandedOver(ctx context.Context, path string, err error) {
	if r.logging(ctx) {
		r.log.LogAttrs(ctx, slog.LevelDebug, "corral: cleanup handed to the session's cleaner", r.logAttrs(
			slog.String("node", path), slog.Any("error", err))...)
	}
}

// CleanupDone logs that the session's cleaner removed the node at path, or
// gave up on it because the session ended (err).
func (r *Recorder) CleanupDone(path string, err error) {
	ctx := context.Background()
	if r.logging(ctx) {
		r.log.LogAttrs(ctx, slog.LevelDebug, "corral: cleanup done by the session's cleaner", r.logAttrs(
			slog.String("node", path), slog.Any("error", err))...)
	}
}

func (r *Recorder) logging(ctx context.Context) bool {
	return r != nil && r.log != nil && r.log.Enabled(ctx, slog.LevelDebug)
}

func (r *Recorder) logAttrs(as ...slog.Attr) []slog.Attr {
	return append(as, slog.String("kind", r.kind), slog.String("path", r.path))
}
