// Package store defines the contract between corral's coordination
// primitives and the services that hold their state: a small tree of
// znodes reached through one client session.
//
// A [Store] value is one client session on a shared tree. The primitives in
// corral's sync, queue and election packages are written once against this
// interface and run unchanged on the ZooKeeper (zkstore), etcd (etcdstore) and
// in-memory (memstore) adapters. The conformance suite in store/storetest
// pins every rule below down; an adapter is correct when it passes it.
//
// # Paths
//
// A path is absolute, '/'-separated, with no trailing '/', no empty segment,
// no "." or ".." segment, no NUL, control or private-use character, at most
// [MaxPathSize] bytes and [MaxPathDepth] segments (see [ValidatePath]). The root "/" exists always;
// it can be read, listed and watched but not created, written (Set) or
// deleted. Anything else is rejected with [ErrInvalidPath] before any I/O.
//
// # Limits
//
// A node's data is at most [MaxDataSize] bytes ([ErrTooLarge]) and its path
// at most [MaxPathSize] bytes and [MaxPathDepth] segments
// ([ErrInvalidPath]). Together, with a request's
// own overhead, they stay under the smallest request any backend accepts
// (ZooKeeper's 1 MiB jute.maxbuffer; etcd's 1.5 MiB), so every store
// accepts exactly the same calls, and refuses the same ones before any I/O.
//
// # Parents
//
// Create makes missing parents itself, as persistent nodes with no data, so a
// recipe never has to prepare its directory. Parents are real nodes: they can
// be read, listed and watched, and deleting one that has children fails with
// [ErrNotEmpty]. Ephemeral nodes cannot have children ([ErrEphemeralParent]),
// as in ZooKeeper.
//
// A parent Create made implicitly is a directory, and it does not outlive
// its use: the delete that takes its last child (Delete, or any delete of
// the optional capabilities) removes it too, and then each directory above
// it that is left empty, up to the first node made explicitly; with it,
// or, where an adapter says so, a bounded time after it unless the same
// session creates in it again meanwhile (zkstore and etcdstore: their
// reclaim delay, a second by default, which spares a name in constant use
// its directory's making and removal every cycle). So a
// per-entity lock ("/locks/order-123") leaves nothing behind once
// unlocked. A node Create was asked to make is never removed implicitly,
// empty or not, whatever is above or below it. Creating a directory that
// exists fails with [ErrNodeExists] and leaves it a directory; setting its
// data does too, and its data goes with it (on ZooKeeper such a directory
// is left to the server's reaper, below: the Store no longer knows it for
// its own). A recipe that keeps a node on purpose creates it explicitly.
//
// The removal is safe under every race: a create into a directory being
// removed either lands first, and the directory stays, or finds it gone and
// makes it again; so the create succeeds, and Seq still orders it after
// every node created before in the directory. A watch on a directory, or
// on a node in it, fires when the directory goes. A directory is its
// nodes' parent like any other: what a recipe keeps in it (a queue's
// items, a barrier that is up) keeps it.
//
// A directory emptied by a session's end rather than by a delete goes too,
// where the store can see it: memstore at once; ZooKeeper when the server
// next reaps container nodes (directories are containers, checked every
// znode.container.checkIntervalMs, a minute by default). etcd's clients do
// not see a lease's keys expire: such a directory stays until the next
// one out of it. Their number is bounded by the holds that were live when
// sessions ended, not by time or by churn.
//
// How each adapter does it: memstore in the same step as the delete.
// ZooKeeper makes directories as container nodes holding a mark (its
// clients cannot tell a container from a persistent node), and the session
// that deletes a directory's last child deletes the directory, on
// condition of its version, which fails harmlessly with ErrNotEmpty when a
// contender came in: after its reclaim delay unless it created in the
// directory again, or, with no delay, at once, sending that delete right
// behind the node's (no round trip more). etcd keeps a marker key of the
// adapter's own beside each directory; a transaction removes it with its
// marker and its front record (see [FrontDeleter]), and every directory
// above that this empties, on condition that it holds nothing: after the
// reclaim delay unless the session created in it again, or, with no delay,
// the very transaction that deletes its last key; and the transaction of a
// create makes the missing directories itself. On both, a create that made
// directories and then no node (its caller left, its connection dropped
// between two of them) hands them to the same removal, and a removal whose
// request meets a lost connection is tried again while the session lasts.
//
// A directory that many short-lived names share (a service's "/locks")
// comes and goes with them when Create made it: each time it empties, it
// is removed, and the next name makes it again, a few requests more per
// cycle on ZooKeeper, and on etcd more work for the server in the same
// requests, with a check of its emptiness that reads the directory's
// history since the last compaction. Create such a directory explicitly
// once, and only each name's own directory comes and goes.
//
// On ZooKeeper a sequential node's Seq is the parent's counter, which
// starts again at 0 in a directory made again: a Seq orders the nodes of
// one directory while it exists (see Seq). A fencing token must grow across
// them: [Node.Fence] does (see Node.Token).
//
// # Seq
//
// Every node carries a Seq that orders siblings by creation. For a sequential
// node it is assigned by the store at create time and is strictly greater
// than every Seq assigned before to a sequential child of the same parent; it
// never goes backwards while the parent exists, which is what makes it a
// fencing token. ZooKeeper: the 10-digit suffix of the name. etcd: the key's
// CreateRevision. memstore: a store-wide creation counter, as etcd.
//
// For a non-sequential node Seq is whatever creation order the backend knows:
// etcd's CreateRevision and memstore's counter order it among its siblings,
// while ZooKeeper only knows the order of names that end in a 10-digit
// sequence suffix (written by Curator, kazoo or go-zookeeper, say) and gives
// every other name Seq 0. Recipes therefore order only sequential nodes and
// nodes written by other clients' recipes, by Seq, never by name.
//
// The name of a sequential node is the requested name followed by a suffix
// unique under the parent. ZooKeeper and memstore append a 10-digit Seq
// ([FormatSeq]); ZooKeeper also puts a "_c_<uuid>-" prefix in front of
// ephemeral sequential names (Curator's protected form, see below); etcd
// appends a unique hexadecimal suffix.
//
// # Identity
//
// A node is identified by its path and its Seq together, never by its path
// alone. A name can be used again once its node is gone: etcd's own lock and
// election clients name their key after their session's lease and use that
// name for every acquisition, an operator can re-create a deleted node, and a
// store may reuse names itself (etcdstore does, for ephemeral sequential
// nodes deleted with [SeqDeleter]). So a recipe that waits for "the node in
// front of me" to go waits for that path with that Seq: a node found at the
// path with another Seq counts as gone (ExistsW returns the Seq it found).
//
// # Lost replies
//
// A connection can break after the server applied a request but before its
// reply arrived. For an ephemeral sequential create the adapter must still
// yield exactly one node: it finds the node it created (by a unique part of
// its name, and checking that the node belongs to this session) or makes the
// create idempotent. For other creates the outcome of a call that fails with
// [ErrDisconnected] is unknown: the node may or may not exist.
//
// # Sessions
//
// A session ends when it is closed, when the server expires it, or when the
// client can no longer keep it alive. Its ephemeral nodes then disappear for
// every other session, [Store.Context] is cancelled with the reason as its
// cause ([ErrSessionExpired] or [ErrClosed]) and every later call fails with
// that error. A session never comes back: a new session is a new Store.
//
// The client's session clock runs ahead of the server's. An adapter ends
// its session no later than the server can: at the send time of the latest
// contact the server acknowledged plus the timeout the server granted, on
// the client's monotonic clock. It checks this whenever a call starts or
// delivers its result, whenever Context or Disconnected is called, and by a
// timer; so a hold tied to Context is lost before the server can hand it to
// another session, and a process resumed past the deadline (SIGSTOP, a VM
// pause) sees the end on its first read. A call whose answer arrives after
// the session ended fails with the session's end; its outcome is unknown.
//
// Losing the connection without losing the session is reported apart from
// expiry, by [Store.Disconnected]: while disconnected the client cannot know
// whether its session, and so its ephemeral nodes, still live (ownership is
// unknown). Calls made meanwhile either wait for the reconnection (bounded by
// their ctx and the session's end) or fail with [ErrDisconnected]; the
// session may still recover.
//
// # Abandoned calls
//
// Every call returns within its ctx, plus a small bound the adapter
// documents. A create abandoned that way (or whose reply was lost) must not
// leave an ephemeral node behind: if it was made, the adapter deletes it as
// soon as the connection allows, while the session lives (its end takes the
// node with it). The outcome of an abandoned persistent create is unknown,
// as with [ErrDisconnected].
//
// # Watches
//
// Watches are one-shot channels with capacity 1: each delivers exactly one
// [Event] and is then closed, so a receiver never hangs. If the watch can no
// longer fire (its ctx is done, the session ended, the store was closed) the
// event carries Err instead of a change. There is no gap between the check a
// watch call makes and the watch it sets: a change made after the check is
// always reported.
//
// A watch must not outlive what it serves. A watch a caller gave up (its
// ctx ended) may stay with the backend until it fires, and on ZooKeeper an
// ExistsW on a missing node is a watch on the node's creation, which for a
// sequential node's name never comes. So a wait for a node to go watches it
// with [WatchNode] ([NodeWatcher]), which sets no watch on a missing node:
// every such watch fires at the latest when its node goes, and the watches
// a session holds stay within a constant of the live nodes. ExistsW on a
// missing node is for a path whose creation the caller waits for (a
// recipe's directory, a barrier's node): one per session and path.
//
// # Errors
//
// Every error a Store returns wraps one of the sentinels below (and, as a
// rule, the backend's own error beside it); callers match them with
// errors.Is:
//
//   - [ErrNoNode], [ErrNodeExists], [ErrNotEmpty], [ErrBadVersion],
//     [ErrEphemeralParent]: the tree is not as the call requires.
//   - [ErrInvalidPath], [ErrInvalidArgument], [ErrTooLarge]: the call is
//     malformed; it is refused before any I/O where the adapter can tell.
//   - [ErrSessionExpired], [ErrClosed]: the session has ended (see
//     Sessions).
//   - [ErrDisconnected]: the connection was lost; the call's outcome is
//     unknown.
//   - [ErrAuth]: the server did not accept the client's credentials (a
//     wrong password, none where the server requires some, a certificate
//     one side does not trust). An adapter reports it when the session is
//     opened, where the backend lets it tell.
//   - [ErrPermission]: the client is who it says, but its identity may not
//     do this to this node (a ZooKeeper ACL, an etcd role).
//
// # Capabilities
//
// What every recipe needs and every adapter provides is in [Store] itself,
// the children watch ([Store.ChildrenW]) included. The rest are optional
// capabilities, each a small interface an adapter implements where its
// backend makes a call cheaper: [CreateLister], [WindowLister],
// [SeqDeleter], [FrontDeleter], [GetDeleter], [ChildrenFollower],
// [ChildCounter], [Leaser], [GuardedCreator], [BatchCreator],
// [ImplicitDirLister], [NodeWatcher] and [GuardedWriter]. A recipe finds
// one only through this package ([Find], and the helpers with a portable
// fallback, [WatchNode] and [ImplicitDirs]; [Write] for GuardedWriter,
// which has none), never by its own type assertion. A store without any of
// them still runs every recipe, through full listings, but for writes
// guarded by a hold, which need the server's atomic check.
//
// [GuardedWriter] applies several writes (a create, a set or a delete with
// a version, a check of a version) all or none, only while the nodes of
// its guards exist with their Seqs ([Guard]): a holder's write is applied
// only while its hold's node lives at the server, whatever its own clock
// says. Its rules: every condition is of the tree as it was before the
// call, so the ops touch distinct nodes, none below another; a create
// makes a persistent node under an existing parent; a refusal is a
// [*WriteError] naming the first guard ([ErrGuardFailed]) or else the
// first op (the sentinel its Store method would return) that refused, and
// nothing is written; a delete reclaims the directory it empties; and the
// limits [MaxWriteOps] and [MaxWriteSize] keep one write within every
// backend's request ([ValidateWrite]).
//
// [FrontDeleter] stays outside the contract: it is a cost trick of stores
// whose windowed reads walk the whole directory (etcd; memstore imitates
// it to test the hand-off), and a store that lacks it loses nothing but a
// listing per hand-over. A store that wraps another (a [Wrapper]) offers
// exactly the capabilities of the store it wraps: [Find] looks through it.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store is one client session on a shared tree of nodes.
//
// All methods are safe for concurrent use. Every method that does I/O takes
// a ctx first and returns ctx.Err() (wrapped) when ctx ends first; a create
// abandoned that way leaves no ephemeral node behind. On a session that has
// ended, a call fails with the session's end even when its ctx is done too:
// that end is for good. Errors wrap the
// sentinels of this package and are matched with errors.Is.
type Store interface {
	// Create creates the node at path with data and returns it; for a
	// sequential mode the returned node carries the final path and Seq.
	// Missing parents are created as persistent, empty nodes. An existing
	// path fails with ErrNodeExists, an ephemeral parent with
	// ErrEphemeralParent, data over MaxDataSize with ErrTooLarge.
	Create(ctx context.Context, path string, data []byte, mode Mode) (Node, error)

	// Get returns the node at path, or ErrNoNode.
	Get(ctx context.Context, path string) (Node, error)

	// Set replaces the data of the node at path if its Version equals
	// version, or unconditionally when version is AnyVersion. It returns the
	// updated node, ErrNoNode, or ErrBadVersion.
	Set(ctx context.Context, path string, data []byte, version int64) (Node, error)

	// Children returns the direct children of path sorted by Seq, then by
	// name, or ErrNoNode when path does not exist.
	Children(ctx context.Context, path string) ([]Child, error)

	// ExistsW reports whether path exists, with the node's Stat when it
	// does, and returns a one-shot channel that delivers the next
	// creation, deletion or data change of path. If the watch can no
	// longer fire (ctx done, session ended, store closed) the event carries
	// Err. There is no gap between the check and the watch. When err is
	// non-nil no watch is set and the channel is nil.
	//
	// The Stat tells which node is there: a node at the same path with
	// another Seq is another node (see Identity in the package doc).
	ExistsW(ctx context.Context, path string) (exists bool, stat Stat, ev <-chan Event, err error)

	// ChildrenW returns the children of path as Children does and a
	// one-shot channel that delivers the next change to the set of
	// children (a child created or deleted) or the deletion of path. It
	// follows the rules of ExistsW: exactly one event, then closed; Err set
	// when the watch can no longer fire; no gap between list and watch.
	// ErrNoNode, with no watch, when path does not exist.
	ChildrenW(ctx context.Context, path string) ([]Child, <-chan Event, error)

	// Delete deletes the node at path; ErrNoNode when it does not exist,
	// ErrNotEmpty when it has children.
	Delete(ctx context.Context, path string) error

	// SessionID identifies this session. An ephemeral node created by this
	// session has it as its Owner.
	SessionID() int64

	// Context returns a context that is cancelled when the session ends,
	// with ErrSessionExpired or ErrClosed (possibly wrapped) as its cause.
	Context() context.Context

	// Disconnected returns a channel that is closed the next time the
	// client loses its connection (while ownership of its ephemeral nodes
	// is unknown), or when the session ends. If the client is disconnected
	// now the channel is already closed. Call it again after a
	// reconnection to wait for the next disconnection.
	Disconnected() <-chan struct{}

	// Close ends the session and removes its ephemeral nodes. It is
	// idempotent; calls after Close fail with ErrClosed.
	Close() error
}

