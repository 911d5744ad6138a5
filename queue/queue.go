// Package queue is a distributed FIFO and priority queue over a
// [store.Store]: producers Put items, consumers Take them one at a time or
// receive them from a channel, and nothing a Put acknowledged is lost.
//
// # Layout
//
// A Queue at path p keeps its items as persistent sequential nodes under
// p/items and, in at-least-once mode, its claims as ephemeral nodes under
// p/claims, each named after the item it claims. An item's name carries its
// priority in an order-preserving fixed-width encoding; items are delivered
// by priority (higher first) and, within a priority, in the order they were
// put (by the store's Seq, never by the raw name, whose suffix differs from
// store to store). Names under p/items that are not items are ignored.
//
// # Delivery
//
// At-most-once ([AtMostOnce], the default): taking an item deletes its node,
// and whoever deletes it owns it. An item is never delivered twice. It can be
// lost only when the connection breaks while the delete is under way (the
// delete fails with [store.ErrDisconnected] after the server applied it) or
// when the consumer crashes holding it.
//
// At-least-once ([AtLeastOnce]): taking an item creates an ephemeral claim
// for it and leaves the item in place; [Item.Ack] deletes the item and its
// claim, [Item.Nack] deletes only the claim, and so does the end of the
// consumer's session. A claimed item is invisible to other consumers; an
// item whose claim goes away returns to its old place in the queue and is
// delivered again. Consumers must therefore be idempotent.
//
// Producers always get at-least-once: a Put that fails with
// [store.ErrDisconnected] may or may not have added the item, and a retry may
// add it twice.
//
// # Waiting and contention
//
// A consumer that finds no item it can take waits on a children watch of
// p/items (and of p/claims in at-least-once mode); it never polls. Every
// waiting consumer wakes on a change, as in ZooKeeper's queue recipe.
//
// Consumers competing for the head do not stampede on it. A consumer that
// loses the race for an item (someone else deleted or claimed it first) does
// not list again: it moves on within the listing it holds. And a Queue that
// loses races spreads its attempts: it tries an item at random among the
// first few (from 1, doubling with each take that lost a race, shrinking by
// one with each that did not, at most 16) untried items of the head's
// priority. Uncontended the spread is 1 and items are taken strictly in
// order. Under contention an item can be taken before fewer than 16 items
// of its own priority that were put before it, never before an item of a
// higher priority. So a single consumer receives items exactly in queue
// order, and competing consumers receive them in order up to that spread.
//
// When items trickle in one at a time to several idle consumers, each Put
// wakes them all and all but one lose the race for it: a wasted read (or a
// failed claim) per idle consumer per item, the price of not queueing the
// consumers themselves, which would cost writes on every take. The
// benchmarks report the wasted attempts per delivered item.
//
// Every take lists p/items (and p/claims) anew, names only, so that a new
// item of a higher priority is seen at once; the cost of a take therefore
// grows with the backlog, as in ZooKeeper's recipe (the store contract has no
// "first n children" read).
//
// # Never lost between store and user
//
// A take succeeds at its commit point (the delete, or the claim). A Take
// that reaches it returns the item even if ctx ends meanwhile; a Take whose
// ctx ends before it leaves the queue as it was. A [Consumer] hands each
// item over through an unbuffered channel and holds at most one item it has
// taken but not yet handed over; if its ctx ends first it puts that item back
// in its old place (at-most-once) or releases its claim (at-least-once). The
// one case it cannot cover is an at-most-once consumer whose session ends
// while it holds such an item: the item cannot be put back through a dead
// session, and [Consumer.Err] reports it lost.
package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/corral-go/corral/store"
)

// Delivery is a delivery guarantee; see the package doc.
type Delivery int

const (
	// AtMostOnce deletes an item when it is taken.
	AtMostOnce Delivery = iota
	// AtLeastOnce claims an item when it is taken and deletes it on Ack.
	AtLeastOnce
)

func (d Delivery) String() string {
	switch d {
	case AtMostOnce:
		return "at-most-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Delivery(%d)", int(d))
}

// Option configures a Queue.
type Option func(*options)

type options struct {
	delivery Delivery
}

// WithDelivery sets the delivery guarantee; the default is AtMostOnce.
func WithDelivery(d Delivery) Option { return func(o *options) { o.delivery = d } }

