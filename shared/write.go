package shared

import (
	"context"
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Write applies ops (made with store.CreateOp, store.SetOp,
// store.DeleteOp and store.CheckOp) on st, all of them or none, only while
// h is held: the server checks, in the same atomic step, that h's node
// exists (h.Guard()). It returns one node per op, as
// store.GuardedWriter's WriteIf does: the node made, the node set with its
// new version, or the path alone for a delete or a check.
//
// When h's node is gone (the hold was released, lost with its session,
// its node deleted), Write fails with an error wrapping ErrLost and
// writes nothing; when h holds nothing, with ErrNotHeld before any I/O.
// When an op refuses (a version moved, a node missing or there already, a
// node with children), it fails with a *store.WriteError naming the op,
// wrapping that op's store sentinel (store.ErrBadVersion, store.ErrNoNode,
// ...), and writes nothing. Malformed ops (see store.ValidateWrite), a nil
// store or a nil option fail before any I/O; a store without
// store.GuardedWriter (every adapter of corral has it) fails with
// errors.ErrUnsupported.
//
// h may be held by any session, st's or another. Write blocks for one
// request and is not sent again: one that fails with store.ErrDisconnected
// may have been applied (all of its ops) or not. It fails with ctx's error
// and the session's end as every call does. A create makes a persistent
// node under an existing parent. Write is safe for concurrent use.
func Write(ctx context.Context, st store.Store, h Holder, ops []store.Op, opts ...Option) ([]store.Node, error) {
	path := "/"
	if len(ops) > 0 {
		path = ops[0].Path
	}
	o := newOptions(opts)
	switch {
	case st == nil:
		return nil, fmt.Errorf("shared: write %q: %w: nil store", store.ShortPath(path), store.ErrInvalidArgument)
	case o.nilOpt:
		return nil, fmt.Errorf("shared: write %q: %w: nil option", store.ShortPath(path), store.ErrInvalidArgument)
	}
	g, err := guardOf(h)
	if err != nil {
		return nil, fmt.Errorf("shared: write %q: %w", store.ShortPath(path), err)
	}
	guards := []store.Guard{g}
	if err := store.ValidateWrite(guards, ops); err != nil {
		return nil, fmt.Errorf("shared: write %q: %w", store.ShortPath(path), err)
	}
	rec := telemetry.New(o.tel, telemetry.KindGuarded, path, ErrLost)
	nodes, err := store.Write(ctx, st, guards, ops)
	switch {
	case err == nil:
		rec.Wrote(ctx, path, telemetry.Written, nil)
		return nodes, nil
	case errors.Is(err, store.ErrGuardFailed):
		rec.Wrote(ctx, path, telemetry.LostHold, err)
		return nil, fmt.Errorf("shared: write %q: %w: %w", store.ShortPath(path), ErrLost, err)
	case errors.Is(err, store.ErrBadVersion):
		rec.Wrote(ctx, path, telemetry.Conflict, err)
	default:
		rec.Wrote(ctx, path, telemetry.WriteFailed, err)
	}
	return nil, fmt.Errorf("shared: write %q: %w", store.ShortPath(path), recipe.CtxErr(ctx, err))
}
