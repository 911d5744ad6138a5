// Package election elects one leader among the candidates of a store path,
// and hands leadership out as a value that can be selected on and cannot
// outlive the conditions it was granted under.
//
// A candidate creates an ephemeral sequential node under the election's path
// whose data is its proclaimed value (its identity or address). The candidate
// with the lowest node leads; every other candidate watches only the node
// just before its own, so a change of leader wakes exactly one candidate.
//
// [Election.Campaign] blocks until the caller leads and returns a
// [*Leadership]: its Done channel closes, and its Context is cancelled with a
// cause, the moment leadership is lost (the session ended, the node was
// deleted, the connection was lost under the [DisconnectPolicy]) or resigned.
// [Election.Candidate] is the long-running form for services: it campaigns
// again after every lost term and hands each term out on a channel, so a
// range over Terms that works on each term until its Done channel closes is
// the whole leadership loop (see the Election.Candidate example, and the
// Leadership example for writes fenced by the term). [Election.Observe]
// reports the current leader and every change of leader, including "no
// leader", to any session.
//
// Before reporting leadership, a candidate that had to wait lists the
// candidates again and checks that its own node is still among them while its
// session lives (and, under LoseOnDisconnect, that it is connected), so a
// candidate whose session died while it waited never believes it leads.
// Every grant carries a fencing token, that of the leader's node (store.Node.Fence), which
// grows with every new term of the same election, across the reclaiming of
// its directory too.
//
// # Who knows first
//
// When a leader resigns, closes its session, or loses its connection under
// LoseOnDisconnect, its Done channel is closed before its node goes, so the
// next leader is never told before the old one knows. When someone else
// ends the term (deletes the node, or has the server end the session, as
// ZooKeeper's session takeover and etcd's lease revocation do), the old and
// the new leader learn it from the same change and nothing orders the two:
// that is what the fencing token is for. A session that expires because the
// client stopped reaching the server is the first case under
// LoseOnDisconnect: the client sees its connection fail before the server
// gives up on the session.
//
// # Identity, metrics and logs
//
// A candidate's node holds the value it proclaims, as Curator's and etcd's
// clients expect it to, so that value is the candidate's identity: an
// address or a name. The inspect package and "corral locks" show it, with
// the candidate's session, token and (on ZooKeeper) how long it has been a
// candidate; a value that is an identity record (inspect.IdentityRecord,
// what "corral elect" proclaims by default) is shown as one.
//
// Campaigns and terms record the OpenTelemetry metrics the sync package's
// locks do, with corral.kind "election" (see [WithMeterProvider]): a
// campaign is an acquisition, a term a hold, a lost term a loss by cause.
// An [Observer] counts the changes of leader it sees in
// corral.election.leader_changes. [WithLogger] receives debug events;
// nothing is logged by default.
//
// # Interoperability
//
// Candidates name their nodes "latch-", as Curator's LeaderLatch does; on
// ZooKeeper the store adds Curator's protected "_c_<uuid>-" prefix, so corral
// and Curator candidates share one election. On etcd, contenders are ordered
// by CreateRevision as go.etcd.io/etcd/client/v3/concurrency's Election orders
// them, so a leader elected by either is the leader the other observes and
// waits for.
//
// # What stays in the store
//
// Nothing, once every candidate has resigned or gone: the election's
// directory, and those above it that the store made, go with the last
// candidate's node (see Parents in the store package). A term begun in the
// directory made again still gets a greater token.
//
// # Outages
//
// Campaign, Resign and Candidate.Close return within their ctx plus at most
// a second: a candidate that gives up, or a leader that resigns, removes
// its node before it returns and keeps trying for up to a second after its
// ctx has ended. A node still there then (the connection is down) is
// removed by the session as soon as the connection allows, while it lives,
// and the next campaign of the session removes it before it lines up;
// nothing decides by a fixed bound whether a node is abandoned.
package election

