package sync

import (
	"context"
	"fmt"
	gosync "sync"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// RWMutex is a distributed reader/writer lock: any number of readers or one
// writer hold it at a time, among all the RWMutex values, on any session,
// that name the same path. A Mutex on the same path counts as a writer.
// Readers and writers are served in the order they asked: a reader waits
// only for the writers that asked before it, so writers do not starve.
//
// An RWMutex is safe for concurrent use. Its goroutines exclude each other
// as those of a sync.RWMutex do: Lock calls wait for each other, and each
// RLock is a read hold of its own (its own contender node), so a reader that
// asks after a waiting writer waits for it. It is not associated with a
// goroutine. An RWMutex must not be copied after first use; the zero value
// is not usable (its methods fail with store.ErrInvalidArgument), make one
// with NewRWMutex.
//
// Holds are lost as a Mutex's are (see Mutex); the write hold's context is
// Context, and each read hold is a ReadHold with its own Context, Token and
// Unlock.
type RWMutex struct {
	w     exclusive
	rspec *recipe.Spec // of the readers
}

// NewRWMutex returns an RWMutex on the lock at path in st. It does no I/O;
// an invalid path is reported by the first call, with an error wrapping
// store.ErrInvalidPath.
func NewRWMutex(st store.Store, path string, opts ...LockOption) *RWMutex {
	o := newLockOptions(opts)
	rw := &RWMutex{rspec: o.spec(path, names.Read, recipe.LastWriter, o.recorder(telemetry.KindRead, path, ErrNodeDeleted))}
	rw.w.init(st, path, names.Write, telemetry.KindWrite, o)
	return rw
}

// Path returns the path of the lock.
func (rw *RWMutex) Path() string { return rw.ex().path }

// ex returns the write lock, or for a nil RWMutex an unusable one, whose
// methods fail with store.ErrInvalidArgument as a zero RWMutex's do.
func (rw *RWMutex) ex() *exclusive {
	if rw == nil {
		return new(exclusive)
	}
	return &rw.w
}

// Lock acquires the write lock, blocking until no reader or writer holds
// it, ctx is done or the session ends. On failure it returns an error
// (ctx.Err() wrapped when ctx ended first) and has removed its node. As
// with sync.RWMutex, a goroutine that calls Lock while holding a read hold
// of the same lock waits for itself, until ctx ends.
func (rw *RWMutex) Lock(ctx context.Context) error { return rw.ex().lock(ctx, "lock") }

// TryLock tries to acquire the write lock without waiting. It reports
// whether it got it, with a nil error when it is held by anyone.
func (rw *RWMutex) TryLock(ctx context.Context) (bool, error) { return rw.ex().tryLock(ctx, "lock") }

// Unlock releases the write lock as Mutex.Unlock does: ErrNotLocked when
// not write-held, ErrLockLost when the hold had already ended.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.ex().unlock(ctx, "unlock") }

// Context returns the context of the write hold, cancelled with a cause
// when it ends, or a context cancelled with ErrNotLocked when the write
// lock is not held.
func (rw *RWMutex) Context() context.Context { return rw.ex().context() }

// Token returns the fencing token of the write hold, or -1.
func (rw *RWMutex) Token() int64 { return rw.ex().token() }

// Guard returns the guard of the write hold's node (see store.Guard), or
// the zero Guard when the write lock is not held.
func (rw *RWMutex) Guard() store.Guard { return rw.ex().guard() }

// RLock acquires a read hold, blocking until no writer that asked before it
// holds or waits, ctx is done or the session ends. Each RLock takes a read
// hold of its own (its own contender node) and returns it; the caller must
// Unlock it. On failure it returns an error (ctx.Err() wrapped when ctx
// ended first) and has removed its node.
func (rw *RWMutex) RLock(ctx context.Context) (*ReadHold, error) {
	if err := rw.ex().usable("rlock"); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, acquireErr(ctx, "rlock", rw.w.path, nil)
	}
	h, err := recipe.Acquire(ctx, rw.w.st, rw.rspec)
	if err != nil {
		return nil, acquireErr(ctx, "rlock", rw.w.path, err)
	}
	return &ReadHold{path: rw.w.path, hold: h}, nil
}

