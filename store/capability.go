package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The optional capabilities below let a queue take an item for a constant
// cost whatever the length of its backlog and the history of its
// directory. Each is found by type assertion; a store without them still
// runs every recipe, through full listings.

// GetDeleter is an optional capability: delete a node and get it back as
// it was, in one round trip. A queue takes an item with it.
type GetDeleter interface {
	// GetDelete deletes the node at path as Delete does (ErrNoNode,
	// ErrNotEmpty) and returns it as it was just before. As with Delete,
	// a call that fails with ErrDisconnected may have deleted the node;
	// what it held is then lost to the caller.
	GetDelete(ctx context.Context, path string) (Node, error)
}

// ChildrenFollower is an optional capability: list the children of a node
// once and then follow every creation and deletion of a child, in order,
// without listing again. A queue consumer keeps its view of a long backlog
// with it.
type ChildrenFollower interface {
	// FollowChildren lists the children of path as Children does and
	// returns them with a follow that delivers every change to them
	// after that listing. A missing path has no children: its children
	// are followed all the same, from their creation on. ctx bounds the
	// listing only: the follow lives until Stop is called, the session
	// ends, or the store can no longer tell every change (a lost
	// connection with a gap it cannot close); Changes then reports why.
	FollowChildren(ctx context.Context, path string) (ChildrenFollow, []Child, error)
}

// ChildrenFollow is the stream of changes to the children of one node,
// from the listing FollowChildren returned. Its methods are safe for
// concurrent use.
type ChildrenFollow interface {
	// Changes returns the changes delivered since the last call, oldest
	// first, and a channel that is closed once more are ready or the
	// follow has ended. err is nil while the follow runs; once it has
	// ended, and the changes delivered before are taken, err says why
	// (wrapping ctx's error, ErrSessionExpired, ErrClosed or
	// ErrDisconnected) and the channel is closed.
	Changes() (changes []ChildChange, ready <-chan struct{}, err error)
	// Sync blocks until every change made before Sync was called has
	// been delivered, so that Changes, called after Sync returns nil,
	// includes it; or until ctx ends or the follow ends. It costs at
	// most a few small requests, however long the backlog.
	Sync(ctx context.Context) error
	// Stop ends the follow and waits for the goroutines it runs. It is
	// idempotent.
	Stop()
}

// ChildChange is one change to the children of a followed node.
type ChildChange struct {
	// Type is EventCreated or EventDeleted.
	Type EventType
	// Name is the child's name.
	Name string
	// Seq is the Seq of the created child; 0 for a deletion.
	Seq int64
}

// ChildCounter is an optional capability: tell, in one small request,
// whether children were created or deleted under a node, without listing
// it. A queue consumer that keeps a listing asks it whether items were put
// since. ZooKeeper keeps these counts in every node's stat.
type ChildCounter interface {
	// CountChildren returns the child counts of path, or ErrNoNode.
	CountChildren(ctx context.Context, path string) (ChildCounts, error)
	// ChildrenCounted returns the children of path as Children does and
	// the child counts of the same moment.
	ChildrenCounted(ctx context.Context, path string) ([]Child, ChildCounts, error)
}

// ChildCounts counts the children of a node. Two counts of one node are
// equal exactly when no child was created or deleted in between (within
// 2^31 changes: ZooKeeper's counters are 32-bit and wrap).
type ChildCounts struct {
	// Children is the number of children.
	Children int64
	// Changes counts the creations and deletions of children since the
	// node was created; (Changes + Children) / 2 of them were creations.
	Changes int64
	// Made tells one incarnation of the node from another: a directory
	// removed with its last child and made again (see Parents in the
	// package doc) counts from 0 again, under another Made. Counts with
	// different Made are of different nodes, and do not compare.
	// ZooKeeper: the node's czxid; memstore: its Seq.
	Made int64
}

// Created returns the number of children ever created under the node.
func (c ChildCounts) Created() int64 { return (c.Changes + c.Children) / 2 }

