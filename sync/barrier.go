package sync

import (
	"context"
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Barrier is a distributed barrier: while its node exists, every process
// that calls Wait is held back; removing the node releases them all at once.
// It is the ZooKeeper recipe's simple barrier, and works like Curator's
// DistributedBarrier: the node is persistent, so a barrier outlives the
// session that set it and must be removed explicitly.
//
// A Barrier is a handle holding a store and a path; it keeps no other state,
// so it is safe for concurrent use and any number of handles, on any number
// of sessions, may name the same barrier. The zero value is not usable;
// make one with NewBarrier.
type Barrier struct {
	st   store.Store
	path string
}

// NewBarrier returns a handle on the barrier whose node is at path in st. It
// does no I/O; an invalid path (or the root, which cannot be created) is
// reported by the first call that uses it, with an error wrapping
// store.ErrInvalidPath, and a nil st with store.ErrInvalidArgument.
func NewBarrier(st store.Store, path string) *Barrier {
	return &Barrier{st: st, path: path}
}

// usable reports a Barrier without a store or with a path no barrier can
// have.
func (b *Barrier) usable(op string) error {
	var err error
	switch {
	case b == nil || b.st == nil:
		err = fmt.Errorf("%w: barrier not made by NewBarrier with a store", store.ErrInvalidArgument)
	case b.path == "/":
		err = fmt.Errorf("%w %q: the root cannot be a barrier", store.ErrInvalidPath, store.ShortPath(b.path))
	default:
		err = store.ValidatePath(b.path)
	}
	if err != nil {
		return fmt.Errorf("sync: %s barrier %q: %w", op, store.ShortPath(b.Path()), err)
	}
	return nil
}

// Path returns the path of the barrier's node.
func (b *Barrier) Path() string {
	if b == nil {
		return ""
	}
	return b.path
}

// Set raises the barrier by creating its node, and its missing parents. It
// does not wait for anything but the store. Setting a barrier that is already
// set does nothing and returns nil, so a Set that failed with
// store.ErrDisconnected (whose outcome is unknown) can simply be retried.
// When ctx ends first it returns an error wrapping ctx.Err() and its cause.
func (b *Barrier) Set(ctx context.Context) error {
	if err := b.usable("set"); err != nil {
		return err
	}
	_, err := b.st.Create(ctx, b.path, nil, store.Persistent)
	switch {
	case err == nil, errors.Is(err, store.ErrNodeExists):
		return nil
	}
	return fmt.Errorf("sync: set barrier %q: %w", store.ShortPath(b.path), recipe.CtxErr(ctx, err))
}

// Remove lowers the barrier by deleting its node, which releases every
// waiter. Removing a barrier that is not set does nothing and returns nil. It
// fails with an error wrapping store.ErrNotEmpty if someone created children
// under the barrier's node. When ctx ends first it returns an error wrapping ctx.Err() and its cause.
func (b *Barrier) Remove(ctx context.Context) error {
	if err := b.usable("remove"); err != nil {
		return err
	}
	err := b.st.Delete(ctx, b.path)
	switch {
	case err == nil, errors.Is(err, store.ErrNoNode):
		return nil
	}
	return fmt.Errorf("sync: remove barrier %q: %w", store.ShortPath(b.path), recipe.CtxErr(ctx, err))
}

// Wait blocks until the barrier is not set, and returns nil at once if it is
// not set now. It watches the barrier's node and checks again after every
// event, so a barrier removed and set again while the watch was on its way
// holds the caller back again. It rides out a lost connection while the
// session lives.
//
// Wait returns an error wrapping ctx.Err() (and its cause) when ctx ends first, and an error wrapping the
// session's cause (store.ErrSessionExpired or store.ErrClosed) when the
// session ends: it never hangs on a lost session. Wait leaves nothing behind
// in the store.
func (b *Barrier) Wait(ctx context.Context) error {
	if err := b.usable("wait on"); err != nil {
		return err
	}
	err := recipe.WaitAbsent(ctx, b.st, b.path)
	if err == nil {
		return nil
	}
	return fmt.Errorf("sync: wait on barrier %q: %w", store.ShortPath(b.path), recipe.CtxErr(ctx, err))
}

// barrierAwait waits for the one event of a watch, for ctx and for the end of
// the session, whichever comes first. It returns nil when the watch reported
// a change and the reason otherwise.
func barrierAwait(ctx context.Context, st store.Store, ev <-chan store.Event) error {
	select {
	case e := <-ev:
		return e.Err
	case <-ctx.Done():
		return ctx.Err()
	case <-st.Context().Done():
		return context.Cause(st.Context())
	}
}
