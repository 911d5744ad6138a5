package recipe

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// CleanupGrace is how long a call whose ctx has ended still tries to remove
// its own node (a contender it gave up, a lock it releases) before it hands
// the node to its session's cleaner and returns. On a working connection a
// removal takes one round trip, so a cancelled Lock or an Unlock with a
// cancelled ctx still removes its node before it returns.
const CleanupGrace = time.Second

// A node the recipes mean to delete is never forgotten while its session
// lives. Remove deletes it at once when it can; when the connection is down
// (or slower than ctx and CleanupGrace allow) it hands the node to the
// session's cleaner, which deletes it as soon as the connection allows, for
// as long as the session lives (the session's end takes ephemeral nodes
// with it). A session that is about to contend again in a directory first
// removes its own pending nodes there ([Flush]), so it never waits behind, or
// is refused by, a node it gave up itself.
//
// A session has a cleaner (in its Engine) while it has pending nodes: it is
// made by the first hand-over and its goroutine ends, and the Engine
// forgets it, when none is left or the session ends.

type cleaner struct {
	st  store.Store
	eng *Engine

	mu      gosync.Mutex
	pending map[nodeKey]*pendingNode
	dead    bool // run has ended: make a new cleaner
}

// nodeID is a node's identity: its path and its Seq (see store's Identity),
// and, for a node whose name others use again once it is gone (a queue's
// claim), the Owner it must still have to be deleted.
type nodeID struct {
	path  string
	seq   int64
	owner int64 // 0: whoever owns it
	front bool  // an exclusive hold's node: see HoldOptions.Front
}

// nodeKey is what tells pending nodes apart: path and Seq.
type nodeKey struct {
	path string
	seq  int64
}

func (id nodeID) key() nodeKey { return nodeKey{id.path, id.seq} }

type pendingNode struct {
	id   nodeID
	done chan struct{}       // closed once the node is gone, or the session
	rec  *telemetry.Recorder // of the primitive that handed it over, or nil
}

// handOver hands the node id to st's cleaner and returns a channel that is
// closed once it is gone (or the session has ended).
func handOver(st store.Store, id nodeID, rec *telemetry.Recorder) <-chan struct{} {
	e := Of(st)
	for {
		cl, started := e.cleanerFor(st)
		done, ok := cl.add(id, rec)
		if started {
			go cl.run()
		}
		if ok {
			return done
		}
	}
}

// add adds the node id, unless the cleaner has ended.
func (c *cleaner) add(id nodeID, rec *telemetry.Recorder) (<-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return nil, false
	}
	p, ok := c.pending[id.key()]
	if !ok {
		p = &pendingNode{id: id, done: make(chan struct{}), rec: rec}
		c.pending[id.key()] = p
	}
	return p.done, true
}

// finish marks the node id gone; err says why it is no longer pending when
// it was not deleted.
func (c *cleaner) finish(id nodeID, err error) {
	c.mu.Lock()
	p, ok := c.pending[id.key()]
	if ok {
		close(p.done)
		delete(c.pending, id.key())
	}
	c.mu.Unlock()
	if ok {
		p.rec.CleanupDone(id.path, err)
	}
}

