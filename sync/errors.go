package sync

import (
	"errors"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/recipe"
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