import (
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Errors returned by this package, and causes of a [Leadership]'s end
// (see [Leadership.Context]). Match them with errors.Is.
var (
	// ErrResigned is the cause of a leadership ended by Resign, or by
	// closing the Candidate that held it.
	ErrResigned = errors.New("election: resigned")
	// ErrNodeDeleted is the cause of a leadership whose node was deleted
	// by someone else (an operator, or a session that took it over), and
	// the error of a campaign whose node vanished while it waited.
	ErrNodeDeleted = holderr.ErrNodeDeleted
	// ErrDisconnected is the cause of a leadership ended by a lost
	// connection under LoseOnDisconnect. It wraps store.ErrDisconnected.
	ErrDisconnected = holderr.ErrDisconnected
	// ErrNotLeader is returned by Proclaim when the leadership has ended.
	ErrNotLeader = errors.New("election: not the leader")
	// ErrNoLeader is returned by Election.Leader when nobody leads.
	ErrNoLeader = errors.New("election: no leader")
	// ErrKindMismatch: the election's path holds the nodes of another
	// kind of recipe (a corral Mutex's, say); a campaign there fails and
	// leaves no node. It is the same error as sync.ErrKindMismatch.
	ErrKindMismatch = recipe.ErrKindMismatch
)

// prefix starts the name of every candidate node (after the store's own
// protected prefix, on ZooKeeper), as with Curator's LeaderLatch.
const prefix = names.Latch

// DisconnectPolicy says what a leader does when its connection to the store
// is lost while its session may still be alive, so that nobody knows whether
// its node, and so its leadership, still exists.
type DisconnectPolicy = recipe.DisconnectPolicy

const (
	// LoseOnDisconnect ends leadership the moment the connection is lost,
	// with cause ErrDisconnected. It is the default and the safe choice:
	// the old leader stops before a server could expire its session and
	// elect another (Curator's standard policy). A Candidate campaigns
	// again once the connection is back.
	LoseOnDisconnect = recipe.LoseOnDisconnect
	// KeepOnDisconnect keeps leadership through a lost connection and ends
	// it only when the session ends or the node is found gone. Use it only
	// when two leaders for the length of a session timeout are harmless
	// or fenced by the token.
	KeepOnDisconnect = recipe.KeepOnDisconnect
)

// Option configures an Election. A nil Option is bad input: every call of
// the Election fails with store.ErrInvalidArgument.
type Option func(*options)

type options struct {
	policy DisconnectPolicy
	tel    telemetry.Config
	nilOpt bool // a nil option was given
}

// WithDisconnectPolicy sets what a leader does when its connection is lost;
// the default is LoseOnDisconnect.
func WithDisconnectPolicy(p DisconnectPolicy) Option {
	return func(o *options) { o.policy = p }
}

// Election is one election, at one path, seen through one store session.
//
// An Election is safe for concurrent use; it holds no state of its own
// besides its configuration, so several campaigns through one Election are
// several candidates of the same session, ordered like any others. It is
// only as alive as its store: when the session ends, campaigns fail and
// leaderships end with the session's cause (store.ErrSessionExpired or
// store.ErrClosed). A new session needs a new Election.
type Election struct {
	st   store.Store
	path string
	opts options
	rec  *telemetry.Recorder
}

// New returns the election at path on st. It does no I/O; an invalid path
// (or the root) is reported, wrapping store.ErrInvalidPath, by the first call
// that uses it, and a nil st or a nil option, wrapping
// store.ErrInvalidArgument. The zero Election is not usable in the same way.
func New(st store.Store, path string, opts ...Option) *Election {
	e := &Election{st: st, path: path}
	for _, o := range opts {
		if o == nil {
			e.opts.nilOpt = true
			continue
		}
		o(&e.opts)
	}
	e.rec = telemetry.New(e.opts.tel, telemetry.KindElection, path, ErrNodeDeleted)
	return e
}

// Path returns the path of the election's directory node.
func (e *Election) Path() string {
	if e == nil {
		return ""
	}
	return e.path
}

// validate reports an Election that cannot be used: not made by New with a
// store, or with a path or an option no election can have.
func (e *Election) validate() error {
	if e == nil || e.st == nil {
		return fmt.Errorf("%w: election not made by New with a store", store.ErrInvalidArgument)
	}
	if err := recipe.ValidateDir(e.path); err != nil {
		return err
	}
	if e.opts.nilOpt {
		return fmt.Errorf("%w: nil option", store.ErrInvalidArgument)
	}
	if e.opts.policy != LoseOnDisconnect && e.opts.policy != KeepOnDisconnect {
		return fmt.Errorf("%w: %v", store.ErrInvalidArgument, e.opts.policy)
	}
	return nil
}
