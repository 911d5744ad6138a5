// Package partition spreads a fixed number of shards over the live members
// of a group, so that every shard is worked by exactly one member at a time
// and the shards are spread evenly, and move again when a member joins or
// goes.
//
// [Join] makes the caller a member with an id and returns a [*Member],
// whose Shards channel delivers the set of shards the member owns now,
// every time it changes. Each owned [*Shard] is a hold: its Context is
// cancelled, with a cause, the moment the shard must stop being worked (it
// was reassigned, the session was lost, the connection was lost, the member
// left), and its Token is a fencing token that grows with every new owner
// of the shard, for storage that must reject a stale owner.
//
// # Never two owners
//
// Each shard is a lock directory, and its owner holds that lock: a member
// contends for a shard (as a sync.Mutex's Lock does, with the same
// machinery) only while the assignment gives it the shard, and gives it up
// (as Unlock does) once the assignment moves it away. So a shard passes to
// its new owner only after the previous owner released it or its session
// ended, exactly as a lock does, and the token is the lock's: the fencing
// token of the owner's node (store.Node.Fence).
//
// # Balanced and stable
//
// The owner of every shard is a pure function of the member ids, [Assign]:
// every member computes it from the member list it watches (group.Watch),
// with no store round trip and no leader. With M members and K shards each
// member owns ⌊K/M⌋ or ⌈K/M⌉ shards once the members have seen the same
// list; a member that joins or leaves moves about K/M shards, at most about
// twice that in the tests (rendezvous hashing with bounded loads: see
// Assign); a member that restarts with the same id is assigned the same
// shards, and gets them back as soon as the previous session's hold is
// gone. While members see different lists (for a round trip after a
// change) two of them may both want a shard: one holds it and the other
// waits, so a shard is never owned twice, only owned late.
//
// # Cooperative, bounded hand-over
//
// When a shard is reassigned, its Context is cancelled at once with
// ErrReassigned and it leaves the Shards set; its lock is released when the
// caller calls [Shard.Release] (its work has stopped), or after the grace
// (five seconds by default, [WithGrace]), whichever comes first. A frozen
// owner loses its shards when its session ends, as a lock holder does.
// Shard holds end on a lost connection (sync.LoseOnDisconnect) and are
// contended for again when it is back.
//
// # Layout
//
// Under the partition's path: "members", a group (package group) whose
// members' values are the member ids, and "shards/<i>" for i in [0, K), each
// a lock directory whose contender nodes ("lock-…", the sync.Mutex layout)
// hold the id of the member that contends, and "shardcount" ([ShardCountDir]),
// where each member keeps an ephemeral node named by its number of shards
// ("group-k16-…") and holding its id. A shard costs one directory, and one
// ephemeral node while it is owned (two during a hand-over: the owner's and
// the next owner's); a member costs its group node and its shard-count
// node. When all members have left and released their shards, nothing
// stays: every directory of the partition, and those above it that the
// store made, go with the last node in them (see Parents in package store).
//
// Every member must be given the same number of shards: Join compares the
// joiner's with the shard-count nodes of the members that joined before it
// and refuses a mismatch with [ErrMismatch], leaving the others alone.
package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Errors of this package, and causes of a Shard's end (see Shard.Context).
// A shard also ends with store.ErrSessionExpired or store.ErrClosed when
// the session does. Match them with errors.Is.
var (
	// ErrReassigned is the cause of a shard the assignment moved to
	// another member.
	ErrReassigned = errors.New("partition: shard reassigned")
	// ErrReleased is the cause of a shard given up by Shard.Release while
	// it was still assigned (the member contends for it again).
	ErrReleased = holderr.ErrReleased
	// ErrLeft is the cause of a member's shards when it leaves, and the
	// Err of a member after Leave.
	ErrLeft = errors.New("partition: member left")
	// ErrNodeDeleted is the cause of a shard whose lock node was deleted
	// by someone else while the session lived.
	ErrNodeDeleted = holderr.ErrNodeDeleted
	// ErrDisconnected is the cause of a shard lost with the connection.
	// It wraps store.ErrDisconnected.
	ErrDisconnected = holderr.ErrDisconnected
	// ErrNotOwner is the cause of the zero Shard's context.
	ErrNotOwner = errors.New("partition: not the owner")
	// ErrMemberLost is the Err of a member whose group membership ended
	// while its session lived (its node was deleted).
	ErrMemberLost = errors.New("partition: membership lost")
)

