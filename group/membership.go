package group

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Join makes st's session a member of the group at path, with value as what
// watchers see of it, and returns the membership. It blocks for a few round
// trips: there is nothing to wait for. A lost connection is waited out while
// ctx and the session live.
//
// It fails with an error wrapping store.ErrInvalidArgument for a nil st or
// an unknown policy, store.ErrInvalidPath for a path no group can have (the
// root, say), store.ErrTooLarge for a value over store.MaxDataSize,
// ErrKindMismatch when path holds another recipe's nodes, ctx.Err() when ctx
// ends first, and the session's cause when it has ended. A failed Join
// leaves no node behind. Join is safe for concurrent use; several joins of
// one session are several members.
func Join(ctx context.Context, st store.Store, path string, value []byte, opts ...JoinOption) (*Membership, error) {
	o := newOptions(opts)
	if err := o.check(st, path); err != nil {
		return nil, joinErr(ctx, path, err)
	}
	if err := store.ValidateData(value); err != nil {
		return nil, joinErr(ctx, path, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, joinErr(ctx, path, err)
	}
	spec := &recipe.Spec{
		Dir: path, Prefix: names.GroupMember, Order: recipe.Unordered,
		Data: func(time.Time) []byte { return value },
		Rec:  telemetry.New(o.tel, telemetry.KindGroup, path, ErrNodeDeleted),
		Hold: recipe.HoldOptions{Deleted: ErrNodeDeleted},
	}
	if o.policy == LoseOnDisconnect {
		spec.Hold.Disconnected = ErrDisconnected
	}
	h, err := recipe.Acquire(ctx, st, spec)
	if err != nil {
		return nil, joinErr(ctx, path, recipe.SessionErr(st, err))
	}
	return &Membership{hold: h, st: st, value: bytes.Clone(value)}, nil
}

func joinErr(ctx context.Context, path string, err error) error {
	return fmt.Errorf("group: join %q: %w", store.ShortPath(path), recipe.CtxErr(ctx, err))
}

// Membership is one member of a group, from Join to its end. It ends when it
// is left or lost, and cannot outlive either: the moment it ends, Done is
// closed and Context is cancelled with one of these causes (see
// context.Cause):
//
//   - ErrLeft: Leave was called;
//   - store.ErrSessionExpired or store.ErrClosed: the session ended, and
//     with it the node;
//   - ErrNodeDeleted: the node was deleted by someone else;
//   - ErrDisconnected: the connection was lost under LoseOnDisconnect.
//
// Its methods are safe for concurrent use. A Membership watches its node
// with one goroutine, which exits when the membership ends; Leave waits for
// it. Call Leave in every case, even after the membership was lost: a
// member that lost its connection still has a node, which watchers list
// until it is removed or the session ends.
//
// Only Join makes a usable Membership: the zero Membership (and a nil one)
// has ended (its Context is cancelled with ErrNotMember, its Token is -1)
// and its Leave fails with store.ErrInvalidArgument.
type Membership struct {
	hold *recipe.Hold
	st   store.Store

	mu    gosync.Mutex // guards value
	value []byte       // the node's data, as this member last wrote it
}

// notMember is the Context of the zero Membership.
var notMember = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotMember)
	return ctx
}()

// Context returns a context that is cancelled when the membership ends, with
// the reason as its cause.
func (m *Membership) Context() context.Context {
	if m == nil || m.hold == nil {
		return notMember
	}
	return m.hold.Context()
}

// Done returns a channel that is closed when the membership ends.
func (m *Membership) Done() <-chan struct{} { return m.Context().Done() }

// Token returns the member's fencing token, its node's (store.Node.Fence:
// the Seq, on ZooKeeper plus the directory's creation zxid): every member
// that joins the group later has a greater one, even after the group's
// directory was removed and made again. It is -1 for the
// zero Membership.
func (m *Membership) Token() int64 {
	if m == nil || m.hold == nil {
		return -1
	}
	return m.hold.Token()
}

