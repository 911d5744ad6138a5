package queue

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
)

// Consumer takes items from a queue in a goroutine of its own and hands them
// over through a channel, one at a time, in queue order. Get one from
// Queue.Consume.
//
// It holds at most one item it has taken but not handed over yet: when it
// stops, that item is put back in its old place (at-most-once) or its claim
// is released (at-least-once), so stopping a Consumer loses no item. Its
// methods are safe for concurrent use.
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
// Err says why.
func (q *Queue) Consume(ctx context.Context) *Consumer {
	cctx, cancel := context.WithCancelCause(ctx)
	c := &Consumer{q: q, ch: make(chan *Item), ctx: cctx, cancel: cancel, done: make(chan struct{})}
	sess := q.st.Context()
	stop := context.AfterFunc(sess, func() { cancel(context.Cause(sess)) })
	go c.run(stop)
	return c
}

// Items returns the channel the consumer delivers items on. It is closed
// when the consumer has stopped and given back any item it held; Err then
// says why. At-least-once, every item received must be Acked or Nacked.
func (c *Consumer) Items() <-chan *Item { return c.ch }

// Done returns a channel that is closed when the consumer has stopped, after
// its Items channel.
func (c *Consumer) Done() <-chan struct{} { return c.done }

// Err returns nil while the consumer runs and, once it stopped, why: the
// cause of its ctx (context.Canceled, context.DeadlineExceeded or the cause
// given to a context.CancelCauseFunc), the end of the session
// (store.ErrSessionExpired, store.ErrClosed), ErrConsumerClosed after Close,
// or the error of a failed take; joined with the error of giving back the
// item it held, if that failed.
func (c *Consumer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close stops the consumer and waits until it has stopped. It does not need
// the Items channel to be drained. It is idempotent and returns nil.
func (c *Consumer) Close() error {
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
		select {
		case c.ch <- it:
		case <-c.ctx.Done():
			// The ctx has ended; giving the item back must not.
			gctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), cleanupTimeout)
			var gerr error
			if err := c.q.giveBack(gctx, it); err != nil {
				gerr = fmt.Errorf("queue: consumer: give back %q: %w", it.name, err)
			}
			cancel()
			c.finish(c.ctx.Err(), gerr)
			return
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
