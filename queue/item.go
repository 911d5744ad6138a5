package queue

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Item is one item taken from a queue. Data and Priority are what the
// producer put; ID names the item for its whole life, the same across
// redeliveries and in a dead-letter queue, for consumers that must be
// idempotent; Deliveries counts the times it was delivered, this one
// included. An at-least-once item stays claimed until Ack or Nack, or until
// the claim is lost (see Context); an at-most-once item is already gone from
// the queue.
//
// Its methods are safe for concurrent use; the first Ack or Nack settles
// the item and later calls fail with ErrSettled. The zero Item is not
// usable: its methods fail with store.ErrInvalidArgument and its Context is
// cancelled.
type Item struct {
	Data       []byte
	Priority   int
	ID         string
	Deliveries int

	q      *Queue
	e      names.Entry
	peeked bool
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       gosync.Mutex
	settled  bool
	c        *claim      // at-least-once
	prevVer  int64       // the count node's version before this delivery, -1: none
	countVer int64       // its version after
	timer    *time.Timer // the claim's deadline, under a visibility timeout
	timedOut bool        // the claim's deadline passed
	released bool        // the claim was released at its deadline
	watching bool
}

// claim is an at-least-once item's claim node.
type claim struct {
	q     *Queue
	path  string
	owner int64       // the node's Owner: the session, or the lease
	lease store.Lease // nil: an ephemeral claim, timed here if timeout > 0

	timeout time.Duration

	mu       gosync.Mutex
	deadline time.Time // zero: no timeout
}

// newClaim creates the claim of the item id: with a lease of its own when
// the queue has a visibility timeout and the store leases nodes, else
// ephemeral, and then, when guard is set, only while the node at guard
// (the item) exists. ErrNodeExists: someone holds it; ErrNoNode: the guard
// is gone. A create whose outcome is unknown is undone (through the
// session's cleaner if need be).
func (q *Queue) newClaim(ctx context.Context, cfg config, id, guard string) (*claim, error) {
	p := store.Join(q.claims, id)
	c := &claim{q: q, path: p, timeout: cfg.visibility}
	start := time.Now()
	who := q.ident.Encode(start)
	if ls, ok := store.Find[store.Leaser](q.st); ok && cfg.visibility > 0 {
		n, l, err := ls.CreateLeased(ctx, p, who, cfg.visibility)
		if err != nil {
			return nil, err // the lease, if granted, was revoked
		}
		c.owner, c.lease, c.deadline = n.Owner, l, l.Deadline()
		return c, nil
	}
	var err error
	if gc, ok := store.Find[store.GuardedCreator](q.st); ok && guard != "" {
		_, err = gc.CreateIf(ctx, p, who, store.Ephemeral, guard)
	} else {
		_, err = q.st.Create(ctx, p, who, store.Ephemeral)
	}
	if err != nil {
		if !errors.Is(err, store.ErrNodeExists) && !errors.Is(err, store.ErrNoNode) && !gone(err) {
			_ = recipe.RemoveOwned(ctx, q.st, q.rec, p, q.st.SessionID())
		}
		return nil, err
	}
	c.owner = q.st.SessionID()
	if cfg.visibility > 0 {
		c.deadline = start.Add(cfg.visibility)
	}
	return c, nil
}

// gone reports whether err says that the session is gone, which releases an
// ephemeral claim as surely as deleting it.
func gone(err error) bool {
	return errors.Is(err, store.ErrSessionExpired) || errors.Is(err, store.ErrClosed)
}

// release gives the claim up: it revokes its lease or deletes the node,
// within ctx and a grace after. Nobody but this session deletes an
// ephemeral claim while it holds it, so the node is deleted at once; what
// cannot be done in time is handed to the session's cleaner, which deletes
// the node only while it is still this one (another consumer may hold the
// item's claim under the same name by then). A leased claim that cannot be
// revoked ends with its lease at the latest.
func (c *claim) release(ctx context.Context) {
	gctx, cancel := recipe.GraceContext(ctx)
	defer cancel()
	for attempt := 0; ; attempt++ {
		var err error
		if c.lease != nil {
			err = c.lease.Revoke(gctx)
		} else if err = c.q.st.Delete(gctx, c.path); errors.Is(err, store.ErrNoNode) {
			err = nil
		}
		switch {
		case err == nil || gone(err):
			return
		case errors.Is(err, store.ErrDisconnected) && gctx.Err() == nil && recipe.Pause(gctx, c.q.st, attempt) == nil:
			continue
		}
		recipe.RemoveLater(c.q.st, c.path, c.owner)
		return
	}
}

