package recipe

import (
	"context"
	"errors"
	gosync "sync"
)

// ReleaseOnce makes the release of a Hold idempotent for a handle the
// caller may release more than once (a semaphore's Lease, a Stripe): the
// first Release releases the hold; a later one fails with the caller's
// sentinel and touches nothing, unless the removal of the node was left
// pending (ErrRemovalPending), which it then tries again. The zero value is
// ready to use; it must not be copied after first use.
type ReleaseOnce struct {
	mu       gosync.Mutex
	released bool
	pending  bool // the last release could not remove the node yet
}

// Release releases h with cause (see Hold.Release) the first time, and
// returns again when h was released before and its node removed. lost is
// the cause of an end before the first release, reported by that release
// only; err is what could not be removed.
func (o *ReleaseOnce) Release(ctx context.Context, h *Hold, cause, again error) (lost, err error) {
	o.mu.Lock()
	before, pending := o.released, o.pending
	o.released = true
	o.mu.Unlock()
	if before && !pending {
		return nil, again
	}
	lost, err = h.Release(ctx, cause)
	o.mu.Lock()
	o.pending = errors.Is(err, ErrRemovalPending)
	o.mu.Unlock()
	if before {
		lost = nil // reported by the first release
	}
	return lost, err
}
