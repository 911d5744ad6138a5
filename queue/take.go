package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	gosync "sync"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// take takes the next item, waiting for one when wait is set; without wait
// it returns nil, nil when there is none.
func (q *Queue) take(ctx context.Context, wait bool) (*Item, error) {
	for attempt := 0; ; {
		cfg, err := q.settings(ctx, useTake)
		var v view
		var it *Item
		if err == nil {
			v = q.view(cfg.delivery == AtLeastOnce)
			it, err = q.next(ctx, v, cfg)
		}
		if err == nil && it != nil {
			return it, nil
		}
		if err == nil && !wait {
			return nil, nil
		}
		if err == nil {
			err = v.wait(ctx)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			attempt = 0
			continue
		}
		if !wait || !errors.Is(err, store.ErrDisconnected) {
			return nil, err
		}
		if err := recipe.Pause(ctx, q.st, attempt); err != nil {
			return nil, err
		}
		attempt++
	}
}

// next brings the view up to date and tries the items at the head of the
// queue until it takes one; nil when there is none left.
func (q *Queue) next(ctx context.Context, v view, cfg config) (*Item, error) {
	if err := v.refresh(ctx); err != nil {
		return nil, err
	}
	lost := 0
	for {
		head := v.head(max(int(q.spread.Load()), 1))
		if len(head) == 0 {
			if changed, err := v.check(ctx); err != nil || changed {
				if err != nil {
					return nil, err
				}
				continue
			}
			q.adapt(lost)
			return nil, nil
		}
		// On a lost race move on within what we know rather than listing
		// again: see "Waiting and contention".
		e := head[rand.IntN(len(head))]
		var it *Item
		var moved bool
		var err error
		if cfg.delivery == AtLeastOnce {
			it, moved, err = q.claim(ctx, v, cfg, e)
		} else {
			it, err = q.remove(ctx, v, e)
		}
		switch {
		case errors.Is(err, errRelisted):
			// The view was listed anew: pick again.
		case err != nil:
			return nil, err
		case it != nil:
			q.adapt(lost)
			q.taken.Add(1)
			return it, nil
		case !moved:
			lost++
			q.wasted.Add(1)
		}
	}
}

// errRelisted says that a take's check found the queue changed and listed
// it again: the take picks again.
var errRelisted = errors.New("queue: listed again")

// readChecked reads the node at p beside the view's check (see
// view.check), and fails with errRelisted when the check listed the queue
// anew.
func readChecked(ctx context.Context, st store.Store, v view, p string) (store.Node, error) {
	var changed bool
	var cerr error
	var wg gosync.WaitGroup
	wg.Go(func() { changed, cerr = v.check(ctx) })
	n, err := st.Get(ctx, p)
	wg.Wait()
	switch {
	case cerr != nil:
		return store.Node{}, cerr
	case changed:
		return store.Node{}, errRelisted
	}
	return n, err
}

// maxSpread bounds how many items at the head of the queue a take spreads
// its attempts over.
const maxSpread = 16

// adapt widens the spread after a take that lost races and narrows it after
// one that did not.
func (q *Queue) adapt(lost int) {
	for {
		old := q.spread.Load()
		n := max(old-1, 1)
		if lost > 0 {
			n = min(max(old, 1)*2, maxSpread)
		}
		if q.spread.CompareAndSwap(old, n) {
			return
		}
	}
}