// Leaser is an optional capability: a node with a lease of its own, timed
// on the server's clock and ended apart from the session. A queue gives an
// at-least-once claim one, so that a consumer that stops renewing its claim
// loses it however alive its session is.
type Leaser interface {
	// CreateLeased creates the node at path as Create does with mode
	// Persistent, attached to a new lease with the given TTL (which the
	// server may raise to its minimum): the server deletes the node when
	// the lease ends, at the latest once the TTL has passed since the
	// last renewal, whatever becomes of the session. The node's Owner is
	// the lease's ID, never a session's. A ttl below a millisecond fails
	// with ErrInvalidArgument.
	CreateLeased(ctx context.Context, path string, data []byte, ttl time.Duration) (Node, Lease, error)
}

// Lease is the lease of a node made by Leaser.CreateLeased. Its methods
// are safe for concurrent use.
type Lease interface {
	// Deadline returns when the lease may end on the server unless it is
	// renewed, on the client's clock: the sending of the grant or of the
	// latest acknowledged renewal plus the TTL. Before that, the server
	// cannot have deleted the node for the lease's sake.
	Deadline() time.Time
	// Renew restarts the lease's TTL and moves Deadline on. It fails
	// with ErrNoNode once the lease has ended (the node is gone).
	Renew(ctx context.Context) error
	// Revoke ends the lease now, which deletes its node. A lease that has
	// ended already counts as revoked.
	Revoke(ctx context.Context) error
}

// GuardedCreator is an optional capability: create a node only while
// another one exists, in one atomic step. A queue consumer that works from
// a listing claims an item with it, so that a claim is never made on an
// item acked meanwhile. ZooKeeper does it with a multi (a check and a
// create).
type GuardedCreator interface {
	// CreateIf creates the node at path as Create does, provided the node
	// at guard exists when it is made; otherwise it creates nothing and
	// fails with an error wrapping ErrNoNode. mode must not be Sequential
	// (ErrInvalidArgument). As with Create, a call that fails with
	// ErrDisconnected may have made the node, and an ephemeral node of a
	// call abandoned by its ctx is undone.
	CreateIf(ctx context.Context, path string, data []byte, mode Mode, guard string) (Node, error)
}

// ImplicitDirLister is an optional capability of a store in which a
// directory can exist only through the nodes below it, and is then
// missing from its parent's Children: etcd, where other clients' recipes
// (concurrency.Mutex and Election, "etcdctl lock") write
// "<prefix>/<lease>" with no key at "<prefix>". A tool that walks a tree
// (inspect.Walk, "corral ls -r") asks it for the directories a walk by
// Children would miss; recipes never need it.
type ImplicitDirLister interface {
	// ImplicitDirs returns the paths strictly below path of the
	// directories that are no node but have nodes below them, sorted,
	// with one read of path's subtree. Keys below path that are no valid
	// path are left out.
	ImplicitDirs(ctx context.Context, path string) ([]string, error)
}

// BatchCreator is an optional capability: create many nodes under one
// parent in one request, all of them or none. A queue puts a batch of
// items with it (ZooKeeper: a multi of creates; etcd: one transaction).
type BatchCreator interface {
	// CreateBatch creates under parent one node per entry of batch, in
	// its order, as Create would with mode, which must be Persistent or
	// Sequential (ErrInvalidArgument otherwise): every node is made, in
	// one atomic step, or none is. Sequential nodes get Seqs in batch
	// order, which may be equal (etcd gives every key of a transaction
	// the same CreateRevision). A missing parent is made first, as
	// Create makes it. A batch that is empty, or does not fit one request
	// (see ValidateBatch), fails before any I/O. An existing node fails
	// the whole batch with ErrNodeExists. As with Create, a call that
	// fails with ErrDisconnected, or whose ctx ends while it is under
	// way, may have made the nodes (all of them) or not.
	CreateBatch(ctx context.Context, parent string, batch []BatchNode, mode Mode) ([]Node, error)
}

