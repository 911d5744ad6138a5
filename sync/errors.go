package sync

import (
	"context"
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Errors of every hold of this package: a Mutex's, an RWMutex's, a
// ReadHold, a Lease, a Stripe, a MultiMutex's. The ones a hold reports as
// the cause of its context (context.Cause) are ErrUnlocked,
// ErrNodeDeleted, ErrDisconnected, store.ErrSessionExpired and
// store.ErrClosed.
var (
	// ErrNotLocked: Unlock of a lock this value (or this ReadHold, this
	// Stripe) does not hold. Nothing is deleted.
	ErrNotLocked = errors.New("sync: not locked")
	// ErrLockLost: Unlock (or a Lease's Release) of a hold that had
	// already ended before it (session expired, node deleted, connection
	// lost). The error also wraps the cause, and the critical section may
	// not have been exclusive to its end.
	ErrLockLost = holderr.ErrLost
	// ErrUnlocked is the cause of a hold's context after Unlock (or a
	// Lease's Release), and the error of a Lease's second Release.
	ErrUnlocked = holderr.ErrReleased
	// ErrNodeDeleted is the cause of a hold's context when someone else
	// deleted its contender node while the session lived, and the error
	// of a waiter, or a double barrier's member, whose node was deleted.
	ErrNodeDeleted = holderr.ErrNodeDeleted
	// ErrDisconnected is the cause of a hold's context when the connection
	// was lost under the LoseOnDisconnect policy. It wraps
	// store.ErrDisconnected.
	ErrDisconnected = holderr.ErrDisconnected
)

// ErrKindMismatch: a lock, semaphore or double barrier found the nodes of
// another kind of recipe under its path (a Mutex where a Semaphore holds its
// leases, say: they would not exclude each other). The call fails, and
// leaves no node behind. election.ErrKindMismatch and
// queue.ErrKindMismatch are the same error.
var ErrKindMismatch = recipe.ErrKindMismatch

// release releases h with cause (recipe.Hold.Release), and reports a
// release of a hold released already as again.
func release(ctx context.Context, h *recipe.Hold, cause, again error) (lost, err error) {
	lost, err = h.Release(ctx, cause)
	if errors.Is(err, holderr.ErrReleased) {
		err = again
	}
	return lost, err
}

// releaseErr reports the outcome of a release (see release) as every
// Unlock and Release does: a hold that ended before its release as lostAs
// (ErrLockLost) with the cause, beside what could not be
// removed.
func releaseErr(op, path string, lostAs, lost, err error) error {
	if lost != nil {
		return opErr(op, path, errors.Join(fmt.Errorf("%w: %w", lostAs, lost), err))
	}
	if err != nil {
		return opErr(op, path, err)
	}
	return nil
}

// acquireErr reports a failed acquisition, matching ctx.Err() and its cause
// when ctx ended (and keeping what else went wrong, such as a cleanup left
// to the session).
func acquireErr(ctx context.Context, op, path string, err error) error {
	return opErr(op, path, recipe.CtxErr(ctx, err))
}

func opErr(op, path string, err error) error {
	return fmt.Errorf("sync: %s %q: %w", op, store.ShortPath(path), err)
}
