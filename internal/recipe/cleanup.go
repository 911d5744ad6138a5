package recipe

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

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
// A session has a cleaner while it has pending nodes: it is made by the
// first hand-over and its goroutine ends, and forgets it, when none is left
// or the session ends.

// cleaners maps a store.Store to its *cleaner.
var cleaners gosync.Map

type cleaner struct {
	st store.Store

	mu      gosync.Mutex
	pending map[string]*pendingNode
	dead    bool // run has ended: make a new cleaner
}

type pendingNode struct {
	done  chan struct{} // closed once the node is gone, or the session
	owner int64         // delete only while the node's Owner is this; 0: whoever owns it
}

// handOver hands the node at path to st's cleaner and returns a channel
// that is closed once it is gone (or the session has ended). A non-zero
// owner makes the cleaner delete the node only while its Owner is owner.
func handOver(st store.Store, path string, owner int64) <-chan struct{} {
	for {
		c, loaded := cleaners.LoadOrStore(st, &cleaner{st: st, pending: map[string]*pendingNode{}})
		cl := c.(*cleaner)
		done, ok := cl.add(path, owner)
		if !loaded {
			go cl.run()
		}
		if ok {
			return done
		}
	}
}

// add adds the node at path, unless the cleaner has ended.
func (c *cleaner) add(path string, owner int64) (<-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return nil, false
	}
	p, ok := c.pending[path]
	if !ok {
		p = &pendingNode{done: make(chan struct{}), owner: owner}
		c.pending[path] = p
	}
	return p.done, true
}

// owner returns the owner condition of the pending node at path.
func (c *cleaner) owner(path string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pending[path]; ok {
		return p.owner
	}
	return 0
}

// finish marks the node at path gone.
func (c *cleaner) finish(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pending[path]; ok {
		close(p.done)
		delete(c.pending, path)
	}
}

// paths returns the pending paths, those in dir only when dir is not "".
func (c *cleaner) paths(dir string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []string
	for p := range c.pending {
		if dir == "" || store.Parent(p) == dir {
			ps = append(ps, p)
		}
	}
	return ps
}