// ChildrenWatcher is the children watch alone. Every Store has it (see
// Store.ChildrenW): it is part of the contract, because the recipes that
// wait on a directory (a queue consumer on an empty queue, inspect's
// Watcher, an election's observers) need it and every adapter provides
// it. The interface stays for code that names the method set alone.
type ChildrenWatcher interface {
	ChildrenW(ctx context.Context, path string) ([]Child, <-chan Event, error)
}

// CreateLister is an optional capability, found by type assertion: create a
// node and list its siblings in one round trip. etcd does it in one
// transaction; lock recipes use it to acquire in one round trip.
type CreateLister interface {
	// CreateAndList creates a node as Create does and returns it with the
	// children of its parent as Children would list them right after the
	// create (so the list includes the new node).
	CreateAndList(ctx context.Context, path string, data []byte, mode Mode) (Node, []Child, error)
}

// WindowLister is an optional capability, found by type assertion: read
// the children of a node just up to a given Seq, without listing them all.
// A contender of a lock needs only the contenders just before its own, and
// a full listing costs in proportion to their number; a store that can
// read a window of children in Seq order offers this. Children stays the
// portable way to read them all.
type WindowLister interface {
	// ChildrenUpTo returns the children of path whose Seq is at most seq,
	// at most n of them (n >= 1): those with the highest Seq, sorted as
	// Children sorts them. complete reports that path has no other child
	// with a Seq at most seq, so that the window starts at the first
	// child. A window may hold fewer than n children and still not be
	// complete (etcd reads a prefix, and skips what lies deeper than a
	// child): only complete says that nothing comes before it. A missing
	// path has no children: ChildrenUpTo does not report ErrNoNode.
	ChildrenUpTo(ctx context.Context, path string, seq int64, n int) (kids []Child, complete bool, err error)

	// CreateAndWindow creates a node as Create does and returns it with
	// the window ChildrenUpTo(parent, node.Seq, n) as it was right after
	// the create, so that the window ends with the new node.
	CreateAndWindow(ctx context.Context, path string, data []byte, mode Mode, n int) (node Node, kids []Child, complete bool, err error)
}