// BatchNode is one node of a CreateBatch: its name under the parent (for
// a sequential node, before the store's suffix) and its data.
type BatchNode struct {
	Name string
	Data []byte
}

// The limits of one batch: they keep a batch within the smallest request
// any store accepts (ZooKeeper's 1 MiB jute.maxbuffer; etcd's 1.5 MiB
// request and 128 operations per transaction), counting every node's
// path twice (etcd compares and writes each key) and a margin for each
// operation's framing.
const (
	// MaxBatchNodes is the most nodes one CreateBatch may create.
	MaxBatchNodes = 100
	// MaxBatchSize is the most bytes, paths and data of every node
	// together, one CreateBatch may create.
	MaxBatchSize = 768 << 10
)

// ValidateBatch checks the arguments of a CreateBatch before any I/O: the
// parent, each node's name and data, the mode (Persistent or Sequential),
// and the limits: an empty batch fails with ErrInvalidArgument, one over
// MaxBatchNodes nodes or MaxBatchSize bytes with ErrTooLarge.
func ValidateBatch(parent string, batch []BatchNode, mode Mode) error {
	if err := ValidatePath(parent); err != nil {
		return err
	}
	if mode != Persistent && mode != Sequential {
		return fmt.Errorf("%w: batch mode %v: want persistent or sequential", ErrInvalidArgument, mode)
	}
	if len(batch) == 0 {
		return fmt.Errorf("%w: empty batch", ErrInvalidArgument)
	}
	if len(batch) > MaxBatchNodes {
		return fmt.Errorf("%w: batch of %d nodes, at most %d", ErrTooLarge, len(batch), MaxBatchNodes)
	}
	size := 0
	for i, n := range batch {
		p := Join(parent, n.Name)
		if n.Name == "" || strings.Contains(n.Name, "/") {
			return fmt.Errorf("%w: batch node %d: name %q", ErrInvalidPath, i, n.Name)
		}
		if err := ValidateCreate(p, n.Data, mode); err != nil {
			return fmt.Errorf("batch node %d: %w", i, err)
		}
		size += len(p) + len(n.Data)
	}
	if size > MaxBatchSize {
		return fmt.Errorf("%w: batch of %d bytes, at most %d", ErrTooLarge, size, MaxBatchSize)
	}
	return nil
}

// GuardedWriter is an optional capability: apply several writes in one
// atomic step, only while given nodes exist, all of them or none. A holder
// writes state with it only while it holds its lock (see Guard), as the
// server decides when it applies the writes: ZooKeeper with a multi of
// checks and writes, etcd with a transaction that compares each guard's
// CreateRevision and each write's version.
type GuardedWriter interface {
	// WriteIf applies ops provided that, when the server applies them,
	// the node of every guard exists with the guard's Seq and every op's
	// own condition holds (see Op); otherwise it writes nothing. Every
	// condition is of the tree as it was before the call: the ops touch
	// distinct nodes, none below another (see ValidateWrite, which
	// refuses every malformed call before any I/O).
	//
	// It returns one Node per op: for OpCreate the node made (Path, Data,
	// Seq); for OpSet the node with its new Data and Version; for
	// OpDelete and OpCheck the Path alone. A refusal is a *WriteError that
	// names the first guard, or else the first op, that refused, and
	// wraps ErrGuardFailed for a guard, and ErrNoNode, ErrNodeExists,
	// ErrBadVersion, ErrNotEmpty or ErrEphemeralParent for an op, as the
	// Store method of its kind would fail. A delete that empties a
	// directory Create made removes it, as Delete does (see Parents).
	//
	// As with Set, a call that fails with ErrDisconnected, or whose ctx
	// ends while it is under way, may have applied its writes (all of
	// them) or not.
	WriteIf(ctx context.Context, guards []Guard, ops []Op) ([]Node, error)
}