// The errors of this package, matched with errors.Is. Errors of the store
// (store.ErrTooLarge, store.ErrSessionExpired, store.ErrDisconnected, ...)
// are wrapped and matched the same way.
var (
	// ErrNoChildrenWatch: the store does not implement store.ChildrenWatcher.
	ErrNoChildrenWatch = errors.New("queue: store cannot watch children")
	// ErrInvalidDelivery: an unknown Delivery was given to New.
	ErrInvalidDelivery = errors.New("queue: invalid delivery")
	// ErrSettled: Ack or Nack of an item already acked or nacked.
	ErrSettled = errors.New("queue: item already acked or nacked")
	// ErrConsumerClosed is the cause reported by a Consumer stopped by Close.
	ErrConsumerClosed = errors.New("queue: consumer closed")
)

// cleanupTimeout bounds the requests that must complete even though the
// caller's ctx ended: committing a take, releasing a claim, putting an item
// back.
const cleanupTimeout = 10 * time.Second

// Reconnection backoff: the store has no "reconnected" signal, so requests
// that fail with store.ErrDisconnected are retried after a growing pause.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// Queue is a queue at one path of a store, used through one session. It is
// safe for concurrent use; any number of Queues, in any number of processes,
// may share the path (with the same Delivery). The zero value is not usable;
// call New.
type Queue struct {
	st       store.Store
	cw       store.ChildrenWatcher
	path     string
	items    string
	claims   string
	delivery Delivery

	taken  atomic.Int64 // items taken
	wasted atomic.Int64 // take attempts lost to another consumer
	spread atomic.Int32 // see spreadOrder

	mu      gosync.Mutex
	orphans []string // claim paths whose release failed, retried on later takes
}

