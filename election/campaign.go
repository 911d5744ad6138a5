package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Campaign makes the caller a candidate with value as its proclaimed value
// (its identity or address, say) and blocks until it leads, ctx ends or the
// session ends. It returns the leadership, which lasts until it is resigned
// or lost; see [Leadership].
//
// If ctx ends first, Campaign returns an error wrapping ctx.Err() and leaves
// no node behind: the candidate's node is removed on a context detached from
// ctx, within a bound. If the session ends first, the error wraps its cause
// (store.ErrSessionExpired or store.ErrClosed); if the candidate's node is
// deleted by someone else while it waits, the error wraps ErrNodeDeleted.
// A lost connection while waiting is waited out (bounded by ctx), since the
// session and its node may survive it; under LoseOnDisconnect leadership is
// not reported while the connection is down.
//
// Campaign is safe for concurrent use; concurrent campaigns through one
// Election are distinct candidates of one session.
func (e *Election) Campaign(ctx context.Context, value []byte) (*Leadership, error) {
	if err := e.check(value); err != nil {
		return nil, fmt.Errorf("election: campaign %q: %w", e.Path(), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("election: campaign %q: %w", e.path, err)
	}
	a := e.rec.Begin(ctx)
	for attempt := 0; ; attempt++ {
		n, waited, err := recipe.AcquireWaited(ctx, e.st, e.rec, e.path, prefix, value, recipe.Predecessor)
		if err == nil {
			l, cerr := e.claim(ctx, n, waited, a)
			if cerr == nil {
				return l, nil
			}
			err = errors.Join(cerr, recipe.Remove(ctx, e.st, e.rec, n))
		}
		// A connection lost at the wrong moment (between a create and
		// its listing, say) costs the candidate its place in line but
		// not its campaign: the node is gone, start again.
		if !e.transient(ctx, err) {
			a.Failed(ctx, err)
			return nil, e.campaignErr(ctx, err)
		}
		if werr := recipe.Pause(ctx, e.st, attempt); werr != nil {
			a.Failed(ctx, werr)
			return nil, e.campaignErr(ctx, werr)
		}
	}
}

// campaignErr wraps the error of a failed campaign; when the session has
// ended, or ctx, the error says so.
func (e *Election) campaignErr(ctx context.Context, err error) error {
	recipe.SyncSession(e.st)
	err = recipe.CtxErr(ctx, err)
	if sctx := e.st.Context(); sctx.Err() != nil && !errors.Is(err, context.Cause(sctx)) {
		err = fmt.Errorf("%w (%w)", context.Cause(sctx), err)
	}
	if errors.Is(err, store.ErrNoNode) && e.st.Context().Err() == nil {
		return fmt.Errorf("election: campaign %q: %w: %w", e.path, ErrNodeDeleted, err)
	}
	return fmt.Errorf("election: campaign %q: %w", e.path, err)
}

// claim turns the granted node n into a leadership. Under LoseOnDisconnect
// it confirms the grant again (recipe.Confirm: a lost connection is waited
// out, and n then checked to be still there and this session's), so that
// leadership is never reported while ownership is unknown.
func (e *Election) claim(ctx context.Context, n store.Node, waited bool, a telemetry.Attempt) (*Leadership, error) {
	opts := recipe.HoldOptions{Deleted: ErrNodeDeleted, Front: waited} // see recipe.AcquireWaited
	if e.opts.policy == LoseOnDisconnect {
		opts.Disconnected = ErrDisconnected
		if err := recipe.Confirm(ctx, e.st, n); err != nil {
			return nil, err
		}
	}
	opts.OnEnd, opts.Rec = a.Granted(ctx, n).End, e.rec
	return &Leadership{
		e:     e,
		hold:  recipe.NewHold(e.st, n, opts),
		value: n.Data,
	}, nil
}

// alive returns ctx's error or the session's cause, if either has ended.
func (e *Election) alive(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if sctx := e.st.Context(); sctx.Err() != nil {
		return context.Cause(sctx)
	}
	return nil
}

// transient reports whether err is a lost connection that is worth waiting
// out: ctx and the session are still alive.
func (e *Election) transient(ctx context.Context, err error) bool {
	return errors.Is(err, store.ErrDisconnected) && e.alive(ctx) == nil
}

// check reports an Election or a value a campaign cannot use.
func (e *Election) check(value []byte) error {
	if err := e.validate(); err != nil {
		return err
	}
	return store.ValidateData(value)
}