// DefaultGrace is how long a reassigned shard stays held, by default,
// while its owner has not called Release.
const DefaultGrace = 5 * time.Second

// MaxShards is the largest number of shards a partition may have.
const MaxShards = 1 << 16

// Option configures Join.
type Option func(*options)

type options struct {
	grace  time.Duration
	tel    telemetry.Config
	nilOpt bool // a nil option was given: bad input
}

// WithGrace sets how long a reassigned shard stays held while its owner
// has not called Release (DefaultGrace by default). Zero releases at once,
// with the shard's context cancelled: for work that fencing tokens make
// safe to cut off. It must not be negative.
func WithGrace(d time.Duration) Option {
	return func(o *options) { o.grace = d }
}

// WithMeterProvider records the metrics of the shards' locks (those of
// sync's locks, with corral.kind "partition.shard") with mp instead of the
// global MeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.tel.MeterProvider = mp }
}

// WithLogger logs debug events to l: shards granted, reassigned, released
// and lost, and node removals left to the session's cleaner. By default
// nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.tel.Logger = l }
}

func newOptions(opts []Option) options {
	o := options{grace: DefaultGrace}
	for _, opt := range opts {
		if opt == nil {
			o.nilOpt = true
			continue
		}
		opt(&o)
	}
	return o
}

// check reports what Join cannot use.
func (o options) check(st store.Store, path string, shards int, id string) error {
	switch {
	case st == nil:
		return fmt.Errorf("%w: nil store", store.ErrInvalidArgument)
	case id == "":
		return fmt.Errorf("%w: empty member id", store.ErrInvalidArgument)
	case o.nilOpt:
		return fmt.Errorf("%w: nil option", store.ErrInvalidArgument)
	case o.grace < 0:
		return fmt.Errorf("%w: negative grace %v", store.ErrInvalidArgument, o.grace)
	}
	if err := checkShards(shards); err != nil {
		return err
	}
	if err := validatePath(path); err != nil {
		return err
	}
	return store.ValidateData([]byte(id))
}

// validatePath reports a path no partition can have: the directories below
// it, the members' and every shard's, must be recipes' directories too, or
// a path with room for a lock's nodes only would fail every shard's
// acquisition, out of the caller's sight.
func validatePath(path string) error {
	if err := recipe.ValidateDir(path); err != nil {
		return err
	}
	return recipe.ValidateDir(shardDir(path, MaxShards-1))
}

// checkShards reports a number of shards no partition can have.
func checkShards(shards int) error {
	if shards < 1 || shards > MaxShards {
		return fmt.Errorf("%w: %d shards, want 1 to %d", store.ErrInvalidArgument, shards, MaxShards)
	}
	return nil
}

// MembersDir returns the group directory of the partition at path
// ("<path>/members"), whose members' values are the member ids, and "" (a
// path every call refuses with store.ErrInvalidPath) when path is no
// partition's path: an invalid one, or one Join refuses for its length or
// depth.
func MembersDir(path string) string { return below(path, "members") }

// ShardsDir returns the directory that holds the shards' lock directories
// of the partition at path ("<path>/shards"), each named by its number,
// and "" when path is no partition's path, as MembersDir does.
func ShardsDir(path string) string { return below(path, "shards") }

// below returns the directory name below the partition at path, or "" when
// path is no partition's path.
func below(path, name string) string {
	if validatePath(path) != nil {
		return ""
	}
	return store.Join(path, name)
}

func shardDir(path string, i int) string {
	return store.Join(store.Join(path, "shards"), fmt.Sprint(i))
}
