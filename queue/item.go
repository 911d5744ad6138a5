package queue

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"

	"github.com/corral-go/corral/store"
)

// Item is one item taken from a queue. Data and Priority are what the
// producer put. An at-least-once item stays claimed until Ack or Nack; an
// at-most-once item is already gone from the queue.
//
// Ack and Nack are safe for concurrent use; the first of them settles the
// item and later calls fail with ErrSettled.
type Item struct {
	Data     []byte
	Priority int

	q     *Queue
	name  string
	order int64

	mu      gosync.Mutex
	settled bool
}

// Ack reports the item processed. At-least-once, it deletes the item and
// then its claim; at-most-once it does nothing (the item was deleted when
// taken).
//
// It blocks for up to two requests. When it fails (ctx ended, connection
// lost) the item is not settled: it stays claimed and Ack or Nack may be
// called again. After the consumer's session ended Ack fails with
// store.ErrSessionExpired or store.ErrClosed: the claim is gone with the
// session and the item will be delivered again, possibly already to another
// consumer. A client learns of its session's end after the server (etcd's
// lease expires on the server first), so an Ack in between may still delete
// an item another consumer has claimed again; that consumer's Ack then
// succeeds too. Either way the item was delivered at least once.
func (it *Item) Ack(ctx context.Context) error {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.settled {
		return fmt.Errorf("queue: ack: %w", ErrSettled)
	}
	q := it.q
	if q.delivery == AtLeastOnce {
		// While we hold the claim nobody else deletes the item, so a
		// missing item was deleted by an earlier Ack of ours whose reply
		// was lost.
		err := q.st.Delete(ctx, store.Join(q.items, it.name))
		if err != nil && !errors.Is(err, store.ErrNoNode) {
			return fmt.Errorf("queue: ack %q: %w", it.name, err)
		}
		// Failing to release the claim is not a failed Ack: the item is
		// gone, and the claim is released by a later take or with the
		// session.
		_ = q.release(ctx, store.Join(q.claims, it.name))
	}
	it.settled = true
	return nil
}

// Nack returns the item to the queue, in its old place, for this or another
// consumer to take again. At-least-once it deletes the claim; at-most-once
// it adds the item again (with its priority, ordered by its original
// position).
//
// It blocks for about one request. When it fails the item is not settled
// and Nack or Ack may be called again; an at-least-once claim that cannot be
// deleted is still released by a later take of this Queue or when the
// session ends.
func (it *Item) Nack(ctx context.Context) error {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.settled {
		return fmt.Errorf("queue: nack: %w", ErrSettled)
	}
	if err := it.q.giveBack(ctx, it); err != nil {
		return fmt.Errorf("queue: nack %q: %w", it.name, err)
	}
	it.settled = true
	return nil
}

// giveBack returns it to the queue: releases its claim (at-least-once) or
// puts it back (at-most-once).
func (q *Queue) giveBack(ctx context.Context, it *Item) error {
	if q.delivery == AtLeastOnce {
		return q.release(ctx, store.Join(q.claims, it.name))
	}
	return q.putBack(ctx, it)
}
