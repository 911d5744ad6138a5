package partition

import (
	"context"
	"fmt"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Shard is one shard owned by a member, from its grant to its release: a
// hold like a lock's. Its Context is cancelled, with the cause, the moment
// the member must stop working on it:
//
//   - ErrReassigned: the assignment moved it to another member;
//   - ErrLeft: the member left;
//   - ErrReleased: Release was called;
//   - store.ErrSessionExpired or store.ErrClosed: the session ended;
//   - ErrDisconnected: the connection was lost (ownership unknown);
//   - ErrNodeDeleted: someone else deleted its lock node.
//
// Its methods are safe for concurrent use. The zero Shard (and a nil one)
// is owned by nobody: its Context is cancelled with ErrNotOwner, its Token
// is -1, and its Release fails with store.ErrInvalidArgument.
type Shard struct {
	id     int
	hold   *recipe.Hold
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time

	delivered   bool // in a set the caller received; guarded by the Member's mu
	releaseOnce gosync.Once
	released    chan struct{} // closed by Release
	finished    chan struct{} // closed once the lock is released
}

func newShard(id int, h *recipe.Hold) *Shard {
	ctx, cancel := context.WithCancelCause(h.Context())
	return &Shard{id: id, hold: h, ctx: ctx, cancel: cancel, start: time.Now(),
		released: make(chan struct{}), finished: make(chan struct{})}
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
// working on the shard, with the reason as its cause. Derive the contexts
// of the shard's work from it. Like a lock's, it first asks the store
// whether the session is still live: a member that ran again after a pause
// longer than its session (a stopped process, a frozen machine) finds the
// context cancelled already, before anything could have told it.
func (s *Shard) Context() context.Context {
	if s == nil || s.hold == nil {
		return notOwner
	}
	s.hold.Context()
	return s.ctx
}

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

// Release says that the work on the shard has stopped: the member releases
// its lock now instead of at the end of the grace (after a reassignment),
// or gives the shard up (while it is still assigned: its Context ends with
// ErrReleased, and the member contends for the shard again, which grants it
// with a new token). Release blocks until the lock is released, or ctx
// ends; it returns nil, or ctx's error. A later call does nothing more.
func (s *Shard) Release(ctx context.Context) error {
	if s == nil || s.hold == nil {
		return fmt.Errorf("partition: release: %w: shard not granted by a Member", store.ErrInvalidArgument)
	}
	s.releaseOnce.Do(func() {
		s.cancel(ErrReleased)
		close(s.released)
	})
	select {
	case <-s.finished:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("partition: release shard %d: %w", s.id, ctx.Err())
	}
}

// awaitRelease waits until Release is called, grace passes, hurry is
// closed or the session ends.
func (s *Shard) awaitRelease(st store.Store, grace time.Duration, hurry <-chan struct{}) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-s.released:
	case <-t.C:
	case <-hurry:
	case <-st.Context().Done():
	}
}