func (c *claim) getDeadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline
}

// extend renews the claim: renews its lease, or checks that it is still
// there and moves its deadline.
func (c *claim) extend(ctx context.Context) error {
	if c.lease != nil {
		if err := c.lease.Renew(ctx); err != nil {
			if errors.Is(err, store.ErrNoNode) {
				return fmt.Errorf("%w: %w", ErrClaimLost, err)
			}
			return err
		}
		c.mu.Lock()
		c.deadline = c.lease.Deadline()
		c.mu.Unlock()
		return nil
	}
	start := time.Now()
	n, err := c.q.st.Get(ctx, c.path)
	if errors.Is(err, store.ErrNoNode) || err == nil && n.Owner != c.owner {
		return fmt.Errorf("%w: claim %q deleted", ErrClaimLost, store.ShortPath(c.path))
	}
	if err != nil {
		return err
	}
	if c.timeout > 0 {
		c.mu.Lock()
		c.deadline = start.Add(c.timeout)
		c.mu.Unlock()
	}
	return nil
}

// newItem returns the item e holding data, delivered count times.
func (q *Queue) newItem(e names.Entry, data []byte, count int) *Item {
	it := &Item{Data: data, Priority: int(e.Prio), ID: e.ID, Deliveries: count, q: q, e: e}
	it.ctx, it.cancel = context.WithCancelCause(context.Background())
	return it
}

// claimed makes it an at-least-once item holding c: its Context ends with
// the session and, under a visibility timeout, at the claim's deadline.
func (it *Item) claimed(c *claim, prevVer, countVer int64) {
	it.c, it.prevVer, it.countVer = c, prevVer, countVer
	sess := it.q.st.Context()
	stop := context.AfterFunc(sess, func() { it.lose(fmt.Errorf("%w: %w", ErrClaimLost, context.Cause(sess))) })
	context.AfterFunc(it.ctx, func() { stop() })
	if d := c.getDeadline(); !d.IsZero() {
		it.mu.Lock()
		it.timer = time.AfterFunc(time.Until(d), it.expire)
		it.mu.Unlock()
	}
}

// expire ends the claim at its deadline, unless it was settled, lost
// otherwise or extended meanwhile: the item's Context is cancelled, then an
// ephemeral claim is deleted here (a leased one ends on the server).
func (it *Item) expire() {
	it.mu.Lock()
	if it.settled || it.released || it.ctx.Err() != nil && !it.timedOut {
		it.mu.Unlock()
		return
	}
	if !it.timedOut {
		if left := time.Until(it.c.getDeadline()); left > 0 {
			it.timer.Reset(left)
			it.mu.Unlock()
			return
		}
		it.timeout()
	}
	it.released = true
	it.mu.Unlock()
	if it.c.lease == nil {
		it.c.release(it.q.st.Context())
	}
}

// timeout records that the claim's deadline passed; it.mu is held.
func (it *Item) timeout() {
	it.timedOut = true
	it.cancel(fmt.Errorf("%w: visibility timeout (%v) passed", ErrClaimLost, it.c.timeout))
}

// stopTimer stops the claim's deadline once the item is settled; it.mu
// is held.
func (it *Item) stopTimer() {
	if it.timer != nil {
		it.timer.Stop()
	}
}

// lose records that the claim is gone.
func (it *Item) lose(err error) {
	it.cancel(err)
}

// expired ends the claim if its session has ended or its deadline has
// passed, whether or not the callbacks that watch them have run yet:
// checked wherever the claim's state is read, so that a holder never
// believes it holds a claim it lost. it.mu is held.
func (it *Item) expired() {
	if it.c == nil || it.ctx.Err() != nil {
		return
	}
	if sess := it.q.st.Context(); sess.Err() != nil {
		it.lose(fmt.Errorf("%w: %w", ErrClaimLost, context.Cause(sess)))
		return
	}
	if it.timer == nil {
		return
	}
	if !time.Now().Before(it.c.getDeadline()) {
		it.timeout()
		it.timer.Reset(0) // expire releases the claim
	}
}

