package sync

import (
	"context"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// handle is what a handle on one hold (a ReadHold, a Lease) is made of: the
// recipe's Hold, and the path of the primitive that granted it. A nil or
// zero handle holds nothing.
type handle struct {
	path string
	hold *recipe.Hold
}

// granted reports whether h was granted a hold.
func (h *handle) granted() bool { return h != nil && h.hold != nil }

// context returns the hold's Context, or one cancelled with ErrNotLocked.
func (h *handle) context() context.Context {
	if !h.granted() {
		return notHeld
	}
	return h.hold.Context()
}

// guard returns the hold's guard, or the zero Guard.
func (h *handle) guard() store.Guard {
	if !h.granted() {
		return store.Guard{}
	}
	return h.hold.Guard()
}

// token returns the hold's fencing token, or -1.
func (h *handle) token() int64 {
	if !h.granted() {
		return -1
	}
	return h.hold.Token()
}

// release releases the granted hold with cause, and again's error when it
// was released before (see recipe.Hold.Release); a loss before the release
// is reported wrapped in lostAs, all as op's error.
func (h *handle) release(ctx context.Context, op string, cause, again, lostAs error) error {
	lost, err := release(ctx, h.hold, cause, again)
	return releaseErr(op, h.path, lostAs, lost, err)
}
