package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// TreeFollower is an optional capability: read a subtree once and then
// follow every change in it (a node created, its data set, the node
// deleted) with one watch for the whole tree, not one per node. A cache of
// shared state (configuration, a service's endpoints, the assignments other
// processes publish) keeps its view with it. Find it through [FollowTree],
// which falls back on one-shot watches where a store lacks it.
//
// It generalises [ChildrenFollower] to a subtree of any depth and to data:
// ChildrenFollower stays what a queue consumer needs (the names and Seqs
// of one directory's children, none of their data, read in Seq order),
// while a follow of a tree carries each node's data and Stat, which a
// queue's consumer would pay for at every item.
//
// etcd follows a tree with one prefix watch, resumed from its revision
// after a lost connection; ZooKeeper 3.6 and later with one persistent
// recursive watch (addWatch), which a lost connection ends (the server
// keeps no history to resume it from); memstore in the step of each change.
type TreeFollower interface {
	// FollowTree reads the nodes of the subtree at path down to depth
	// segments below it (0: path alone; 1: path and its children; up to
	// MaxPathDepth: the whole subtree), sorted by path, and returns them
	// with a follow that delivers every change to them after that read.
	// A missing path has no nodes: it is followed all the same, into its
	// creation. A subtree of more than limit nodes (limit >= 1) fails with
	// ErrTooLarge, having read about limit nodes at most.
	//
	// ctx bounds the read only: the follow lives until Stop is called,
	// the session ends, or the store can no longer vouch that it tells
	// every change; Changes then reports why (see TreeFollow).
	//
	// A depth outside 0 to MaxPathDepth, or a limit below 1, fails with
	// ErrInvalidArgument, an invalid path with ErrInvalidPath, both
	// before any I/O.
	FollowTree(ctx context.Context, path string, depth, limit int) (TreeFollow, []Node, error)
}

// TreeFollow is the stream of changes to a subtree, from the nodes
// FollowTree read. Its methods are safe for concurrent use.
//
// Changes of one path come in the order they were made, each the state the
// node had at some moment after the one before it: a store may merge
// changes of a path into the latest (ZooKeeper reads a node after the
// notification of its change, and the read may see later changes too), so
// a change may skip states, and may repeat the state of the change before
// it; but a path's last change is its state once the follow has caught up
// (Sync). Changes of different paths come in the order the store saw
// them, but for those merged: a later state of one path may come before
// the change of another path made in between. A change below depth is
// not delivered, although a store with one watch for the tree still
// receives it.
type TreeFollow interface {
	// Changes returns the changes delivered since the last call, oldest
	// first, and a channel that is closed once more are ready or the
	// follow has ended. err is nil while the follow runs; once it has
	// ended, and the changes delivered before are taken, err says why:
	// an error wrapping ErrDisconnected when the store cannot vouch
	// that it told every change (a lost connection that left a gap, a
	// compaction of etcd's history, a caller that left more than
	// MaxTreeBacklog changes untaken), and the caller then follows anew,
	// from a new read; the session's end (ErrSessionExpired,
	// ErrClosed); ErrClosed after Stop; ErrTooLarge where a store that
	// keeps each node's state would keep more than its limit.
	Changes() (changes []TreeChange, ready <-chan struct{}, err error)
	// Sync blocks until every change made before Sync was called has
	// been delivered, so that Changes, called after Sync returns nil,
	// includes it; or until ctx ends or the follow ends.
	Sync(ctx context.Context) error
	// Stop ends the follow, releases its watch and waits for the
	// goroutines it runs. It is idempotent.
	Stop()
}

// TreeChange is one change in a followed subtree.
type TreeChange struct {
	// Type is EventDeleted exactly when the node is gone, and otherwise
	// EventCreated or EventDataChanged, as the store saw it: a caller
	// that must tell a new node from a changed one compares its Seq with
	// the one it knows (see Identity in the package doc).
	Type EventType
	// Node is the node after the change: for a deletion, its Path alone.
	Node Node
}

// MaxTreeBacklog is the most changes a TreeFollow keeps for a caller that
// does not take them: past it the follow ends with ErrDisconnected, and
// its memory stays bounded whatever the rate of changes.
const MaxTreeBacklog = 1 << 16

// ValidateTree checks the arguments of a FollowTree before any I/O: the
// path, the depth (0 to MaxPathDepth) and the limit (at least 1).
func ValidateTree(path string, depth, limit int) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	if depth < 0 || depth > MaxPathDepth {
		return fmt.Errorf("%w: depth %d: want 0 to %d", ErrInvalidArgument, depth, MaxPathDepth)
	}
	if limit < 1 {
		return fmt.Errorf("%w: limit %d: want at least 1", ErrInvalidArgument, limit)
	}
	return nil
}

// Depth returns how many segments p lies below root, and false when p is
// neither root nor below it. Both must be valid paths.
func Depth(root, p string) (int, bool) {
	if p == root {
		return 0, true
	}
	rest := p
	if root != "/" {
		var ok bool
		if rest, ok = strings.CutPrefix(p, root); !ok || rest == "" || rest[0] != '/' {
			return 0, false
		}
	}
	return strings.Count(rest, "/"), true
}

// FollowTree reads the subtree at path and follows its changes, as
// [TreeFollower.FollowTree] does, with st's TreeFollower. A store without
// one (or a ZooKeeper server older than 3.6, whose adapter says so with an
// error wrapping errors.ErrUnsupported) is followed with one-shot watches
// instead: a watch on the data of every node (WatchNode; ExistsW on path
// itself, for its creation) and one on the children of every node above
// depth, each set again once it fires, with two goroutines per node.
// There a change is found by reading the node again, the follow keeps
// every node's Stat and ends with ErrTooLarge past limit nodes, and Sync
// reads the whole subtree again. A nil st fails with ErrInvalidArgument.
func FollowTree(ctx context.Context, st Store, path string, depth, limit int) (TreeFollow, []Node, error) {
	if st == nil {
		return nil, nil, fmt.Errorf("store: follow %q: %w: nil store", path, ErrInvalidArgument)
	}
	if err := ValidateTree(path, depth, limit); err != nil {
		return nil, nil, err
	}
	if tf, ok := Find[TreeFollower](st); ok {
		f, nodes, err := tf.FollowTree(ctx, path, depth, limit)
		if !errors.Is(err, errors.ErrUnsupported) {
			return f, nodes, err
		}
	}
	return watchTree(ctx, st, path, depth, limit)
}
