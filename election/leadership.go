package election

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Leadership is one term of leadership won by a campaign. It ends when it is
// resigned or lost, and cannot outlive either: the moment it ends, Done is
// closed and Context is cancelled, with one of these causes (see
// context.Cause):
//
//   - ErrResigned: Resign was called (or the Candidate holding it stopped);
//   - store.ErrSessionExpired or store.ErrClosed: the session ended, and
//     with it the node;
//   - ErrNodeDeleted: the node was deleted by someone else;
//   - ErrDisconnected: the connection was lost under LoseOnDisconnect.
//
// Its methods are safe for concurrent use. A Leadership watches its node
// with one goroutine, which exits when the leadership ends; Resign waits for
// it. Call Resign when done with a Leadership in every case, even after it
// was lost: a leader that lost its connection still has a node, which
// blocks the others until it is removed or the session ends.
//
// Only a campaign makes a usable Leadership: a nil or zero Leadership has
// ended (its Context is cancelled with ErrNotLeader, its Token is -1) and
// its Resign and Proclaim fail with store.ErrInvalidArgument.
type Leadership struct {
	e    *Election
	hold *recipe.Hold

	mu    gosync.Mutex
	value []byte
}

// Done returns a channel that is closed when the leadership ends.
func (l *Leadership) Done() <-chan struct{} { return l.Context().Done() }

// Context returns a context that is cancelled when the leadership ends, with
// the reason as its cause. Derive the contexts of leader-only work from it.
func (l *Leadership) Context() context.Context {
	if l == nil || l.hold == nil {
		return notLeader
	}
	return l.hold.Context()
}

// notLeader is the Context of the zero Leadership.
var notLeader = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotLeader)
	return ctx
}()

// Token returns the fencing token of this term: the leader's node's
// (store.Node.Fence: the Seq, on ZooKeeper plus the directory's creation
// zxid). Each new term of the election has a greater token than every
// earlier one, so storage that remembers the greatest token it has seen can
// reject a deposed leader's writes. Tokens compare only within one election
// path, and may start at 0 (ZooKeeper's first sequence number).
func (l *Leadership) Token() int64 {
	if l == nil || l.hold == nil {
		return -1
	}
	return l.hold.Token()
}

// Guard returns the guard of the leader's node, for a write that must be
// applied only while this term lasts (see store.Guard); the zero Guard
// for the zero Leadership.
func (l *Leadership) Guard() store.Guard {
	if l == nil || l.hold == nil {
		return store.Guard{}
	}
	return l.hold.Guard()
}

// Path returns the path of the leader's node ("" for the zero Leadership).
func (l *Leadership) Path() string {
	if l == nil || l.hold == nil {
		return ""
	}
	return l.hold.Node().Path
}

// Value returns the value last proclaimed by this leader.
func (l *Leadership) Value() []byte {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.value...)
}

// Resign ends the leadership with cause ErrResigned, if it has not ended
// already, and then removes the leader's node so that the next candidate
// leads. Done is closed before the node is removed, so the next leader is
// never told before the old one knows.
//
// Resign blocks until the node is gone, across a lost connection, until ctx
// ends; once ctx has ended it still tries for a short grace (one second,
// recipe.CleanupGrace), so that a cancelled ctx still removes the node on a
// working connection. If the node is still there then, Resign returns an
// error wrapping store.ErrDisconnected and the session removes the node as
// soon as the connection allows (while it lives; its end takes the node
// with it). Resign is idempotent: a later call tries the removal again, and
// returns nil once the node is gone or the session has ended.
func (l *Leadership) Resign(ctx context.Context) error {
	if l == nil || l.hold == nil {
		return fmt.Errorf("election: resign: %w: leadership not won by a campaign", store.ErrInvalidArgument)
	}
	if _, err := l.hold.Release(ctx, ErrResigned); err != nil && !errors.Is(err, holderr.ErrReleased) {
		return fmt.Errorf("election: resign: %w", err)
	}
	return nil
}

// Proclaim replaces the leader's value, as observers see it, without a new
// election. It blocks until the store has applied it or ctx ends, waiting
// out a lost connection while the leadership lasts. It fails with
// ErrNotLeader when the leadership has ended; the value may still have been
// written if the leadership ended during the call.
func (l *Leadership) Proclaim(ctx context.Context, value []byte) error {
	if l == nil || l.hold == nil {
		return fmt.Errorf("election: proclaim: %w: leadership not won by a campaign", store.ErrInvalidArgument)
	}
	if err := store.ValidateData(value); err != nil {
		return fmt.Errorf("election: proclaim: %w", err)
	}
	lctx := l.Context()
	for attempt := 0; ; attempt++ {
		if lctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrNotLeader, context.Cause(lctx))
		}
		_, err := l.e.st.Set(ctx, l.Path(), value, store.AnyVersion)
		if err == nil {
			break
		}
		if errors.Is(err, store.ErrNoNode) {
			return fmt.Errorf("%w: %w", ErrNotLeader, ErrNodeDeleted)
		}
		// Setting the own node again is harmless, so a lost connection
		// is waited out while the leadership lasts (KeepOnDisconnect).
		if !errors.Is(err, store.ErrDisconnected) || ctx.Err() != nil {
			return fmt.Errorf("election: proclaim: %w", err)
		}
		if werr := recipe.Pause(ctx, l.e.st, attempt); werr != nil {
			return fmt.Errorf("election: proclaim: %w", err)
		}
	}
	l.mu.Lock()
	l.value = append([]byte(nil), value...)
	l.mu.Unlock()
	return nil
}