// New returns the queue at path, used through the session st. It does no
// I/O. It fails with store.ErrInvalidPath for an invalid path,
// ErrNoChildrenWatch when st cannot watch children, and ErrInvalidDelivery.
func New(st store.Store, path string, opts ...Option) (*Queue, error) {
	if err := store.ValidatePath(path); err != nil {
		return nil, fmt.Errorf("queue: new: %w", err)
	}
	cw, ok := st.(store.ChildrenWatcher)
	if !ok {
		return nil, fmt.Errorf("queue: new %q: %w", path, ErrNoChildrenWatch)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.delivery != AtMostOnce && o.delivery != AtLeastOnce {
		return nil, fmt.Errorf("queue: new %q: %w: %v", path, ErrInvalidDelivery, o.delivery)
	}
	return &Queue{
		st:       st,
		cw:       cw,
		path:     path,
		items:    store.Join(path, "items"),
		claims:   store.Join(path, "claims"),
		delivery: o.delivery,
	}, nil
}

// Path returns the path of the queue.
func (q *Queue) Path() string { return q.path }

// Delivery returns the delivery guarantee of the queue.
func (q *Queue) Delivery() Delivery { return q.delivery }

// Put adds data to the queue with priority 0. See PutPriority.
func (q *Queue) Put(ctx context.Context, data []byte) error {
	return q.PutPriority(ctx, data, 0)
}

// PutPriority adds data to the queue with the given priority: items of a
// higher priority are delivered first, items of one priority in the order
// their Puts returned. Every int is a valid priority.
//
// It blocks for one request. Data over store.MaxDataSize fails with an error
// matching store.ErrTooLarge, before any I/O. When ctx ends first it returns
// ctx.Err() (wrapped); like a failure with store.ErrDisconnected, the item
// may then have been added or not, so a producer that retries gets
// at-least-once delivery. After the session ended it fails with
// store.ErrSessionExpired or store.ErrClosed.
func (q *Queue) PutPriority(ctx context.Context, data []byte, priority int) error {
	if err := store.ValidateData(data); err != nil {
		return fmt.Errorf("queue: put %q: %w", q.path, err)
	}
	name := itemName(int64(priority), 0, false)
	if _, err := q.st.Create(ctx, store.Join(q.items, name), data, store.Sequential); err != nil {
		return fmt.Errorf("queue: put %q: %w", q.path, err)
	}
	return nil
}

// Take removes the next item from the queue (at-most-once) or claims it
// (at-least-once) and returns it, waiting while the queue has no item it can
// take. The next item is the head of the queue, or one close to it while
// consumers compete (see "Waiting and contention" in the package doc).
//
// It blocks until it has an item, ctx ends or the session ends. When ctx
// ends before an item was taken, Take returns ctx.Err() (wrapped) and the
// queue is as it was; an item taken just as ctx ends is returned. Lost
// connections (store.ErrDisconnected) are retried until ctx ends. After the
// session ended it fails with store.ErrSessionExpired or store.ErrClosed. It
// is safe for concurrent use.
func (q *Queue) Take(ctx context.Context) (*Item, error) {
	it, err := q.take(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("queue: take %q: %w", q.path, err)
	}
	return it, nil
}

// TryTake is Take without the wait: it reports false, with a nil error,
// when no item can be taken now. It blocks for a few requests and does not
// retry: a lost connection fails it with store.ErrDisconnected.
func (q *Queue) TryTake(ctx context.Context) (*Item, bool, error) {
	it, err := q.take(ctx, false)
	if err != nil {
		return nil, false, fmt.Errorf("queue: take %q: %w", q.path, err)
	}
	return it, it != nil, nil
}

// take takes the next item, waiting for one when wait is set; without wait
// it returns nil, nil when there is none.
func (q *Queue) take(ctx context.Context, wait bool) (*Item, error) {
	backoff := minBackoff
	for {
		it, err := q.next(ctx)
		if err == nil && it != nil {
			return it, nil
		}
		if err == nil && !wait {
			return nil, nil
		}
		if err == nil {
			err = q.wait(ctx)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			backoff = minBackoff
			continue
		}
		if !wait || !errors.Is(err, store.ErrDisconnected) {
			return nil, err
		}
		if err := sleep(ctx, backoff); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next tries the available items and returns the first it takes, or nil
// when there is none left.
func (q *Queue) next(ctx context.Context) (*Item, error) {
	for {
		rest, err := q.available(ctx)
		if err != nil || len(rest) == 0 {
			return nil, err
		}
		// On a lost race move on within this listing rather than listing
		// again: see "Waiting and contention".
		lost := 0
		for len(rest) > 0 {
			i := q.pick(rest)
			it, err := q.try(ctx, rest[i])
			if err != nil {
				return nil, err
			}
			if it != nil {
				q.adapt(lost)
				q.taken.Add(1)
				return it, nil
			}
			lost++
			q.wasted.Add(1)
			rest = slices.Delete(rest, i, i+1)
		}
		q.adapt(lost)
	}
}

// maxSpread bounds how many items at the head of the queue a take spreads
// its attempts over.
const maxSpread = 16

// pick returns the index in rest (untried items, in queue order) of the
// item to try next: one at random among the first q.spread items that have
// the priority of the head. Uncontended the spread is 1 and pick follows the
// queue's order.
func (q *Queue) pick(rest []entry) int {
	w := min(int(q.spread.Load()), len(rest))
	for i := 1; i < w; i++ {
		if rest[i].prio != rest[0].prio {
			w = i
			break
		}
	}
	if w <= 1 {
		return 0
	}
	return rand.IntN(w)
}

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

// available lists the items that can be taken, in delivery order.
func (q *Queue) available(ctx context.Context) ([]entry, error) {
	q.releaseOrphans(ctx)
	// Claims first: Ack deletes the item before its claim, so an item
	// whose claim is gone from this listing is gone from the next one too,
	// instead of looking free.
	var claimed map[string]bool
	if q.delivery == AtLeastOnce {
		cs, err := q.st.Children(ctx, q.claims)
		if err != nil && !errors.Is(err, store.ErrNoNode) {
			return nil, err
		}
		claimed = names(cs)
	}
	kids, err := q.st.Children(ctx, q.items)
	if errors.Is(err, store.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return sortedItems(kids, claimed), nil
}

func names(kids []store.Child) map[string]bool {
	m := make(map[string]bool, len(kids))
	for _, k := range kids {
		m[k.Name] = true
	}
	return m
}

// try takes the item e. It returns nil, nil when another consumer took it
// first.
func (q *Queue) try(ctx context.Context, e entry) (*Item, error) {
	if q.delivery == AtLeastOnce {
		return q.claim(ctx, e)
	}
	p := store.Join(q.items, e.name)
	n, err := q.st.Get(ctx, p)
	if errors.Is(err, store.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The delete is the commit point: run it to completion so that its
	// outcome is known, whatever happens to ctx meanwhile.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err = q.st.Delete(dctx, p)
	if errors.Is(err, store.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return q.newItem(e, n.Data), nil
}

// claim claims the item e with an ephemeral node under the claims directory
// and reads it.
func (q *Queue) claim(ctx context.Context, e entry) (*Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cp := store.Join(q.claims, e.name)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, err := q.st.Create(cctx, cp, nil, store.Ephemeral)
	if errors.Is(err, store.ErrNodeExists) {
		return nil, nil
	}
	if err != nil {
		// The create may have been applied even so (a lost reply).
		if errors.Is(err, store.ErrDisconnected) {
			q.addOrphan(cp)
		}
		return nil, err
	}
	n, err := q.st.Get(ctx, store.Join(q.items, e.name))
	if err != nil {
		// Acked by its previous holder since our listing (ErrNoNode), or
		// ctx ended: give the claim up.
		q.release(ctx, cp)
		if errors.Is(err, store.ErrNoNode) {
			return nil, nil
		}
		return nil, err
	}
	return q.newItem(e, n.Data), nil
}

func (q *Queue) newItem(e entry, data []byte) *Item {
	return &Item{Data: data, Priority: int(e.prio), q: q, name: e.name, order: e.order}
}

// release deletes the claim at cp, bounded even if ctx ended. A release that
// fails for a reason other than the claim or the session being gone is
// retried by later takes.
func (q *Queue) release(ctx context.Context, cp string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := q.st.Delete(rctx, cp)
	if err == nil || gone(err) {
		return nil
	}
	q.addOrphan(cp)
	return err
}

// gone reports whether err says that the node or the whole session is gone,
// which releases a claim as surely as deleting it.
func gone(err error) bool {
	return errors.Is(err, store.ErrNoNode) || errors.Is(err, store.ErrSessionExpired) || errors.Is(err, store.ErrClosed)
}

func (q *Queue) addOrphan(cp string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.orphans = append(q.orphans, cp)
}

// releaseOrphans deletes the claims whose release failed earlier, if they
// still belong to this session (a create that failed may not have been
// applied, and another consumer may hold that claim now).
func (q *Queue) releaseOrphans(ctx context.Context) {
	q.mu.Lock()
	ps := q.orphans
	q.orphans = nil
	q.mu.Unlock()
	var keep []string
	for _, p := range ps {
		n, err := q.st.Get(ctx, p)
		switch {
		case err == nil && n.Owner == q.st.SessionID():
			if err := q.st.Delete(ctx, p); err != nil && !gone(err) {
				keep = append(keep, p)
			}
		case err != nil && !gone(err):
			keep = append(keep, p)
		}
	}
	if len(keep) > 0 {
		q.mu.Lock()
		q.orphans = append(q.orphans, keep...)
		q.mu.Unlock()
	}
}

// wait returns when the set of items that can be taken may have changed.
func (q *Queue) wait(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // releases the watch that did not fire
	kids, itemsEv, err := q.watchDir(wctx, q.items)
	if err != nil || itemsEv == nil {
		return err
	}
	var claimsEv <-chan store.Event
	var claimed map[string]bool
	if q.delivery == AtLeastOnce {
		var cs []store.Child
		cs, claimsEv, err = q.watchDir(wctx, q.claims)
		if err != nil || claimsEv == nil {
			return err
		}
		claimed = names(cs)
	}
	if len(sortedItems(kids, claimed)) > 0 {
		return nil
	}
	select {
	case ev := <-itemsEv:
		return ev.Err
	case ev := <-claimsEv:
		return ev.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchDir lists dir with a children watch. When dir does not exist it
// returns no children and a watch on its creation; when dir appeared between
// the two calls it returns a nil channel and the caller lists again.
func (q *Queue) watchDir(ctx context.Context, dir string) ([]store.Child, <-chan store.Event, error) {
	kids, ev, err := q.cw.ChildrenW(ctx, dir)
	if !errors.Is(err, store.ErrNoNode) {
		return kids, ev, err
	}
	exists, _, ev, err := q.st.ExistsW(ctx, dir)
	if err != nil || !exists {
		return nil, ev, err
	}
	return nil, nil, nil
}

// putBack adds the item again in its old place: same priority, ordered by
// the Seq of its original node. A create that fails with
// store.ErrDisconnected is retried only once a listing shows the item is not
// there, so the item is put back once.
func (q *Queue) putBack(ctx context.Context, it *Item) error {
	name := itemName(int64(it.Priority), it.order, true)
	backoff := minBackoff
	for {
		_, err := q.st.Create(ctx, store.Join(q.items, name), it.Data, store.Sequential)
		if err == nil || !errors.Is(err, store.ErrDisconnected) {
			return err
		}
		for {
			if err := sleep(ctx, backoff); err != nil {
				return err
			}
			backoff = min(2*backoff, maxBackoff)
			kids, err := q.st.Children(ctx, q.items)
			if errors.Is(err, store.ErrDisconnected) {
				continue
			}
			if err != nil && !errors.Is(err, store.ErrNoNode) {
				return err
			}
			if slices.ContainsFunc(kids, func(k store.Child) bool { return strings.Contains(k.Name, name) }) {
				return nil
			}
			break
		}
	}
}
