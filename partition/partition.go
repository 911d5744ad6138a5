// Package partition spreads a fixed number of shards over the live members
// of a partition, so that every shard is worked by exactly one member at a
// time, the shards are spread evenly, and they move again when a member
// joins or goes.
//
// [Join] makes the caller a member with an id; [Member.Run] works its
// shards: it calls a function once for every shard the member is granted,
// in a goroutine of its own, as errgroup and sarama's consumer-group
// handler do, and releases the shard when the function returns (from the
// Member.Run example):
//
//	m, err := partition.Join(ctx, st, "/jobs/tenants", 16, "worker-1")
//	if err != nil {
//		log.Fatal(err)
//	}
//	err = m.Run(ctx, func(ctx context.Context, s *partition.Shard) error {
//		return work(ctx, s.ID(), s.Token()) // until ctx ends
//	})
//
// Each [*Shard] is a hold: its Context is cancelled, with a cause, the
// moment the shard must stop being worked (it was reassigned, the session
// was lost, the connection was lost, the member left), and its Token is a
// fencing token that grows with every new owner of the shard, for storage
// that must reject a stale owner.
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
// every member computes it from the member list it follows, with no store
// round trip and no leader. With M members and K shards each member owns
// ⌊K/M⌋ or ⌈K/M⌉ shards once the members have seen the same list; a member
// that joins or leaves moves about K/M shards, at most about twice that in
// the tests (rendezvous hashing with bounded loads: see Assign); a member
// that restarts with the same id is assigned the same shards, and gets
// them back as soon as the previous session's hold is gone. While members
// see different lists (for a round trip after a change) two of them may
// both want a shard: one holds it and the other waits, so a shard is never
// owned twice, only owned late.
//
// # Cooperative, bounded hand-over
//
// When a shard is reassigned, its Context is cancelled at once with
// ErrReassigned; its lock is released when the function working on it
// returns, or after the grace (five seconds by default, [WithGrace]),
// whichever comes first. A member that leaves leaves the assignment first,
// so that the others start to take its shards at once, and keeps only the
// locks of the shards whose work has not stopped yet. A frozen owner loses
// its shards when its session ends, as a lock holder does. Shard holds end
// on a lost connection (sync.LoseOnDisconnect) and are contended for again
// when it is back; the membership itself stays through a lost connection
// while the session lives.
//
// A function that returns nil while its shard is still the member's gives
// the shard back: the member takes it again after the retry delay
// ([WithRetryDelay]), with a new token. One that returns an error then
// stops the member, which leaves; Run returns that error.
//
// # Layout
//
// Under the partition's path: "members", whose nodes are the members
// ("partition-k<K>-…", ephemeral and sequential, holding the member's id,
// with the number of shards K in the name), and "shards/<i>" for i in
// [0, K), each a lock directory whose contender nodes ("lock-…", the
// sync.Mutex layout) hold an identity record (see package inspect) whose
// label is the id of the member that contends; the owner adds the time of
// its grant to it once granted, for "corral shards" (earlier versions
// wrote the id alone). A shard costs
// one directory, and one ephemeral node while it is owned (two during a
// hand-over: the owner's and the next owner's); a member costs its node.
// When all members have left and released their shards, nothing stays:
// every directory of the partition, and those above it that the store
// made, go with the last node in them (see Parents in package store).
//
// Every member must be given the same number of shards, and each its own
// id: Join compares the joiner's with the members that joined before it and
// refuses another number of shards with [ErrMismatch] and an id that is
// there already with [ErrDuplicateID], leaving the others alone. The number
// of shards lives in the members' own nodes, so it cannot be taken away
// from a member that stays. A path that holds another recipe's nodes (a
// lock's, a group's) is refused with [ErrKindMismatch], and a group cannot
// join a partition's members.
package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/names"
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
	// ErrReleased is the cause of a shard whose function returned while
	// it was still assigned: it gave the shard back (the member contends
	// for it again after the retry delay).
	ErrReleased = holderr.ErrReleased
	// ErrLeft is the cause of a member's shards when it leaves, and the
	// Err of a member after Leave.
	ErrLeft = errors.New("partition: member left")
	// ErrNodeDeleted is the cause of a shard whose lock node was deleted
	// by someone else while the session lived, and the Err of a member
	// whose own node was.
	ErrNodeDeleted = holderr.ErrNodeDeleted
	// ErrDisconnected is the cause of a shard lost with the connection.
	// It wraps store.ErrDisconnected.
	ErrDisconnected = holderr.ErrDisconnected
	// ErrNotOwner is the cause of the zero Shard's context.
	ErrNotOwner = errors.New("partition: not the owner")
	// ErrMismatch: a member joined a partition with a number of shards
	// that differs from that of a member there. The joiner is refused and
	// the members there are not disturbed. It is the same error as
	// sync.ErrMismatch and queue.ErrMismatch.
	ErrMismatch = recipe.ErrMismatch
	// ErrDuplicateID: a member joined a partition with the id of a member
	// there (a replica started twice, or restarted before its earlier
	// session ended). The joiner is refused; join again once the other
	// has gone.
	ErrDuplicateID = errors.New("partition: a member has this id already")
	// ErrKindMismatch: the partition's path, or its members' directory,
	// holds another recipe's nodes. It is the same error as
	// sync.ErrKindMismatch.
	ErrKindMismatch = recipe.ErrKindMismatch
)

// DefaultGrace is how long a reassigned shard stays held, by default,
// while the function working on it has not returned.
const DefaultGrace = 5 * time.Second

// DefaultRetryDelay is how long a member waits, by default, before it takes
// again a shard whose function gave it back.
const DefaultRetryDelay = time.Second

// MaxShards is the largest number of shards a partition may have.
const MaxShards = 1 << 16

// Option configures Join.
type Option func(*options)

type options struct {
	grace  time.Duration
	retry  time.Duration
	tel    telemetry.Config
	nilOpt bool // a nil option was given: bad input
}

// WithGrace sets how long a reassigned shard stays held while the function
// working on it has not returned (DefaultGrace by default), and so how long
// a member that leaves waits for its functions. Zero releases at once, with
// the shard's context cancelled: for work that fencing tokens make safe to
// cut off. It must not be negative.
func WithGrace(d time.Duration) Option {
	return func(o *options) { o.grace = d }
}

// WithRetryDelay sets how long a member waits before it takes again a shard
// whose function gave it back (DefaultRetryDelay by default). It must not be
// negative.
func WithRetryDelay(d time.Duration) Option {
	return func(o *options) { o.retry = d }
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
	o := options{grace: DefaultGrace, retry: DefaultRetryDelay}
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
	case o.retry < 0:
		return fmt.Errorf("%w: negative retry delay %v", store.ErrInvalidArgument, o.retry)
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

// MembersDir returns the directory of the members of the partition at path
// ("<path>/members"), whose nodes hold the member ids, and "" (a path every
// call refuses with store.ErrInvalidPath) when path is no partition's path:
// an invalid one, or one Join refuses for its length or depth.
func MembersDir(path string) string { return below(path, names.PartitionMembers) }

// ShardsDir returns the directory that holds the shards' lock directories
// of the partition at path ("<path>/shards"), each named by its number,
// and "" when path is no partition's path, as MembersDir does.
func ShardsDir(path string) string { return below(path, names.PartitionShards) }

// below returns the directory name below the partition at path, or "" when
// path is no partition's path.
func below(path, name string) string {
	if validatePath(path) != nil {
		return ""
	}
	return store.Join(path, name)
}

func shardDir(path string, i int) string {
	return store.Join(store.Join(path, names.PartitionShards), fmt.Sprint(i))
}
