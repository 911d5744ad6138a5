package partition

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Shard is one shard owned by a member, from its grant to its release: a
// hold like a lock's, handed to the function Run calls. Its Context is
// cancelled, with the cause, the moment the member must stop working on
// it:
//
//   - ErrReassigned: the assignment moved it to another member;
//   - ErrLeft: the member left (Leave, or the end of Run's ctx);
//   - the error another shard's function returned: the member stops;
//   - store.ErrSessionExpired or store.ErrClosed: the session ended;
//   - ErrDisconnected: the connection was lost (ownership unknown);
//   - ErrNodeDeleted: someone else deleted its lock node;
//   - ErrReleased: its function returned, giving the shard back.
//
// Its methods are safe for concurrent use. The zero Shard (and a nil one)
// is owned by nobody: its Context is cancelled with ErrNotOwner, its Token
// is -1.
type Shard struct {
	id     int
	hold   *recipe.Hold
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time
}

func newShard(id int, h *recipe.Hold) *Shard {
	ctx, cancel := context.WithCancelCause(h.Context())
	return &Shard{id: id, hold: h, ctx: ctx, cancel: cancel, start: time.Now()}
}

// ID returns the shard's number, in [0, K).
func (s *Shard) ID() int {
	if s == nil {
		return -1
	}
	return s.id
}

// notOwner is the Context of the zero Shard.
var notOwner = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotOwner)
	return ctx
}()

// Context returns a context that is cancelled when the member must stop
// working on the shard, with the reason as its cause; the function Run
// calls gets it. Like a lock's, it first asks the store whether the session
// is still live: a member that ran again after a pause longer than its
// session (a stopped process, a frozen machine) finds the context
// cancelled already, before anything could have told it.
func (s *Shard) Context() context.Context {
	if s == nil || s.hold == nil {
		return notOwner
	}
	s.hold.Context()
	return s.ctx
}

// checked is the context the function working on s gets: s's, whose Done
// and Err ask the store first, as Context does, so that a function that
// looks at its context after a pause past its session finds it ended.
type checked struct {
	context.Context
	s *Shard
}

func (c checked) Done() <-chan struct{} { return c.s.Context().Done() }
func (c checked) Err() error            { return c.s.Context().Err() }

// Done returns a channel that is closed when the member must stop working
// on the shard.
func (s *Shard) Done() <-chan struct{} { return s.Context().Done() }

// Token returns the shard's fencing token: the owner's lock node's
// (store.Node.Fence: the Seq, on ZooKeeper plus the directory's creation
// zxid), greater than that of every earlier owner of the shard (tokens
// compare only within one shard). It is -1 for the zero Shard.
func (s *Shard) Token() int64 {
	if s == nil || s.hold == nil {
		return -1
	}
	return s.hold.Token()
}

// Guard returns the guard of the shard's lock node, for a write that must
// be applied only while the member owns the shard (see store.Guard); the
// zero Guard for the zero Shard.
func (s *Shard) Guard() store.Guard {
	if s == nil || s.hold == nil {
		return store.Guard{}
	}
	return s.hold.Guard()
}

// Since returns when the member was granted the shard.
func (s *Shard) Since() time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.start
}

func (s *Shard) String() string {
	if s == nil || s.hold == nil {
		return "shard (none)"
	}
	return fmt.Sprintf("shard %d (token %d)", s.id, s.hold.Token())
}