// SeqDeleter is an optional capability, found by type assertion: delete a
// node only if it is the node with a given Seq. A store that uses names
// again (see Identity in the package doc) offers it, so that a late delete
// meant for a node that is gone never removes the node now at its path.
type SeqDeleter interface {
	// DeleteSeq deletes the node at path if its Seq is seq, as Delete
	// does. It fails with ErrNoNode when there is no node at path or the
	// node there has another Seq, and with ErrNotEmpty when it has
	// children.
	DeleteSeq(ctx context.Context, path string, seq int64) error
}

// FrontDeleter is an optional capability, found by type assertion: delete
// a contender node and record, in the same step, that it left from the
// front, so that the contender that waited for it learns with one point
// read that nothing comes before it now, where otherwise it would read the
// contenders again. A store whose reads of children in Seq order cost in
// proportion to their number offers it (etcd sorts the whole directory to
// read even a window).
//
// A directory has one record: the Seq of the last node deleted with
// DeleteFront. It is the store's own: no path reaches it and no listing
// shows it.
type FrontDeleter interface {
	// DeleteFront deletes the node at path with Seq seq as
	// SeqDeleter.DeleteSeq does and, when it does, records seq in path's
	// parent in the same step. The caller vouches that no sibling
	// contender came before the node when it was deleted: an exclusive
	// holder releasing its hold.
	DeleteFront(ctx context.Context, path string, seq int64) error

	// FollowsFront reports whether the node at path with Seq seq exists
	// and the record of path's parent is prev, both read at one moment:
	// the sibling with Seq prev was the last to leave from the front.
	FollowsFront(ctx context.Context, path string, seq, prev int64) (bool, error)
}