// Guard returns the guard of the member's node, for a write that must be
// applied only while the membership lasts (see store.Guard); the zero
// Guard for the zero Membership.
func (m *Membership) Guard() store.Guard {
	if m == nil || m.hold == nil {
		return store.Guard{}
	}
	return m.hold.Guard()
}

// Path returns the path of the member's node ("" for the zero Membership).
func (m *Membership) Path() string {
	if m == nil || m.hold == nil {
		return ""
	}
	return m.hold.Node().Path
}

// Value returns the member's value: the one it joined with, or the last
// one SetValue set.
func (m *Membership) Value() []byte {
	if m == nil || m.hold == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.value)
}

// SetValue changes the member's value to value, as Curator's GroupMember
// setThisData does: every Watcher of the group then sends a member list
// with the new value. The write is guarded by the member's node (see
// Guard): it is applied only while that node exists. It blocks for one
// request and does not retry: a lost connection fails it with an error
// wrapping store.ErrDisconnected, and the value may then have been set or
// not (call it again). SetValues of one Membership are applied in turn.
//
// It fails with an error wrapping store.ErrInvalidArgument for the zero
// Membership, store.ErrTooLarge for a value over store.MaxDataSize,
// ctx's error when ctx ends first, and, once the membership has ended,
// the cause of its end (ErrLeft, ErrNodeDeleted, ErrDisconnected,
// store.ErrSessionExpired or store.ErrClosed; see Context). A node
// deleted by someone else fails it with ErrNodeDeleted before the
// membership's watch reports it. It is safe for concurrent use.
func (m *Membership) SetValue(ctx context.Context, value []byte) error {
	if m == nil || m.hold == nil {
		return fmt.Errorf("group: set value: %w: membership not made by Join", store.ErrInvalidArgument)
	}
	path := m.Path()
	if err := store.ValidateData(value); err != nil {
		return fmt.Errorf("group: set value %q: %w", store.ShortPath(path), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if hctx := m.hold.Context(); hctx.Err() != nil {
		return fmt.Errorf("group: set value %q: %w", store.ShortPath(path), context.Cause(hctx))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("group: set value %q: %w", store.ShortPath(path), recipe.CtxErr(ctx, err))
	}
	// Guarded by the member's own node: a node made at the same name
	// since (etcd names a session's nodes again) is not written.
	_, err := store.Write(ctx, m.st, []store.Guard{m.hold.Guard()}, []store.Op{store.SetOp(path, value, store.AnyVersion)})
	switch {
	case err == nil:
		m.value = bytes.Clone(value)
		return nil
	case errors.Is(err, store.ErrGuardFailed), errors.Is(err, store.ErrNoNode):
		err = ErrNodeDeleted
	}
	if hctx := m.hold.Context(); hctx.Err() != nil {
		err = context.Cause(hctx) // the session's end, say: the hold knows why
	}
	return fmt.Errorf("group: set value %q: %w", store.ShortPath(path), recipe.CtxErr(ctx, err))
}

// Leave ends the membership with cause ErrLeft, if it has not ended already,
// and removes the member's node; Done is closed before the node goes. It
// blocks until the node is gone, across a lost connection, until ctx ends,
// and then for a grace of a second (recipe.CleanupGrace); a node still there
// then is removed by the session as soon as the connection allows, and
// Leave returns an error wrapping store.ErrDisconnected. Leave is
// idempotent: a later call returns nil once the node is gone or the session
// has ended. A membership lost before Leave is not an error of Leave: its
// Context says why it ended.
func (m *Membership) Leave(ctx context.Context) error {
	if m == nil || m.hold == nil {
		return fmt.Errorf("group: leave: %w: membership not made by Join", store.ErrInvalidArgument)
	}
	if _, err := m.hold.Release(ctx, ErrLeft); err != nil && !errors.Is(err, holderr.ErrReleased) {
		return fmt.Errorf("group: leave %q: %w", store.ShortPath(m.Path()), err)
	}
	return nil
}
