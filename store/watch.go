package store

import (
	"context"
	"fmt"
)

// NodeWatcher is the optional watch on a node that exists, found by
// [WatchNode]. Waiting for a node to go needs a watch only while it is
// there: on ZooKeeper an ExistsW on a missing node asks the server for the
// node's creation, a watch the server keeps (and the client with it) until
// a node is made at that name, which for a sequential node's name never
// happens. NodeW sets no watch on a missing node, as ZooKeeper's getData
// does (Curator's recipes wait with it for this reason), so every watch it
// sets fires at the latest when the node it watches goes.
type NodeWatcher interface {
	// NodeW returns the Stat of the node at path and a one-shot channel
	// that delivers its next data change (EventDataChanged) or its
	// deletion (EventDeleted). It follows the rules of ExistsW: exactly
	// one event, then closed; Err set when the watch can no longer fire;
	// no gap between the check and the watch. ErrNoNode, with no watch,
	// when path does not exist.
	NodeW(ctx context.Context, path string) (Stat, <-chan Event, error)
}

// WatchNode returns the Stat of the node at path and a one-shot watch of
// its next data change or deletion, as [NodeWatcher.NodeW] does, or an
// error wrapping ErrNoNode, and no watch, when path does not exist. It uses
// st's NodeWatcher; a store without one is asked with ExistsW, whose watch
// on a missing node is given up at once (its ctx is cancelled), although
// the backend may keep it until a node is made at path. Every adapter of
// this module is a NodeWatcher.
func WatchNode(ctx context.Context, st Store, path string) (Stat, <-chan Event, error) {
	if st == nil {
		return Stat{}, nil, fmt.Errorf("store: watch %q: %w: nil store", ShortPath(path), ErrInvalidArgument)
	}
	if nw, ok := Find[NodeWatcher](st); ok {
		return nw.NodeW(ctx, path)
	}
	wctx, stop := context.WithCancel(ctx)
	exists, stat, ev, err := st.ExistsW(wctx, path)
	if err != nil || !exists {
		stop()
		if err == nil {
			err = fmt.Errorf("store: watch %q: %w", ShortPath(path), ErrNoNode)
		}
		return Stat{}, nil, err
	}
	// The watch ends, and stop is called, once its one event is out: at
	// the latest when ctx ends (see ExistsW).
	out := make(chan Event, 1)
	go func() {
		defer stop()
		defer close(out)
		out <- <-ev
	}()
	return stat, out, nil
}
