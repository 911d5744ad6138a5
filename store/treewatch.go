package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/corral-go/corral/internal/backlog"
)

// The portable TreeFollow of FollowTree: one-shot watches on every node of
// the subtree, each set again by a read of its node once it fires. One
// goroutine (the loop) reads and keeps the state of every node; each
// watch has a goroutine of its own that hands its one event to the loop,
// so that the loop waits on one channel whatever the number of nodes.
//
// A node's data is watched with WatchNode, which sets no watch on a
// missing node: every such watch fires at the latest when its node goes.
// The root alone is watched with ExistsW, so that its creation is seen:
// one watch on a missing path, as ExistsW's doc allows. So the watches a
// follow holds stay within twice its nodes, plus one.

// watchedTree is the portable TreeFollow.
type watchedTree struct {
	st           Store
	root         string
	depth, limit int
	life         context.Context // of the watches: ends with Stop, the session or the follow
	cancel       context.CancelCauseFunc
	fired        chan firedWatch // from the watches' goroutines to the loop
	syncs        chan chan error // Sync's requests to the loop
	wg           sync.WaitGroup  // the loop and the watches' goroutines
	stop         sync.Once

	// The loop's (and, before the loop starts, the first read's).
	nodes    map[string]*Node // the nodes read, by path
	watching map[string]watchSet
	listing  bool // the first read: no changes are delivered

	mu      sync.Mutex
	changes backlog.Backlog[TreeChange]
}

// watchSet says which watches are set on a path and have not fired.
type watchSet uint8

const (
	dataWatched watchSet = 1 << iota // WatchNode, or the root's ExistsW
	kidsWatched                      // ChildrenW
)

// firedWatch is the one event of a watch on path.
type firedWatch struct {
	path string
	kind watchSet
	ev   Event
}

// watchTree is FollowTree on a store without a TreeFollower.
func watchTree(ctx context.Context, st Store, root string, depth, limit int) (TreeFollow, []Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: follow %q: %w", root, err)
	}
	life, cancel := context.WithCancelCause(st.Context())
	w := &watchedTree{
		st: st, root: root, depth: depth, limit: limit, life: life, cancel: cancel,
		fired: make(chan firedWatch), syncs: make(chan chan error),
		nodes: map[string]*Node{}, watching: map[string]watchSet{}, listing: true,
	}
	// The first read is bounded by ctx; the watches it sets live on.
	detach := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	err := w.walk(root, false)
	if !detach() || err != nil {
		if err == nil || life.Err() != nil {
			err = context.Cause(life)
		}
		w.Stop()
		return nil, nil, fmt.Errorf("store: follow %q: %w", root, err)
	}
	w.listing = false
	nodes := make([]Node, 0, len(w.nodes))
	for _, n := range w.nodes {
		nodes = append(nodes, clone(n))
	}
	slices.SortFunc(nodes, func(a, b Node) int { return strings.Compare(a.Path, b.Path) })
	w.wg.Go(w.loop)
	return w, nodes, nil
}

// loop handles the watches that fire and Sync's requests until the follow
// ends.
func (w *watchedTree) loop() {
	for {
		var (
			err   error
			reply chan error
		)
		select {
		case f := <-w.fired:
			err = w.handle(f)
		case reply = <-w.syncs:
			err = w.walk(w.root, true)
		case <-w.life.Done():
			w.end(context.Cause(w.life))
			return
		}
		if err != nil {
			w.end(err) // before the reply, so that Sync finds why
		}
		if reply != nil {
			reply <- err
		}
		if err != nil {
			return
		}
	}
}

// handle reads again what the watch f was set on.
func (w *watchedTree) handle(f firedWatch) error {
	if f.ev.Err != nil {
		if w.life.Err() != nil {
			return context.Cause(w.life)
		}
		// A watch that cannot fire any more (no leader, say) may have
		// missed a change: the caller must read anew.
		return f.ev.Err
	}
	w.unwatch(f.path, f.kind)
	if f.kind == kidsWatched {
		if _, known := w.nodes[f.path]; !known {
			return nil // gone: its own watch says so
		}
	}
	return w.walk(f.path, false)
}

// walk reads the node at p and, above depth, lists its children with a
// watch where none is set, and walks those it has not read (all of them,
// when all is set: Sync reads the whole subtree again).
func (w *watchedTree) walk(p string, all bool) error {
	exists, err := w.read(p)
	if err != nil || !exists {
		return err
	}
	if d, _ := Depth(w.root, p); d >= w.depth {
		return nil
	}
	var kids []Child
	switch {
	case w.watching[p]&kidsWatched == 0:
		var ch <-chan Event
		kids, ch, err = w.st.ChildrenW(w.life, p)
		if err == nil {
			w.watch(p, kidsWatched, ch)
		}
	case all:
		kids, err = w.st.Children(w.life, p)
	default:
		return nil
	}
	if errors.Is(err, ErrNoNode) {
		return nil // gone since: its data watch fires for it
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		c := Join(p, k.Name)
		if _, known := w.nodes[c]; known && !all {
			continue
		}
		if err := w.walk(c, all); err != nil {
			return err
		}
	}
	return nil
}