// Mode is a set of create flags. The zero Mode creates a persistent node.
type Mode uint8

const (
	// Ephemeral nodes belong to the creating session and disappear when it
	// ends.
	Ephemeral Mode = 1 << iota
	// Sequential nodes get a store-assigned, unique, increasing suffix.
	Sequential
)

// Persistent is the zero Mode: a node that lives until deleted.
const Persistent Mode = 0

// EphemeralSequential is the mode of every recipe's contender nodes.
const EphemeralSequential = Ephemeral | Sequential

// Valid reports whether m has only known flags.
func (m Mode) Valid() bool { return m&^(Ephemeral|Sequential) == 0 }

func (m Mode) String() string {
	switch m {
	case Persistent:
		return "persistent"
	case Ephemeral:
		return "ephemeral"
	case Sequential:
		return "sequential"
	case EphemeralSequential:
		return "ephemeral-sequential"
	}
	return fmt.Sprintf("Mode(%#x)", uint8(m))
}

// Node is a node's path, data and metadata.
type Node struct {
	Path string
	Data []byte
	// Seq orders the node among its siblings; see the package doc.
	Seq int64
	// Version counts changes to Data: 0 after Create, +1 on each Set.
	Version int64
	// Owner is the SessionID of the session an ephemeral node belongs to,
	// and 0 for a persistent node.
	Owner int64
	// Token, when not 0, is the node's fencing token, where its Seq is
	// not one across the incarnations of its directory (see Parents):
	// ZooKeeper's CreateAndList sets it to the directory's creation zxid
	// plus the Seq, which grows over every node created at the path
	// before, in this directory or an earlier one of the same path. Read
	// it with [Node.Fence].
	Token int64
	// Created is when the node was created, on the server's clock, where
	// the store keeps it (ZooKeeper's ctime, memstore), and the zero Time
	// where it does not (etcd keeps revisions, not times). Get sets it;
	// other calls may leave it zero. It is for display (how long a
	// contender has waited or held), never for ordering: use Seq.
	Created time.Time
}

