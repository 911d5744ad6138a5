package sync

import (
	"context"
	"errors"
	"slices"
	gosync "sync"

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
// Context and that of a read hold RContext.
type RWMutex struct {
	w    exclusive
	opts lockOptions
	rrec *telemetry.Recorder // of the readers

	mu     gosync.Mutex
	rholds []*recipe.Hold // read holds, oldest first
	// rpending are the nodes of read releases whose removal could not
	// finish, oldest first: RUnlock removes them before it reports
	// ErrNotLocked.
	rpending []store.Node
}

// NewRWMutex returns an RWMutex on the lock at path in st. It does no I/O;
// an invalid path is reported by the first call, with an error wrapping
// store.ErrInvalidPath.
func NewRWMutex(st store.Store, path string, opts ...LockOption) *RWMutex {
	o := newLockOptions(opts)
	rw := &RWMutex{opts: o, rrec: o.recorder(telemetry.KindRead, path, ErrNodeDeleted)}
	rw.w.init(st, path, recipe.WritePrefix, telemetry.KindWrite, o)
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

// RLock acquires a read hold, blocking until no writer that asked before it
// holds or waits, ctx is done or the session ends. Each RLock takes a read
// hold of its own, released by one RUnlock. On failure it returns an error
// (ctx.Err() wrapped when ctx ended first) and has removed its node.
func (rw *RWMutex) RLock(ctx context.Context) error {
	if err := rw.ex().usable("rlock"); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return acquireErr(ctx, "rlock", rw.w.path, nil)
	}
	a := rw.rrec.Begin(ctx)
	tctx := telemetry.NewContext(ctx, rw.rrec)
	n, err := recipe.Acquire(tctx, rw.w.st, rw.w.path, recipe.ReadPrefix, rw.opts.nodeData(a.Start()), recipe.LastWriter)
	if err != nil {
		a.Failed(ctx, err)
		return acquireErr(ctx, "rlock", rw.w.path, err)
	}
	rw.rgrant(n, a.Granted(ctx, n))
	return nil
}

// TryRLock tries to acquire a read hold without waiting. It reports whether
// it got it, with a nil error when a writer holds or waits before it.
func (rw *RWMutex) TryRLock(ctx context.Context) (bool, error) {
	if err := rw.ex().usable("tryrlock"); err != nil {
		return false, err
	}
	a := rw.rrec.Try()
	tctx := telemetry.NewContext(ctx, rw.rrec)
	n, ok, err := recipe.TryAcquire(tctx, rw.w.st, rw.w.path, recipe.ReadPrefix, rw.opts.nodeData(a.Start()), recipe.LastWriter)
	if err != nil {
		a.Failed(ctx, err)
		return false, acquireErr(ctx, "tryrlock", rw.w.path, err)
	}
	if !ok {
		a.Busy(ctx)
		return false, nil
	}
	rw.rgrant(n, a.Granted(ctx, n))
	return true, nil
}

func (rw *RWMutex) rgrant(n store.Node, held *telemetry.Holding) {
	h := recipe.NewHold(rw.w.st, n, rw.opts.holdWith(held))
	rw.mu.Lock()
	rw.rholds = append(rw.rholds, h)
	// RLock removed this session's pending nodes before it contended.
	rw.rpending = slices.DeleteFunc(rw.rpending, func(p store.Node) bool {
		select {
		case <-recipe.Pending(rw.w.st, p):
			return true
		default:
			return false
		}
	})
	rw.mu.Unlock()
}

// RUnlock releases the oldest read hold of this RWMutex and removes its
// node, as Unlock does (see Mutex.Unlock: a removal the connection does not
// allow is left to the session, and a later RUnlock waits for it). It
// returns an error wrapping ErrNotLocked when no read hold is held, and one
// wrapping ErrLockLost and the cause when that hold had already ended.
func (rw *RWMutex) RUnlock(ctx context.Context) error {
	if err := rw.ex().usable("runlock"); err != nil {
		return err
	}
	rw.mu.Lock()
	if len(rw.rholds) == 0 {
		if len(rw.rpending) == 0 {
			rw.mu.Unlock()
			return opErr("runlock", rw.w.path, ErrNotLocked)
		}
		p := rw.rpending[0]
		rw.mu.Unlock()
		if err := recipe.Remove(telemetry.NewContext(ctx, rw.rrec), rw.w.st, p); err != nil {
			return opErr("runlock", rw.w.path, err)
		}
		rw.mu.Lock()
		rw.rpending = slices.DeleteFunc(rw.rpending, func(q store.Node) bool { return q.Path == p.Path && q.Seq == p.Seq })
		rw.mu.Unlock()
		return nil
	}
	h := rw.rholds[0]
	rw.rholds[0] = nil
	rw.rholds = rw.rholds[1:]
	rw.mu.Unlock()
	err := releaseErr(telemetry.NewContext(ctx, rw.rrec), "runlock", rw.w.path, h)
	if errors.Is(err, recipe.ErrRemovalPending) {
		rw.mu.Lock()
		rw.rpending = append(rw.rpending, h.Node())
		rw.mu.Unlock()
	}
	return err
}

// RContext returns the context of the read hold the next RUnlock releases
// (the oldest), cancelled with a cause when it ends, or a context cancelled
// with ErrNotLocked when no read hold is held.
func (rw *RWMutex) RContext() context.Context {
	if rw == nil {
		return notHeld
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if len(rw.rholds) == 0 {
		return notHeld
	}
	return rw.rholds[0].Context()
}

// RToken returns the fencing token of the read hold the next RUnlock
// releases, or -1.
func (rw *RWMutex) RToken() int64 {
	if rw == nil {
		return -1
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if len(rw.rholds) == 0 {
		return -1
	}
	return rw.rholds[0].Token()
}

// Locker returns a sync.Locker on the write lock; it panics on failure as
// Mutex.Locker's does.
func (rw *RWMutex) Locker() gosync.Locker {
	return locker{lock: rw.Lock, unlock: rw.Unlock}
}

// RLocker returns a sync.Locker whose Lock and Unlock call RLock and
// RUnlock with context.Background(), and panic with the error on failure
// as Mutex.Locker's do.
func (rw *RWMutex) RLocker() gosync.Locker {
	return locker{lock: rw.RLock, unlock: rw.RUnlock}
}