// run deletes the pending nodes until there are none left or the session
// ends.
func (c *cleaner) run() {
	sctx := c.st.Context()
	for attempt := 0; ; {
		for _, p := range c.paths("") {
			switch err := deleteOnce(sctx, c.st, p, c.owner(p)); {
			case err == nil:
				c.finish(p)
			case errors.Is(err, store.ErrDisconnected):
				// Try again once the connection is back.
			default:
				// Nothing more can be done for it (the session
				// ended, say, or the store refuses): stop trying.
				c.finish(p)
			}
		}
		c.mu.Lock()
		if len(c.pending) == 0 || sctx.Err() != nil {
			for p, n := range c.pending {
				close(n.done)
				delete(c.pending, p)
			}
			c.dead = true
			cleaners.CompareAndDelete(c.st, c)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if pause(sctx, c.st, attempt) != nil {
			attempt = 0 // the session ended: the loop above finishes
			continue
		}
		attempt++
	}
}

// deleteOnce deletes the node at path once, on ctx. A node already gone, or
// a session that ended (taking its ephemeral nodes with it), counts as
// deleted; so does, when owner is not 0, a node at path owned by another
// (the name was used again once the node was gone).
func deleteOnce(ctx context.Context, st store.Store, path string, owner int64) error {
	err := deleteOwned(ctx, st, path, owner)
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
	c, ok := cleaners.Load(st)
	if !ok {
		return nil
	}
	cl := c.(*cleaner)
	for _, p := range cl.paths(dir) {
		owner := cl.owner(p)
		_, err := retry(ctx, st, func() (struct{}, error) { return struct{}{}, deleteOnce(ctx, st, p, owner) })
		if err != nil {
			return fmt.Errorf("remove abandoned node %q: %w", p, err)
		}
		cl.finish(p)
	}
	return nil
}

// Pending returns a channel that is closed once no removal of the node at
// path by this session is pending; it is closed already when there is none.
func Pending(st store.Store, path string) <-chan struct{} {
	if c, ok := cleaners.Load(st); ok {
		cl := c.(*cleaner)
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if p, ok := cl.pending[path]; ok {
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

// Remove deletes the node at path, a contender or hold of this session. It
// tries until the node is gone, ctx ends, or the session ends (which takes
// the node with it); once ctx has ended it still tries for CleanupGrace.
// When the node is still there then, it is handed to the session's cleaner,
// which deletes it as soon as the connection allows while the session
// lives, and Remove returns an error wrapping ErrRemovalPending and
// store.ErrDisconnected. A node already gone counts as removed.
func Remove(ctx context.Context, st store.Store, path string) error {
	_, err := remove(ctx, st, path, 0)
	return err
}

// RemoveOwned is Remove for a node whose name is used again once it is
// gone (a queue's claim, named after the item it claims): it deletes the
// node at path only while its Owner is owner (the session's ID for an
// ephemeral node), now and when the cleaner retries, and counts a node
// owned by another as removed. The check and the delete are two requests,
// so the node must be one that nobody else deletes while owner owns it.
func RemoveOwned(ctx context.Context, st store.Store, path string, owner int64) error {
	_, err := remove(ctx, st, path, owner)
	return err
}

// RemoveLater hands the node at path to the session's cleaner without
// trying to delete it first, for a caller whose own attempt just failed
// with a lost connection (or ran out of time): the cleaner deletes it as
// soon as the connection allows, while the session lives, only while its
// Owner is owner when owner is not 0 (see RemoveOwned).
func RemoveLater(st store.Store, path string, owner int64) {
	handOver(st, path, owner)
}

// deleteOwned deletes the node at path, only while its Owner is owner
// when owner is not 0; a node owned by another counts as gone (ErrNoNode).
func deleteOwned(ctx context.Context, st store.Store, path string, owner int64) error {
	if owner != 0 {
		n, err := st.Get(ctx, path)
		if err != nil {
			return err
		}
		if n.Owner != owner {
			return fmt.Errorf("%q belongs to %#x, not %#x: %w", path, n.Owner, owner, store.ErrNoNode)
		}
	}
	return st.Delete(ctx, path)
}

// remove is Remove that also reports whether the node was found gone on the
// first try (a retry after a lost connection may find the node its own
// earlier attempt deleted).
func remove(ctx context.Context, st store.Store, path string, owner int64) (gone bool, err error) {
	rctx, cancel := GraceContext(ctx)
	defer cancel()
	first := true
	_, err = retry(rctx, st, func() (struct{}, error) {
		err := deleteOwned(rctx, st, path, owner)
		gone = first && errors.Is(err, store.ErrNoNode)
		first = false
		return struct{}{}, err
	})
	switch {
	case err == nil, errors.Is(err, store.ErrNoNode),
		errors.Is(err, store.ErrSessionExpired), errors.Is(err, store.ErrClosed):
		if c, ok := cleaners.Load(st); ok {
			c.(*cleaner).finish(path) // removed by an earlier hand-over's owner
		}
		return gone, nil
	case errors.Is(err, store.ErrDisconnected), rctx.Err() != nil:
		handOver(st, path, owner)
		return gone, fmt.Errorf("remove %q: %w (%w: %w)", path, ErrRemovalPending, store.ErrDisconnected, err)
	}
	return gone, fmt.Errorf("remove %q: %w", path, err)
}

// GraceContext returns a context that is not cancelled with ctx but ends
// CleanupGrace after ctx ends (at once when ctx has ended already, plus the
// grace).
func GraceContext(ctx context.Context) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if ctx.Err() != nil {
		t := time.AfterFunc(CleanupGrace, cancel)
		return gctx, func() { t.Stop(); cancel() }
	}
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(CleanupGrace, cancel)
		context.AfterFunc(gctx, func() { t.Stop() })
	})
	return gctx, func() { stop(); cancel() }
}
