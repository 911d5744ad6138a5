package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-go/corral/internal/recipe"
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
		return nil, fmt.Errorf("election: campaign %q: %w", store.ShortPath(e.Path()), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("election: campaign %q: %w", store.ShortPath(e.path), err)
	}
	spec := &recipe.Spec{
		Dir: e.path, Prefix: prefix, Order: recipe.Predecessor, Rec: e.rec,
		Data: func(time.Time) []byte { return value },
		Hold: recipe.HoldOptions{Deleted: ErrNodeDeleted},
	}
	if e.opts.policy == LoseOnDisconnect {
		spec.Hold.Disconnected = ErrDisconnected
	}
	h, err := recipe.Acquire(ctx, e.st, spec)
	if err != nil {
		return nil, e.campaignErr(ctx, err)
	}
	return &Leadership{e: e, hold: h, value: h.Node().Data}, nil
}

// campaignErr wraps the error of a failed campaign; when the session has
// ended, or ctx, the error says so.
func (e *Election) campaignErr(ctx context.Context, err error) error {
	recipe.SyncSession(e.st)
	err = recipe.CtxErr(ctx, err)
	if sctx := e.st.Context(); sctx.Err() != nil && !errors.Is(err, context.Cause(sctx)) {
		err = fmt.Errorf("%w (%w)", context.Cause(sctx), err)
	}
	return fmt.Errorf("election: campaign %q: %w", store.ShortPath(e.path), err)
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

// check reports an Election or a value a campaign cannot use.
func (e *Election) check(value []byte) error {
	if err := e.validate(); err != nil {
		return err
	}
	return store.ValidateData(value)
}
