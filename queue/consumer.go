package queue

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Consumer takes items from a queue in a goroutine of its own and hands them
// over through a channel, one at a time, in queue order. Get one from
// Queue.Consume.
//
// It holds at most one item it has taken but not handed over yet (and
// extends that item's claim while it holds it): when it stops, that item is
// put back in its old place (at-most-once) or its claim is released
// (at-least-once), without counting the delivery, so stopping a Consumer
// loses no item. Its methods are safe for concurrent use. The zero Consumer
// is not usable: its channels are closed and Err reports
// store.ErrInvalidArgument.
type Consumer struct {
	q      *Queue
	ch     chan *Item
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu  gosync.Mutex
	err error
}

// Consume starts a consumer of q. It does not block. The consumer runs
// until ctx ends, its session ends (store.ErrSessionExpired,
// store.ErrClosed), Close is called, or a take fails for a reason other
// than a lost connection (those are retried). Then its channel closes and
// Err says why. On a zero Queue it returns a Consumer that has stopped
// with store.ErrInvalidArgument.
func (q *Queue) Consume(ctx context.Context) *Consumer {
	if err := q.usable("consume"); err != nil {
		c := &Consumer{ch: make(chan *Item), done: make(chan struct{}), err: err}
		close(c.ch)
		close(c.done)
		return c
	}
	cctx, cancel := context.WithCancelCause(ctx)
	c := &Consumer{q: q, ch: make(chan *Item), ctx: cctx, cancel: cancel, done: make(chan struct{})}
	sess := q.st.Context()
	stop := context.AfterFunc(sess, func() { cancel(context.Cause(sess)) })
	go c.run(stop)
	return c
}

// closedItems is the Items channel of the zero Consumer.
var closedItems = func() chan *Item {
	ch := make(chan *Item)
	close(ch)
	return ch
}()

// Items returns the channel the consumer delivers items on. It is closed
// when the consumer has stopped and given back any item it held; Err then
// says why. At-least-once, every item received must be Acked or Nacked.
func (c *Consumer) Items() <-chan *Item {
	if c == nil || c.ch == nil {
		return closedItems
	}
	return c.ch
}

// Done returns a channel that is closed when the consumer has stopped, after
// its Items channel.
func (c *Consumer) Done() <-chan struct{} {
	if c == nil || c.done == nil {
		return recipeClosed
	}
	return c.done
}

var recipeClosed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Err returns nil while the consumer runs and, once it stopped, why: the
// cause of its ctx (context.Canceled, context.DeadlineExceeded or the cause
// given to a context.CancelCauseFunc), the end of the session
// (store.ErrSessionExpired, store.ErrClosed), ErrConsumerClosed after Close,
// or the error of a failed take; joined with the error of giving back the
// item it held, if that failed.
func (c *Consumer) Err() error {
	if c == nil || c.done == nil {
		return fmt.Errorf("queue: consumer: %w: not made by Queue.Consume", store.ErrInvalidArgument)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close stops the consumer and waits until it has stopped. It does not need
// the Items channel to be drained. It is idempotent and returns nil.
func (c *Consumer) Close() error {
	if c == nil || c.cancel == nil {
		return nil
	}
	c.cancel(ErrConsumerClosed)
	<-c.done
	return nil
}

func (c *Consumer) run(stop func() bool) {
	defer close(c.done)
	defer stop()
	for {
		it, err := c.q.take(c.ctx, true)
		if err != nil {
			c.finish(err, nil)
			return
		}
		if c.hand(it) {
			continue
		}
		if c.ctx.Err() == nil {
			continue // the claim was lost while we held the item: take again
		}
		// The ctx has ended; giving the item back must not.
		gctx, cancel := recipe.GraceContext(c.ctx)
		var gerr error
		if err := it.giveBack(gctx); err != nil {
			gerr = fmt.Errorf("queue: consumer: give back %q: %w", it.ID, err)
		}
		cancel()
		c.finish(c.ctx.Err(), gerr)
		return
	}
}

// hand hands it over and reports whether the receiver got it. While it
// waits it extends the item's claim, a third of the visibility timeout
// before its deadline; it gives up when ctx ends or the claim is lost.
func (c *Consumer) hand(it *Item) bool {
	var renew <-chan time.Time
	var t *time.Timer
	if d, ok := it.Deadline(); ok {
		t = time.NewTimer(time.Until(d) - it.c.timeout/3)
		defer t.Stop()
		renew = t.C
	}
	for {
		select {
		case c.ch <- it:
			c.q.delivered(c.ctx, it)
			return true
		case <-c.ctx.Done():
			return false
		case <-it.ctx.Done():
			return false
		case <-renew:
			if err := it.Extend(c.ctx); err != nil && !errors.Is(err, store.ErrDisconnected) {
				return false
			}
			d, _ := it.Deadline()
			t.Reset(max(time.Until(d)-it.c.timeout/3, 10*time.Millisecond))
		}
	}
}

// finish records why the consumer stopped and closes its channel.
func (c *Consumer) finish(err, gerr error) {
	if c.ctx.Err() != nil {
		err = context.Cause(c.ctx)
	} else {
		err = fmt.Errorf("queue: consumer %q: %w", c.q.path, err)
	}
	c.mu.Lock()
	c.err = errors.Join(err, gerr)
	c.mu.Unlock()
	close(c.ch)
	c.cancel(err)
}
