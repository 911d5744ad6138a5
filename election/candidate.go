package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/store"
)

// Candidate campaigns without end, for a service that should lead whenever
// it can: it hands each term it wins out on Terms and, when a term ends,
// campaigns again.
//
// A Candidate re-campaigns after every term that ends while its session
// lives: after the term was resigned (the candidate steps down and queues
// again behind the others), after its node was deleted, and after a lost
// connection (once the connection is back; a node left over from the lost
// term is removed first). It stops, and closes Terms, when its ctx ends,
// when Close is called or when the session ends; see Err.
//
// A Candidate's methods are safe for concurrent use. It runs one goroutine,
// which exits after Terms is closed; Close waits for it.
type Candidate struct {
	e     *Election
	value []byte
	l     *runner.Loop[*Leadership]
}

// errClosed is the cause of a Candidate's context after Close.
var errClosed = errors.New("election: candidate closed")

// Candidate starts campaigning with value, in the background, and returns at
// once. Each term the candidate wins is sent on Terms; the candidate stops
// when ctx ends, Close is called or the session ends, and then resigns any
// term it holds and removes its node (see Close).
//
// An Election that cannot be used (see New), or a value over
// store.MaxDataSize, gives a Candidate that has stopped already: Terms is
// closed and Err says why.
func (e *Election) Candidate(ctx context.Context, value []byte) *Candidate {
	if err := e.check(value); err != nil {
		return &Candidate{e: e, l: runner.Stopped[*Leadership](fmt.Errorf("election: candidate: %w", err))}
	}
	c := &Candidate{e: e, value: append([]byte(nil), value...)}
	c.l = runner.Start(ctx, c.run)
	return c
}

// Terms returns the channel on which the candidate sends each term it wins.
// A term that is lost before it is received is never sent. Receive the next
// term only after the last one is Done: the candidate campaigns again only
// then. The channel is closed when the candidate stops.
func (c *Candidate) Terms() <-chan *Leadership { return c.loop().C() }

// Close stops the candidate: it resigns the current term, if any, removes
// its node and waits for its goroutine to exit. While the connection is lost
// the removal is tried for a short grace (one second) and then left to the
// session, which removes the node as soon as the connection allows; that
// bounds Close. It is idempotent and returns nil.
func (c *Candidate) Close() error { return c.loop().Close(errClosed) }

// loop returns the loop of c, nil for a nil Candidate.
func (c *Candidate) loop() *runner.Loop[*Leadership] {
	if c == nil {
		return nil
	}
	return c.l
}

// Err returns nil while the candidate runs and after Close; after it stopped
// by itself (Terms is closed), it returns why: an error wrapping ctx.Err()
// when ctx ended, the session's cause (store.ErrSessionExpired or
// store.ErrClosed) when the session ended, or the error that made a campaign
// fail for good.
func (c *Candidate) Err() error { return c.loop().Err(errZeroCandidate) }

var errZeroCandidate = fmt.Errorf("election: candidate: %w: not made by Election.Candidate", store.ErrInvalidArgument)

// run campaigns and sends each term won on terms until the candidate
// stops, and returns why; nil after Close.
func (c *Candidate) run(ctx context.Context, terms chan<- *Leadership) error {
	err := c.campaigns(ctx, terms)
	if errors.Is(context.Cause(ctx), errClosed) {
		return nil
	}
	return err
}

// campaigns campaigns until ctx or the session ends, and returns why.
func (c *Candidate) campaigns(ctx context.Context, terms chan<- *Leadership) error {
	for attempt := 0; ; {
		if err := c.e.alive(ctx); err != nil {
			return c.stopped(ctx, err)
		}
		// A term's node that Resign could not remove is left to the
		// session, and the next campaign removes it before it lines up.
		l, err := c.e.Campaign(ctx, c.value)
		if err != nil {
			if c.e.alive(ctx) != nil {
				return c.stopped(ctx, err)
			}
			if !errors.Is(err, store.ErrDisconnected) && !errors.Is(err, ErrNodeDeleted) {
				return err
			}
			if err := recipe.Pause(ctx, c.e.st, attempt); err != nil {
				return c.stopped(ctx, err)
			}
			attempt++
			continue
		}
		attempt = 0
		select {
		case terms <- l:
			select {
			case <-l.Done():
			case <-ctx.Done():
			}
		case <-l.Done():
		case <-ctx.Done():
		}
		_ = l.Resign(ctx)
	}
}

// stopped returns the reason the candidate stops, given the error it met.
func (c *Candidate) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("election: candidate: %w", recipe.CtxErr(ctx, nil))
	}
	if sctx := c.e.st.Context(); sctx.Err() != nil {
		return context.Cause(sctx)
	}
	return err
}