// remove takes the item e at-most-once: deletes it and returns what it held.
// It returns nil, nil when another consumer took it first.
func (q *Queue) remove(ctx context.Context, v view, e names.Entry) (*Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := store.Join(q.items, e.Name)
	// The delete is the commit point: once begun it runs to completion, so
	// that its outcome is known, within a grace after ctx's end.
	gctx, cancel := recipe.GraceContext(ctx)
	defer cancel()
	var n store.Node
	var err error
	if gd, ok := store.Find[store.GetDeleter](q.st); ok && v.exact() {
		n, err = gd.GetDelete(gctx, p)
	} else if n, err = readChecked(ctx, q.st, v, p); err == nil {
		if err = ctx.Err(); err == nil {
			err = q.st.Delete(gctx, p)
		}
	}
	if errors.Is(err, store.ErrNoNode) {
		v.gone(e)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v.gone(e)
	return q.newItem(e, n.Data, e.Count+1), nil
}

// claim takes the item e at-least-once: claims it, reads it and records
// the delivery. It returns nil when another consumer holds the item or took
// it first, with moved set when the item went to the dead-letter queue.
//
// On an exact view (one that follows the queue) it claims first and reads
// after. On a listing it reads first, beside the view's check: a listing
// goes stale as others ack its items, and a claim of an item that is gone
// costs a write and its undo, and looks like a released claim to every
// consumer (see listView.changed). It then claims with the item as the
// claim's guard when the store can (store.GuardedCreator), so that a claim
// is never made on an item acked since the read; without one it reads the
// item again after the claim.
func (q *Queue) claim(ctx context.Context, v view, cfg config, e names.Entry) (it *Item, moved bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	// A claim of ours still being released would refuse us the item.
	if err := recipe.Flush(ctx, q.st, q.claims); err != nil {
		return nil, false, err
	}
	itemPath, countPath := store.Join(q.items, e.Name), store.Join(q.counts, e.ID)
	_, guarded := store.Find[store.GuardedCreator](q.st)
	guarded = guarded && !v.exact()
	var n, cnt store.Node
	var cerr error
	read := func(ctx context.Context, withCheck bool) error {
		var changed bool
		var kerr, nerr error
		var wg gosync.WaitGroup
		if withCheck {
			wg.Go(func() { changed, kerr = v.check(ctx) })
		}
		wg.Go(func() { cnt, cerr = q.st.Get(ctx, countPath) })
		n, nerr = q.st.Get(ctx, itemPath)
		wg.Wait()
		switch {
		case kerr != nil:
			return kerr
		case changed:
			return errRelisted
		case nerr != nil:
			return nerr
		case cerr != nil && !errors.Is(cerr, store.ErrNoNode):
			return cerr
		}
		return nil
	}
	if !v.exact() {
		if err := read(ctx, true); errors.Is(err, store.ErrNoNode) {
			v.gone(e)
			return nil, false, nil
		} else if err != nil {
			return nil, false, err
		}
	}
	gctx, cancel := recipe.GraceContext(ctx)
	defer cancel()
	guard := ""
	if guarded {
		guard = itemPath
	}
	c, err := q.newClaim(gctx, cfg, e.ID, guard)
	switch {
	case errors.Is(err, store.ErrNodeExists):
		v.claimed(e.ID)
		return nil, false, nil
	case guarded && errors.Is(err, store.ErrNoNode):
		v.gone(e) // acked since the read
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	v.claimed(e.ID) // ours, until released
	// The claim is the commit point: what follows runs to completion.
	if !guarded {
		if err := read(gctx, false); err != nil {
			c.release(ctx)
			if errors.Is(err, store.ErrNoNode) {
				v.gone(e) // acked since we learned of it
				return nil, false, nil
			}
			return nil, false, err
		}
	}
	prev, prevVersion := 0, int64(-1)
	if cerr == nil {
		prev, prevVersion = parseCount(cnt.Data), cnt.Version
	}
	if cfg.deadLetter != "" && prev >= cfg.maxDeliveries {
		err := q.deadLetter(gctx, cfg, e, n.Data)
		c.release(ctx)
		if err != nil {
			return nil, false, err
		}
		v.gone(e)
		return nil, true, nil
	}
	prev, prevVersion, ver, err := q.countDelivery(gctx, e.ID, prev, prevVersion)
	if err != nil {
		c.release(ctx)
		return nil, false, err
	}
	it = q.newItem(e, n.Data, prev+1)
	it.claimed(c, prevVersion, ver)
	return it, false, nil
}

// countDelivery records one more delivery of the item id over the count
// prev read at version prevVersion (-1: no count node), and returns the
// count and version it wrote over and the new version. A count read
// before the claim may have moved since (another consumer's delivery in
// between): it is read again.
func (q *Queue) countDelivery(ctx context.Context, id string, prev int, prevVersion int64) (int, int64, int64, error) {
	for attempt := 0; ; attempt++ {
		ver, err := q.setCount(ctx, id, prev+1, prevVersion)
		if err == nil || attempt > 0 || !errors.Is(err, store.ErrBadVersion) && !errors.Is(err, store.ErrNodeExists) {
			return prev, prevVersion, ver, err
		}
		c, err := q.st.Get(ctx, store.Join(q.counts, id))
		switch {
		case err == nil:
			prev, prevVersion = parseCount(c.Data), c.Version
		case errors.Is(err, store.ErrNoNode):
			prev, prevVersion = 0, -1
		default:
			return prev, prevVersion, 0, err
		}
	}
}

func parseCount(data []byte) int {
	n, err := strconv.Atoi(string(data))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// setCount records count deliveries of the item id over the count node of
// version prev (-1: there is none) and returns the node's new version.
func (q *Queue) setCount(ctx context.Context, id string, count int, prev int64) (int64, error) {
	p := store.Join(q.counts, id)
	data := []byte(strconv.Itoa(count))
	if prev < 0 {
		n, err := q.st.Create(ctx, p, data, store.Persistent)
		return n.Version, err
	}
	n, err := q.st.Set(ctx, p, data, prev)
	return n.Version, err
}

// deadLetter moves the item e, holding data, to the dead-letter queue: it
// puts it there, with its id, then deletes it and its count here.
func (q *Queue) deadLetter(ctx context.Context, cfg config, e names.Entry, data []byte) error {
	// The path comes from the stored settings, which any client may
	// have written.
	dlq := New(q.st, cfg.deadLetter)
	if dlq.bad != nil {
		return fmt.Errorf("dead-letter queue: %w", dlq.bad)
	}
	if _, err := dlq.settings(ctx, useRead); err != nil {
		return fmt.Errorf("dead-letter queue %q: %w", store.ShortPath(dlq.path), err)
	}
	if err := dlq.create(ctx, dlq.items, names.ItemName(e.Prio, e.ID), data, e.ID); err != nil {
		return fmt.Errorf("dead-letter queue %q: %w", store.ShortPath(dlq.path), err)
	}
	if cfg.delivery == AtMostOnce {
		return nil // the item is no longer here
	}
	if err := q.st.Delete(ctx, store.Join(q.items, e.Name)); err != nil && !errors.Is(err, store.ErrNoNode) {
		return err
	}
	_ = recipe.Remove(ctx, q.st, q.rec, store.Node{Path: store.Join(q.counts, e.ID)})
	return nil
}

// create creates the item named name (a prefix the store completes) in dir,
// exactly once: after a lost connection it looks for the item's id among
// the children of dir, and creates it again only when it is not there.
func (q *Queue) create(ctx context.Context, dir, name string, data []byte, id string) error {
	return q.retryCreate(ctx, dir, name, id, func() error {
		_, err := q.st.Create(ctx, store.Join(dir, name), data, store.Sequential)
		return err
	})
}

// retryCreate runs create, which makes the sequential node named name (and
// perhaps others with it, all or none) holding the item id under dir, and
// runs it again after a lost connection unless the node is found made.
// The queue's directories are made first (keepDirs).
func (q *Queue) retryCreate(ctx context.Context, dir, name, id string, create func() error) error {
	if err := q.keepDirs(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := create()
		if err == nil || !errors.Is(err, store.ErrDisconnected) || ctx.Err() != nil {
			return err
		}
		for {
			if err := recipe.Pause(ctx, q.st, attempt); err != nil {
				return err
			}
			attempt++
			kids, err := q.st.Children(ctx, dir)
			if errors.Is(err, store.ErrDisconnected) {
				continue
			}
			if err != nil && !errors.Is(err, store.ErrNoNode) {
				return err
			}
			if hasID(kids, name, id) {
				return nil
			}
			break
		}
	}
}

// putBack adds the item again in its old place, delivered count times.
func (q *Queue) putBack(ctx context.Context, it *Item, count int) error {
	e := it.e
	return q.create(ctx, q.items, names.ReturnName(e.Prio, e.Order, e.ID, count), it.Data, e.ID)
}

// peek reads the item at the head of the queue.
func (q *Queue) peek(ctx context.Context) (*Item, error) {
	cfg, err := q.settings(ctx, useRead)
	if err != nil {
		return nil, err
	}
	v := q.view(cfg.delivery == AtLeastOnce)
	if err := v.refresh(ctx); err != nil {
		return nil, err
	}
	if _, err := v.check(ctx); err != nil {
		return nil, err
	}
	for {
		head := v.head(1)
		if len(head) == 0 {
			return nil, nil
		}
		e := head[0]
		if cfg.delivery == AtLeastOnce {
			// A view that lists learns of others' claims only by
			// trying them.
			_, err := q.st.Get(ctx, store.Join(q.claims, e.ID))
			if err == nil {
				v.claimed(e.ID)
				continue
			}
			if !errors.Is(err, store.ErrNoNode) {
				return nil, err
			}
		}
		n, err := q.st.Get(ctx, store.Join(q.items, e.Name))
		if errors.Is(err, store.ErrNoNode) {
			v.gone(e)
			continue
		}
		if err != nil {
			return nil, err
		}
		count := e.Count
		if cfg.delivery == AtLeastOnce {
			c, err := q.st.Get(ctx, store.Join(q.counts, e.ID))
			switch {
			case err == nil:
				count = parseCount(c.Data)
			case !errors.Is(err, store.ErrNoNode):
				return nil, err
			}
		}
		it := q.newItem(e, n.Data, count)
		it.peeked = true
		return it, nil
	}
}

// keepDirs makes the queue's directories explicitly, once per Queue, before
// the first item goes in: the items are ordered by Seq, and a view counts
// the changes of the items and claims directories, all of which a
// directory made again would start anew (see Parents in store's doc); so
// they stay for the queue's life, with its settings, even when empty.
func (q *Queue) keepDirs(ctx context.Context) error {
	if q.dirsKept.Load() {
		return nil
	}
	for _, dir := range []string{q.items, q.claims, q.counts} {
		_, err := q.st.Create(ctx, dir, nil, store.Persistent)
		if err != nil && !errors.Is(err, store.ErrNodeExists) {
			return err
		}
	}
	q.dirsKept.Store(true)
	return nil
}