// Name returns the last segment of n.Path.
func (n Node) Name() string { return Base(n.Path) }

// Fence returns n's fencing token: Token where set, else Seq, which then
// grows over every node created before (etcd's revision, memstore's
// counter).
func (n Node) Fence() int64 {
	if n.Token != 0 {
		return n.Token
	}
	return n.Seq
}

// Stat returns the metadata of n.
func (n Node) Stat() Stat { return Stat{Seq: n.Seq, Version: n.Version, Owner: n.Owner} }

// Stat is the metadata of a node, as ExistsW reports it: a Node without its
// path and data.
type Stat struct {
	Seq     int64
	Version int64
	Owner   int64
}

// Child is one entry of a node's children list.
type Child struct {
	Name string
	Seq  int64
}

// AnyVersion makes Set unconditional.
const AnyVersion int64 = -1

// MaxDataSize is the largest Data a node may hold. With MaxPathSize it keeps
// every request under ZooKeeper's default 1 MiB packet limit
// (jute.maxbuffer) and etcd's 1.5 MiB request limit, so that all adapters
// accept exactly the same data.
const MaxDataSize = 1000 << 10

// MaxPathSize is the longest path, in bytes, a node may have.
const MaxPathSize = 4096

// MaxPathDepth is the largest number of segments a path may have. Create
// makes missing parents, and etcd does that in one transaction of one
// operation per parent (its default limit is 128 operations).
const MaxPathDepth = 100