// TryRLock tries to acquire a read hold without waiting. It returns the
// hold and true when it got one, nil and false (with a nil error) when a
// writer holds or waits before it, and an error when the store failed.
func (rw *RWMutex) TryRLock(ctx context.Context) (*ReadHold, bool, error) {
	if err := rw.ex().usable("tryrlock"); err != nil {
		return nil, false, err
	}
	h, err := recipe.TryAcquire(ctx, rw.w.st, rw.rspec)
	if err != nil {
		return nil, false, acquireErr(ctx, "tryrlock", rw.w.path, err)
	}
	if h == nil {
		return nil, false, nil
	}
	return &ReadHold{path: rw.w.path, hold: h}, true, nil
}

// ReadHold is one read hold of an RWMutex, held from RLock (or a TryRLock
// that got it) until its Unlock. Each read hold has its own context and
// token, so a goroutine does the work of its own hold under that hold's
// context. Its methods are safe for concurrent use. Only RLock and TryRLock
// make usable read holds: a nil or zero ReadHold's Context is cancelled
// with ErrNotLocked, its Token is -1 and its Unlock fails with
// store.ErrInvalidArgument.
//
// A read hold is lost as a Mutex's hold is (see Mutex); Context is then
// cancelled with the reason, and Unlock returns an error wrapping
// ErrLockLost.
type ReadHold handle

// Context returns a context that is cancelled the moment the read hold
// ends, with the reason as its cause: ErrUnlocked, ErrNodeDeleted,
// ErrDisconnected, store.ErrSessionExpired or store.ErrClosed.
func (r *ReadHold) Context() context.Context { return (*handle)(r).context() }

// Token returns the read hold's fencing token, its node's
// (store.Node.Fence), or -1 for a nil or zero ReadHold.
func (r *ReadHold) Token() int64 { return (*handle)(r).token() }

// Guard returns the guard of the read hold's node, for a write that must
// be applied only while it is held (see store.Guard); the zero Guard for
// a nil or zero ReadHold.
func (r *ReadHold) Guard() store.Guard { return (*handle)(r).guard() }

// Unlock releases the read hold and removes its node, as Mutex.Unlock does:
// the hold ends at once; a removal the connection does not allow returns an
// error wrapping store.ErrDisconnected and is left to the session, and a
// second Unlock waits for it as the first did. It returns an error wrapping
// ErrLockLost and the cause when the hold had already ended, and one
// wrapping ErrNotLocked, touching nothing, when it was unlocked already.
func (r *ReadHold) Unlock(ctx context.Context) error {
	if !(*handle)(r).granted() {
		return opErr("runlock", "", fmt.Errorf("%w: read hold not granted by an RWMutex", store.ErrInvalidArgument))
	}
	return (*handle)(r).release(ctx, "runlock", ErrUnlocked, ErrNotLocked, ErrLockLost)
}

// Locker returns a sync.Locker on the write lock; it panics on failure as
// Mutex.Locker's does.
func (rw *RWMutex) Locker() gosync.Locker {
	return locker{lock: rw.Lock, unlock: rw.Unlock}
}

// RLocker returns a sync.Locker whose Lock takes a read hold with RLock
// and whose Unlock releases one of the read holds that Locker took, with
// context.Background(); both panic with the error on failure as
// Mutex.Locker's do (Unlock with none held: ErrNotLocked). A Locker's read
// holds are interchangeable, as it exposes none of their contexts.
func (rw *RWMutex) RLocker() gosync.Locker {
	var (
		mu    gosync.Mutex
		holds []*ReadHold
	)
	return locker{
		lock: func(ctx context.Context) error {
			r, err := rw.RLock(ctx)
			if err == nil {
				mu.Lock()
				holds = append(holds, r)
				mu.Unlock()
			}
			return err
		},
		unlock: func(ctx context.Context) error {
			mu.Lock()
			if len(holds) == 0 {
				mu.Unlock()
				if err := rw.ex().usable("runlock"); err != nil {
					return err
				}
				return opErr("runlock", rw.w.path, ErrNotLocked)
			}
			r := holds[len(holds)-1]
			holds = holds[:len(holds)-1]
			mu.Unlock()
			return r.Unlock(ctx)
		},
	}
}