// nodes returns the pending nodes, those in dir only when dir is not "".
func (c *cleaner) nodes(dir string) []nodeID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []nodeID
	for _, p := range c.pending {
		if dir == "" || store.Parent(p.id.path) == dir {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// run deletes the pending nodes until there are none left or the session
// ends.
func (c *cleaner) run() {
	sctx := c.st.Context()
	for attempt := 0; ; {
		for _, p := range c.nodes("") {
			switch err := deleteOnce(sctx, c.st, p); {
			case err == nil:
				c.finish(p, nil)
			case errors.Is(err, store.ErrDisconnected):
				// Try again once the connection is back.
			default:
				// Nothing more can be done for it (the session
				// ended, say, or the store refuses): stop trying.
				c.finish(p, err)
			}
		}
		c.mu.Lock()
		if len(c.pending) == 0 || sctx.Err() != nil {
			for p, n := range c.pending {
				close(n.done)
				delete(c.pending, p)
			}
			c.dead = true
			c.eng.dropCleaner(c)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if Pause(sctx, c.st, attempt) != nil {
			attempt = 0 // the session ended: the loop above finishes
			continue
		}
		attempt++
	}
}

// deleteOnce deletes the node id once, on ctx. A node already gone, or a
// session that ended (taking its ephemeral nodes with it), counts as
// deleted.
func deleteOnce(ctx context.Context, st store.Store, id nodeID) error {
	err := deleteNode(ctx, st, id)
	switch {
	case err == nil, errors.Is(err, store.ErrNoNode),
		errors.Is(err, store.ErrSessionExpired), errors.Is(err, store.ErrClosed):
		return nil
	}
	return err
}

// Flush deletes this session's pending nodes in dir (see Remove), retrying
// across a lost connection, and returns once none is left, or with ctx's
// error or the session's end. Recipes call it before contending in dir.
func Flush(ctx context.Context, st store.Store, dir string) error {
	cl := Of(st).pending()
	if cl == nil {
		return nil
	}
	for _, p := range cl.nodes(dir) {
		_, err := Retry(ctx, st, func() (struct{}, error) { return struct{}{}, deleteOnce(ctx, st, p) })
		if err != nil {
			return fmt.Errorf("remove abandoned node %q: %w", store.ShortPath(p.path), err)
		}
		cl.finish(p, nil)
	}
	return nil
}

// Pending returns a channel that is closed once no removal of the node n by
// this session is pending; it is closed already when there is none.
func Pending(st store.Store, n store.Node) <-chan struct{} {
	if cl := Of(st).pending(); cl != nil {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if p, ok := cl.pending[nodeKey{n.Path, n.Seq}]; ok {
			return p.done
		}
	}
	return closedChan
}

var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// ErrRemovalPending is wrapped, with store.ErrDisconnected, by the error of
// a removal that could not finish: the node is still there, and the
// session's cleaner deletes it as soon as the connection allows.
var ErrRemovalPending = errors.New("node will be removed as soon as the connection allows")

// Remove deletes the node n, a contender or hold of this session, and logs
// its retries and a hand-over to the session's cleaner to rec, the
// recorder of the primitive it removes for (nil: none). It tries
// until the node is gone, ctx ends, or the session ends (which takes the
// node with it); once ctx has ended it still tries for CleanupGrace. When
// the node is still there then, it is handed to the session's cleaner,
// which deletes it as soon as the connection allows while the session
// lives, and Remove returns an error wrapping ErrRemovalPending and
// store.ErrDisconnected. A node already gone counts as removed.
//
// Only n.Path and n.Seq matter. Where the store can (store.SeqDeleter),
// every delete is of the node with that Seq, so that a delete that comes
// late never removes another node made at the same path since: a store may
// use the name again (etcdstore does).
func Remove(ctx context.Context, st store.Store, rec *telemetry.Recorder, n store.Node) error {
	_, err := remove(ctx, st, rec, nodeID{path: n.Path, seq: n.Seq})
	return err
}

// RemoveOwned is Remove for a node whose name is used again once it is
// gone (a queue's claim, named after the item it claims): it deletes the
// node at path only while its Owner is owner (the session's ID for an
// ephemeral node), now and when the cleaner retries, and counts a node
// owned by another as removed. The check and the delete are two requests,
// so the node must be one that nobody else deletes while owner owns it.
func RemoveOwned(ctx context.Context, st store.Store, rec *telemetry.Recorder, path string, owner int64) error {
	_, err := remove(ctx, st, rec, nodeID{path: path, owner: owner})
	return err
}

// RemoveLater hands the node at path to the session's cleaner without
// trying to delete it first, for a caller whose own attempt just failed
// with a lost connection (or ran out of time): the cleaner deletes it as
// soon as the connection allows, while the session lives, only while its
// Owner is owner when owner is not 0 (see RemoveOwned).
func RemoveLater(st store.Store, path string, owner int64) {
	handOver(st, nodeID{path: path, owner: owner}, nil)
}

// deleteNode deletes the node id: by its Seq where the store can, else
// the node at its path, only while its Owner is id.owner when that is set
// (a node owned by another counts as gone: ErrNoNode).
func deleteNode(ctx context.Context, st store.Store, id nodeID) error {
	if fd, ok := store.Find[store.FrontDeleter](st); ok && id.front && id.seq != 0 {
		return fd.DeleteFront(ctx, id.path, id.seq)
	}
	if sd, ok := store.Find[store.SeqDeleter](st); ok && id.seq != 0 {
		return sd.DeleteSeq(ctx, id.path, id.seq)
	}
	if id.owner != 0 {
		n, err := st.Get(ctx, id.path)
		if err != nil {
			return err
		}
		if n.Owner != id.owner {
			return fmt.Errorf("%q belongs to %#x, not %#x: %w", store.ShortPath(id.path), n.Owner, id.owner, store.ErrNoNode)
		}
	}
	return st.Delete(ctx, id.path)
}

// remove is Remove that also reports whether the node was found gone on the
// first try (a retry after a lost connection may find the node its own
// earlier attempt deleted): deleted by another, or with its session, when
// the first try is where the client learns that the session has expired.
func remove(ctx context.Context, st store.Store, rec *telemetry.Recorder, id nodeID) (gone bool, err error) {
	path := id.path
	rctx := ctx
	var grace context.Context // made once needed; rctx from then on
	attempt := 0
	var last error
	try := func() (struct{}, error) {
		if attempt > 0 {
			rec.CleanupRetried(rctx, path, attempt, last)
		}
		err := deleteNode(rctx, st, id)
		gone = attempt == 0 && (errors.Is(err, store.ErrNoNode) || errors.Is(err, store.ErrSessionExpired))
		attempt++
		last = err
		return struct{}{}, err
	}
	// Most removals are one request, which ctx outlives: it goes on ctx
	// itself, with no grace context (a context, a registration in ctx
	// and three functions, most of what a release allocates besides its
	// request). What follows goes within the grace: the retries after a
	// lost connection, and a request that ctx's end cut short, sent again
	// at once (it may have been applied: a node then found gone is its
	// own doing, not another's).
	tries := 0
	if ctx.Err() == nil {
		_, err = try()
		switch cut := ctx.Err() != nil && errors.Is(err, ctx.Err()); {
		case cut:
		case errors.Is(err, store.ErrDisconnected):
			tries = 1
		default:
			tries = -1 // done
		}
	}
	if tries >= 0 {
		var cancel context.CancelFunc
		grace, cancel = GraceContext(ctx)
		defer cancel()
		rctx = grace
		_, err = retry(rctx, st, tries, try)
	}
	switch {
	case err == nil, errors.Is(err, store.ErrNoNode),
		errors.Is(err, store.ErrSessionExpired), errors.Is(err, store.ErrClosed):
		if cl := Of(st).pending(); cl != nil {
			cl.finish(id, nil) // removed by an earlier hand-over's owner
		}
		return gone, nil
	case errors.Is(err, store.ErrDisconnected), grace != nil && grace.Err() != nil:
		rec.CleanupHandedOver(rctx, path, err)
		handOver(st, id, rec)
		return gone, fmt.Errorf("remove %q: %w (%w: %w)", store.ShortPath(path), ErrRemovalPending, store.ErrDisconnected, err)
	}
	return gone, fmt.Errorf("remove %q: %w", store.ShortPath(path), err)
}

// GraceContext returns a context that is not cancelled with ctx but ends
// CleanupGrace after ctx ends. When ctx has ended already, the grace counts
// from its deadline if it passed it (the store may have spent part of the
// grace already, undoing the call ctx ended: zkstore waits up to UndoWait),
// and from now otherwise.
func GraceContext(ctx context.Context) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if ctx.Err() != nil {
		grace := CleanupGrace
		if d, ok := ctx.Deadline(); ok && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			grace = max(0, time.Until(d.Add(CleanupGrace)))
		}
		t := time.AfterFunc(grace, cancel)
		return gctx, func() { t.Stop(); cancel() }
	}
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(CleanupGrace, cancel)
		context.AfterFunc(gctx, func() { t.Stop() })
	})
	return gctx, func() { stop(); cancel() }
}
