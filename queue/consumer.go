package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
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
	q *Queue
	l *runner.Loop[*Item]
}

// Consume starts a consumer of q. It does not block. The consumer runs
// until ctx ends, its session ends (store.ErrSessionExpired,
// store.ErrClosed), Close is called, or a take fails for a reason other
// than a lost connection (those are retried). Then its channel closes and
// Err says why. On a zero Queue it returns a Consumer that has stopped
// with store.ErrInvalidArgument.
func (q *Queue) Consume(ctx context.Context) *Consumer {
	if err := q.usable("consume"); err != nil {
		return &Consumer{l: runner.Stopped[*Item](err)}
	}
	c := &Consumer{q: q}
	c.l = runner.Start(ctx, c.run)
	return c
}

// Items returns the channel the consumer delivers items on. It is closed
// when the consumer has stopped and given back any item it held; Err then
// says why. At-least-once, every item received must be Acked or Nacked.
func (c *Consumer) Items() <-chan *Item { return c.loop().C() }

// Done returns a channel that is closed when the consumer has stopped, after
// its Items channel.
func (c *Consumer) Done() <-chan struct{} { return c.loop().Done() }

// Err returns nil while the consumer runs and, once it stopped, why: the
// cause of its ctx (context.Canceled, context.DeadlineExceeded or the cause
// given to a context.CancelCauseFunc), the end of the session
// (store.ErrSessionExpired, store.ErrClosed), ErrConsumerClosed after Close,
// or the error of a failed take; joined with the error of giving back the
// item it held, if that failed.
func (c *Consumer) Err() error { return c.loop().Err(errZeroConsumer) }

var errZeroConsumer = fmt.Errorf("queue: consumer: %w: not made by Queue.Consume", store.ErrInvalidArgument)

// Close stops the consumer and waits until it has stopped. It does not need
// the Items channel to be drained. It is idempotent and returns nil.
func (c *Consumer) Close() error { return c.loop().Close(ErrConsumerClosed) }

// loop returns the loop of c, nil for a nil Consumer.
func (c *Consumer) loop() *runner.Loop[*Item] {
	if c == nil {
		return nil
	}
	return c.l
}

// run takes items and hands them over on out until the consumer stops, and
// returns why. The end of the session stops it too, at once, even while it
// waits for a receiver.
func (c *Consumer) run(ctx context.Context, out chan<- *Item) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sess := c.q.st.Context()
	defer context.AfterFunc(sess, func() { cancel(context.Cause(sess)) })()
	for {
		it, err := c.q.take(ctx, true)
		if err != nil {
			return c.stopped(ctx, err, nil)
		}
		if c.hand(ctx, out, it) {
			continue
		}
		if ctx.Err() == nil {
			continue // the claim was lost while we held the item: take again
		}
		// The ctx has ended; giving the item back must not.
		gctx, gcancel := recipe.GraceContext(ctx)
		var gerr error
		if err := it.giveBack(gctx); err != nil {
			gerr = fmt.Errorf("queue: consumer: give back %q: %w", it.ID, err)
		}
		gcancel()
		return c.stopped(ctx, ctx.Err(), gerr)
	}
}

// hand hands it over and reports whether the receiver got it. While it
// waits it extends the item's claim, a third of the visibility timeout
// before its deadline; it gives up when ctx ends or the claim is lost.
func (c *Consumer) hand(ctx context.Context, out chan<- *Item, it *Item) bool {
	var renew <-chan time.Time
	var t *time.Timer
	if d, ok := it.Deadline(); ok {
		t = time.NewTimer(time.Until(d) - it.c.timeout/3)
		defer t.Stop()
		renew = t.C
	}
	for {
		select {
		case out <- it:
			c.q.delivered(ctx, it)
			return true
		case <-ctx.Done():
			return false
		case <-it.ctx.Done():
			return false
		case <-renew:
			if err := it.Extend(ctx); err != nil && !errors.Is(err, store.ErrDisconnected) {
				return false
			}
			d, _ := it.Deadline()
			t.Reset(max(time.Until(d)-it.c.timeout/3, 10*time.Millisecond))
		}
	}
}

// stopped returns why the consumer stopped: the cause of ctx once it
// ended, else the failed take's err; joined with gerr, the failure to give
// back the item it held.
func (c *Consumer) stopped(ctx context.Context, err, gerr error) error {
	return errors.Join(runner.Cause(ctx, fmt.Errorf("queue: consumer %q: %w", c.q.path, err)), gerr)
}