// check returns the error of an operation op on it, or nil; it.mu is held.
func (it *Item) check(op string) error {
	if it != nil && it.q != nil && !it.settled {
		it.expired()
	}
	switch {
	case it == nil || it.q == nil:
		return fmt.Errorf("queue: %s: %w: item not taken from a queue", op, store.ErrInvalidArgument)
	case it.peeked:
		return fmt.Errorf("queue: %s %q: %w", op, it.ID, ErrPeeked)
	case it.settled:
		return fmt.Errorf("queue: %s %q: %w", op, it.ID, ErrSettled)
	case it.c != nil && it.ctx.Err() != nil:
		return fmt.Errorf("queue: %s %q: %w", op, it.ID, context.Cause(it.ctx))
	}
	return nil
}

// Ack reports the item processed. At-least-once, it deletes the item and
// then its claim and delivery count; at-most-once it deletes nothing (the
// item was deleted when taken).
//
// It blocks for about two requests, retrying across lost connections
// until ctx ends. When it fails (ctx ended, session ended) the item is not
// settled: it stays claimed and Ack or Nack may be called again. Once the claim is lost (see Context) Ack fails with
// ErrClaimLost and deletes nothing: the item is someone else's to process.
// A client may learn that its claim ended after the server did (etcd's
// lease ends on the server first), so an Ack in between may still delete
// an item another consumer has claimed again; that consumer's Ack then
// succeeds too. Either way the item was delivered at least once.
func (it *Item) Ack(ctx context.Context) error {
	if it == nil {
		return (*Item)(nil).check("ack")
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	if err := it.check("ack"); err != nil {
		return err
	}
	q := it.q
	if it.c != nil {
		// While we hold the claim nobody else deletes the item, so a
		// missing item was deleted by an earlier attempt of ours whose
		// reply was lost.
		p := store.Join(q.items, it.e.Name)
		for attempt := 0; ; attempt++ {
			err := q.st.Delete(ctx, p)
			if err == nil || errors.Is(err, store.ErrNoNode) {
				break
			}
			if !errors.Is(err, store.ErrDisconnected) || recipe.Pause(ctx, q.st, attempt) != nil {
				return fmt.Errorf("queue: ack %q: %w", it.ID, recipe.CtxErr(ctx, err))
			}
		}
	}
	it.settled = true
	it.stopTimer()
	it.cancel(ErrSettled)
	if it.c != nil {
		// Neither is a failed Ack: the item is gone, and both are left
		// to the session's cleaner if need be.
		var wg gosync.WaitGroup
		wg.Go(func() {
			_ = recipe.Remove(ctx, q.st, q.rec, store.Node{Path: store.Join(q.counts, it.ID)})
		})
		it.c.release(ctx)
		wg.Wait()
	}
	q.rec.Ack(ctx)
	return nil
}

// Nack returns the item to the queue, in its old place, for this or another
// consumer to take again. At-least-once it releases the claim; at-most-once
// it adds the item again (with its priority, ordered by its original
// position), or moves it to the dead-letter queue if it has been delivered
// the maximum number of times.
//
// It blocks for about one request. At-least-once it succeeds once the claim
// is released, or handed to the session's cleaner, which releases it as
// soon as the connection allows. At-most-once, when it fails the item is
// not settled and Nack or Ack may be called again. Once the claim is lost,
// Nack fails with ErrClaimLost: the item is back in the queue already.
func (it *Item) Nack(ctx context.Context) error {
	if it == nil {
		return (*Item)(nil).check("nack")
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	if err := it.check("nack"); err != nil {
		return err
	}
	if it.c != nil {
		it.settled = true
		it.stopTimer()
		it.cancel(ErrSettled)
		it.c.release(ctx)
		it.q.rec.Nack(ctx)
		return nil
	}
	q := it.q
	cfg, err := q.settings(ctx, useRead)
	if err == nil {
		if cfg.deadLetter != "" && it.Deliveries >= cfg.maxDeliveries {
			err = q.deadLetter(ctx, cfg, it.e, it.Data)
		} else {
			err = q.putBack(ctx, it, it.Deliveries)
		}
	}
	if err != nil {
		return fmt.Errorf("queue: nack %q: %w", it.ID, recipe.CtxErr(ctx, err))
	}
	it.settled = true
	it.cancel(ErrSettled)
	q.rec.Nack(ctx)
	return nil
}

// Extend renews the item's claim: under a visibility timeout, its deadline
// moves to a full timeout from now (on etcd, its lease is renewed); without
// one, Extend checks that the claim is still held. It blocks for one
// request. It fails with ErrClaimLost once the claim is lost, ErrSettled
// after Ack or Nack, and ErrNoClaim for an at-most-once item.
func (it *Item) Extend(ctx context.Context) error {
	if it == nil {
		return (*Item)(nil).check("extend")
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	if err := it.check("extend"); err != nil {
		return err
	}
	if it.c == nil {
		return fmt.Errorf("queue: extend %q: %w", it.ID, ErrNoClaim)
	}
	if err := it.c.extend(ctx); err != nil {
		if errors.Is(err, ErrClaimLost) {
			it.lose(err)
		}
		return fmt.Errorf("queue: extend %q: %w", it.ID, recipe.CtxErr(ctx, err))
	}
	return nil
}

// Deadline returns when the item's claim ends unless it is extended, and
// false when it has no deadline (at-most-once, no visibility timeout, or a
// peeked item).
func (it *Item) Deadline() (time.Time, bool) {
	if it == nil || it.c == nil {
		return time.Time{}, false
	}
	d := it.c.getDeadline()
	return d, !d.IsZero()
}

// Context returns a context that is cancelled when the item is settled (Ack,
// Nack: cause ErrSettled) and, at-least-once, the moment its claim is lost,
// with a cause wrapping ErrClaimLost: the visibility timeout passed without
// Extend, the session ended, or someone deleted the claim. Work on an
// at-least-once item should stop then: the item is, or soon will be,
// another consumer's. The first call of an at-least-once item's Context
// starts a watch on its claim (one request, and a goroutine until the item
// is settled or lost).
func (it *Item) Context() context.Context {
	if it == nil || it.q == nil {
		return invalidItemCtx
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.settled {
		it.expired()
	}
	if it.c != nil && !it.watching && it.ctx.Err() == nil {
		it.watching = true
		go it.watchClaim()
	}
	return it.ctx
}

var invalidItemCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("queue: %w: item not taken from a queue", store.ErrInvalidArgument))
	return ctx
}()

// watchClaim cancels the item's Context when its claim goes, until the
// item is settled or lost.
func (it *Item) watchClaim() {
	ctx, st, c := it.ctx, it.q.st, it.c
	for attempt := 0; ctx.Err() == nil; {
		stat, ev, err := store.WatchNode(ctx, st, c.path)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, store.ErrDisconnected):
			if recipe.Pause(ctx, st, attempt) != nil {
				return
			}
			attempt++
			continue
		case errors.Is(err, store.ErrNoNode), err == nil && stat.Owner != c.owner:
			it.lose(fmt.Errorf("%w: claim %q deleted", ErrClaimLost, store.ShortPath(c.path)))
			return
		case err != nil:
			return // the session ended: the item's Context ends with it
		}
		attempt = 0
		select {
		case <-ev:
		case <-ctx.Done():
			return
		}
	}
}

// giveBack returns an item a Consumer took but never handed over, without
// counting the delivery: at-least-once it restores the item's count and
// releases the claim, at-most-once it puts the item back as it was.
func (it *Item) giveBack(ctx context.Context) error {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.settled || it.ctx.Err() != nil {
		return nil // settled, or lost: nothing to give back
	}
	it.settled = true
	it.stopTimer()
	it.cancel(ErrSettled)
	q := it.q
	if it.c == nil {
		return q.putBack(ctx, it, it.e.Count)
	}
	p := store.Join(q.counts, it.ID)
	if it.prevVer < 0 {
		_ = recipe.Remove(ctx, q.st, q.rec, store.Node{Path: p})
	} else {
		_, _ = q.st.Set(ctx, p, []byte(fmt.Sprint(it.Deliveries-1)), it.countVer)
	}
	it.c.release(ctx)
	return nil
}