// read reads the node at p, with a watch on it where none is set, and
// records what it found.
func (w *watchedTree) read(p string) (bool, error) {
	if w.watching[p]&dataWatched == 0 {
		var (
			ch  <-chan Event
			err error
		)
		if p == w.root {
			_, _, ch, err = w.st.ExistsW(w.life, p)
		} else {
			_, ch, err = WatchNode(w.life, w.st, p)
		}
		switch {
		case errors.Is(err, ErrNoNode):
			return false, w.update(p, nil)
		case err != nil:
			return false, err
		}
		w.watch(p, dataWatched, ch)
	}
	n, err := w.st.Get(w.life, p)
	switch {
	case errors.Is(err, ErrNoNode):
		return false, w.update(p, nil)
	case err != nil:
		return false, err
	}
	return true, w.update(p, &n)
}

// watch hands the one event of ch, a watch of kind on p, to the loop.
func (w *watchedTree) watch(p string, kind watchSet, ch <-chan Event) {
	w.watching[p] |= kind
	w.wg.Go(func() {
		// A watch always delivers one event, Err at the latest when
		// life ends.
		ev := <-ch
		select {
		case w.fired <- firedWatch{path: p, kind: kind, ev: ev}:
		case <-w.life.Done():
		}
	})
}

// unwatch notes that the watch of kind on p fired.
func (w *watchedTree) unwatch(p string, kind watchSet) {
	if s := w.watching[p] &^ kind; s != 0 {
		w.watching[p] = s
	} else {
		delete(w.watching, p)
	}
}

// update records the node at p, nil when it is missing, and delivers the
// change from the node read before, if any.
func (w *watchedTree) update(p string, n *Node) error {
	old := w.nodes[p]
	switch {
	case n == nil && old == nil:
		return nil
	case n == nil:
		delete(w.nodes, p)
		return w.deliver(TreeChange{Type: EventDeleted, Node: Node{Path: p}})
	case old != nil && sameNode(old, n):
		return nil
	}
	w.nodes[p] = n
	if len(w.nodes) > w.limit {
		return fmt.Errorf("%w: more than %d nodes in %q", ErrTooLarge, w.limit, w.root)
	}
	t := EventCreated
	if old != nil && old.Seq == n.Seq && old.Created.Equal(n.Created) {
		t = EventDataChanged
	}
	return w.deliver(TreeChange{Type: t, Node: clone(n)})
}

// sameNode reports whether two reads of a path found the same state.
func sameNode(a, b *Node) bool {
	return a.Seq == b.Seq && a.Version == b.Version && a.Owner == b.Owner &&
		a.Created.Equal(b.Created) && bytes.Equal(a.Data, b.Data)
}

func clone(n *Node) Node {
	c := *n
	c.Data = bytes.Clone(n.Data)
	return c
}

// deliver queues c for Changes, unless the first read is under way.
func (w *watchedTree) deliver(c TreeChange) error {
	if w.listing {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changes.Len() >= MaxTreeBacklog {
		return fmt.Errorf("%w: more than %d changes not taken", ErrDisconnected, MaxTreeBacklog)
	}
	w.changes.Add(c)
	return nil
}

// end ends the follow with err, unless it has ended, and its watches.
func (w *watchedTree) end(err error) {
	w.mu.Lock()
	w.changes.End(fmt.Errorf("store: follow %q: %w", w.root, err))
	w.mu.Unlock()
	w.cancel(err)
}

func (w *watchedTree) Changes() ([]TreeChange, <-chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changes.Take()
}

// ended returns why the follow ended, or nil.
func (w *watchedTree) ended() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changes.Err()
}

// Sync reads the whole subtree again, on the loop, and delivers what
// changed.
func (w *watchedTree) Sync(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case w.syncs <- reply:
	case <-ctx.Done():
		return fmt.Errorf("store: sync %q: %w", w.root, ctx.Err())
	case <-w.life.Done():
		return w.endErr()
	}
	select {
	case err := <-reply:
		if err != nil {
			return w.endErr()
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store: sync %q: %w", w.root, ctx.Err())
	}
}

// endErr returns why the follow ended, once the loop has said so.
func (w *watchedTree) endErr() error {
	if err := w.ended(); err != nil {
		return err
	}
	return fmt.Errorf("store: follow %q: %w", w.root, context.Cause(w.life))
}

func (w *watchedTree) Stop() {
	w.stop.Do(func() {
		w.end(fmt.Errorf("follow stopped: %w", ErrClosed))
	})
	w.wg.Wait()
}