// EventType says what a watch saw.
type EventType int

const (
	// EventNone is the type of an event that carries Err.
	EventNone EventType = iota
	// EventCreated: the watched node was created.
	EventCreated
	// EventDeleted: the watched node was deleted.
	EventDeleted
	// EventDataChanged: the watched node's data was set.
	EventDataChanged
	// EventChildrenChanged: a child of the watched node was created or
	// deleted.
	EventChildrenChanged
)

func (t EventType) String() string {
	switch t {
	case EventNone:
		return "none"
	case EventCreated:
		return "created"
	case EventDeleted:
		return "deleted"
	case EventDataChanged:
		return "data-changed"
	case EventChildrenChanged:
		return "children-changed"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is what a one-shot watch delivers.
type Event struct {
	Type EventType
	Path string
	// Err is set, and Type is EventNone, when the watch can no longer
	// fire: it wraps ctx.Err(), ErrSessionExpired, ErrClosed or
	// ErrDisconnected.
	Err error
}

// The sentinel errors of the contract. Adapters wrap them, with the
// backend's own error, and callers match them with errors.Is.
var (
	ErrNoNode          = errors.New("store: node does not exist")
	ErrNodeExists      = errors.New("store: node already exists")
	ErrNotEmpty        = errors.New("store: node has children")
	ErrBadVersion      = errors.New("store: version does not match")
	ErrEphemeralParent = errors.New("store: ephemeral nodes cannot have children")
	ErrInvalidPath     = errors.New("store: invalid path")
	ErrInvalidArgument = errors.New("store: invalid argument")
	ErrTooLarge        = errors.New("store: data too large")
	// ErrSessionExpired: the session ended without Close; its ephemeral
	// nodes are gone. Open a new session.
	ErrSessionExpired = errors.New("store: session expired")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrDisconnected: the connection was lost; the outcome of the call is
	// unknown and the session may still recover.
	ErrDisconnected = errors.New("store: disconnected")
	// ErrAuth: the server did not accept the client's credentials, or the
	// client the server's (a TLS certificate it does not trust). Trying
	// again with the same credentials fails again.
	ErrAuth = errors.New("store: authentication failed")
	// ErrPermission: the server refused the call because the client's
	// identity lacks the right to do it on that node (a ZooKeeper ACL, an
	// etcd role). Nothing was changed.
	ErrPermission = errors.New("store: permission denied")
)
