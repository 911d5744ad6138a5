// Package group keeps track of the live members of a group: each member
// joins with a value (an identity or an address) and stays a member while
// its session lives, and anyone can watch the group and receive the whole,
// ordered member list every time it changes.
//
// A member is an ephemeral sequential node under the group's path whose data
// is its value: [Join] creates it and returns a [*Membership], a hold like a
// lock's or a leadership's, whose Context is cancelled with a cause the
// moment the membership ends (left, session ended, node deleted, connection
// lost under the [DisconnectPolicy]) and whose Token, the node's fencing
// token, grows with every member that joins; a member may change its value
// while it is one ([Membership.SetValue]). [Watch] returns a [*Watcher]
// whose channel delivers the members now and then after every change (a
// member joined, went, or changed its value), in the order they joined,
// with the never-hang, coalescing rules of election.Observe: a list not
// yet received when a newer one is known is replaced by it.
//
// # What stays in the store
//
// Nothing, once every member has left: the group's directory, and those
// above it that the store made, go with the last member's node. One
// emptied by a session's end goes as package store says for each store
// (see Parents there).
//
// # Interoperability
//
// On ZooKeeper a group shares its path with Curator's GroupMember and
// kazoo's Party and ShallowParty (tested against the real clients):
//
//   - A Watcher lists every child of the group's path that is a session's
//     (ephemeral) node and not another recipe's (a directory below the
//     group is no member), with its data as the value: Curator's members
//     (an ephemeral node named by the member's id, its payload as data)
//     and kazoo's (a node named "<uuid>__party__" or, for a ShallowParty,
//     "<uuid>-<identifier>", its identifier as data). A change of their
//     value (Curator's setThisData) reaches the Watcher as corral's own
//     do. Their nodes have no order of creation (their names carry no
//     sequence number): they have Token 0 and are listed first, by node
//     name, then corral's members in the order they joined.
//   - Curator's GroupMember lists corral's members, under their node
//     names as ids, with their values, and sees SetValue.
//   - kazoo's Party lists corral's members with their values: a member's
//     node is named "__party__group-" followed by the store's unique
//     suffix (behind the protected "_c_<uuid>-" prefix zkstore adds), and
//     a Party lists the children whose name holds "__party__". kazoo
//     decodes values as UTF-8: a member whose value is not fails a
//     Party's listing. A ShallowParty, whose ids are node names, lists
//     corral's members under a part of their node's name, not their value.
//
// Corral's identity is the value, where Curator's and kazoo's ids are node
// names; a corral member is a GroupMember id only in the sense that its
// node name is one. On etcd neither client exists; members there are
// ordered by CreateRevision. Members of earlier corral versions, named
// "group-" and the suffix, are members all the same.
//
// # Identity, metrics and logs
//
// Memberships record the OpenTelemetry metrics of the sync package's locks
// with corral.kind "group" (see [WithMeterProvider]): a join is an
// acquisition, a membership a hold, a lost membership a loss by cause. A
// [Watcher] counts the changes of the member list it learns in
// corral.group.changes (a list replaced before it was received counts too;
// the first list is no change) and records the size of the latest in the
// gauge corral.group.members.
// [WithLogger] receives debug events; nothing is logged by default.
package group

import (
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/metric"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Errors of this package, and causes of a [Membership]'s end (see
// [Membership.Context]). Match them with errors.Is.
var (
	// ErrLeft is the cause of a membership ended by Leave.
	ErrLeft = errors.New("group: left")
	// ErrNodeDeleted is the cause of a membership whose node was deleted
	// by someone else while the session lived.
	ErrNodeDeleted = holderr.ErrNodeDeleted
	// ErrDisconnected is the cause of a membership ended by a lost
	// connection under LoseOnDisconnect. It wraps store.ErrDisconnected.
	ErrDisconnected = holderr.ErrDisconnected
	// ErrNotMember is the cause of the zero Membership's context.
	ErrNotMember = errors.New("group: not a member")
	// ErrWatcherClosed is the Err of a Watcher after Close. It is the
	// same error as every other Close's in corral (inspect's, election's
	// Observer's, queue's Consumer's).
	ErrWatcherClosed = runner.ErrClosed
	// ErrKindMismatch: the group's path holds the nodes of another kind
	// of recipe (a Mutex's, say). It is the same error as
	// sync.ErrKindMismatch.
	ErrKindMismatch = recipe.ErrKindMismatch
)

// DisconnectPolicy says what a lost connection does to a membership.
type DisconnectPolicy = recipe.DisconnectPolicy

const (
	// LoseOnDisconnect ends a membership when the connection is lost:
	// for a member whose work must stop the moment the others may count
	// it gone (the server may expire its session meanwhile). The node
	// stays until Leave removes it or the session ends.
	LoseOnDisconnect = recipe.LoseOnDisconnect
	// KeepOnDisconnect, the default, ends a membership only when the
	// session ends or the node goes: a membership is not exclusive, and
	// a member stays one through a connection lost for less than its
	// session's timeout, as Curator's GroupMember does.
	KeepOnDisconnect = recipe.KeepOnDisconnect
)

// Option configures Join and Watch: the metrics and logs.
type Option func(*options)

// JoinOption configures Join: an Option, or WithDisconnectPolicy, which
// only a membership has.
type JoinOption interface{ apply(*options) }

func (f Option) apply(o *options) {
	if f == nil {
		o.nilOpt = true
		return
	}
	f(o)
}

type options struct {
	policy DisconnectPolicy
	tel    telemetry.Config
	nilOpt bool // a nil option was given: bad input
}

// policyOption is the JoinOption of WithDisconnectPolicy.
type policyOption DisconnectPolicy

func (p policyOption) apply(o *options) { o.policy = DisconnectPolicy(p) }

// WithDisconnectPolicy sets what a lost connection does to a membership;
// the default is KeepOnDisconnect. A watcher has no such choice: it waits
// out a lost connection while the session lives.
func WithDisconnectPolicy(p DisconnectPolicy) JoinOption { return policyOption(p) }

// WithMeterProvider records the metrics of Join and Watch (see the package
// doc) with mp instead of the global MeterProvider (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.tel.MeterProvider = mp }
}

// WithLogger logs debug events to l: joins, memberships left and lost, node
// removals that were retried or left to the session's cleaner, and the
// member lists a Watcher sends. By default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.tel.Logger = l }
}

func newOptions[O JoinOption](opts []O) options {
	o := options{policy: KeepOnDisconnect}
	for _, opt := range opts {
		if any(opt) == nil {
			o.nilOpt = true
			continue
		}
		opt.apply(&o)
	}
	return o
}

// check reports what no group call can use: a nil store, a path no group
// can have, a nil option, a policy that does not exist.
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
	if o.policy != LoseOnDisconnect && o.policy != KeepOnDisconnect {
		return fmt.Errorf("%w: %v", store.ErrInvalidArgument, o.policy)
	}
	return nil
}
