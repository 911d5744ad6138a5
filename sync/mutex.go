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

// notHeld is the Context of a lock that is not held.
var notHeld = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotLocked)
	return ctx
}()

// Mutex is a distributed mutual exclusion lock: at most one holder at a
// time among all the Mutex values, on any session, that name the same path
// (and among the ZooKeeper and etcd clients corral interoperates with; see
// the package doc).
//
// A Mutex is safe for concurrent use and, like sync.Mutex, excludes the
// goroutines that share it too: while one goroutine holds or acquires it,
// the others' Lock waits. It is not associated with a goroutine: one may
// Lock and another Unlock. A Mutex must not be copied after first use; the
// zero value is not usable (its methods fail with store.ErrInvalidArgument),
// make one with NewMutex.
//
// A held Mutex is lost when its session ends, when its node is deleted by
// someone else, or (under the default LoseOnDisconnect policy) when the
// connection is lost; Context is then cancelled with the reason, and the
// following Unlock returns an error wrapping ErrLockLost.
type Mutex struct {
	x exclusive
}

// NewMutex returns a Mutex on the lock at path in st. It does no I/O; an
// invalid path is reported by the first Lock, with an error wrapping
// store.ErrInvalidPath.
func NewMutex(st store.Store, path string, opts ...LockOption) *Mutex {
	m := &Mutex{}
	m.x.init(st, path, names.Lock, telemetry.KindMutex, newLockOptions(opts))
	return m
}

// Path returns the path of the lock.
func (m *Mutex) Path() string { return m.ex().path }

// ex returns the Mutex's lock, or for a nil Mutex an unusable one, whose
// methods fail with store.ErrInvalidArgument as a zero Mutex's do.
func (m *Mutex) ex() *exclusive {
	if m == nil {
		return new(exclusive)
	}
	return &m.x
}

// Lock acquires the lock, blocking until it is granted, ctx is done or the
// session ends. It returns nil once the lock is held; otherwise it returns
// an error (ctx.Err() wrapped when ctx ended first) and has removed its
// node, and the waiters behind it keep waiting for the real holder.
// Calling Lock while this Mutex is held blocks, as sync.Mutex's does, until
// an Unlock (or ctx). A lost connection is ridden out while ctx and the
// session live, as every acquisition of every primitive rides it out (see
// Outages in the package doc).
func (m *Mutex) Lock(ctx context.Context) error { return m.ex().lock(ctx, "lock") }

// TryLock tries to acquire the lock without waiting for another holder. It
// reports whether it got it; it returns false and nil when the lock is held
// (by anyone, this Mutex included), and false and an error when the store
// failed. It costs the same store round trips as an uncontended Lock.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) { return m.ex().tryLock(ctx, "lock") }

// Unlock releases the lock and removes its node. The hold ends at once; the
// removal is tried until ctx ends and for up to a second after, so a
// cancelled ctx still releases (see Outages in the package doc). When the
// node could not be removed by then, Unlock returns an error wrapping
// store.ErrDisconnected, the session removes the node as soon as the
// connection allows, and a second Unlock waits for that (returning nil once
// the node is gone) rather than report ErrNotLocked. Unlock returns an error
// wrapping ErrNotLocked, and changes nothing, when the Mutex is not held, and
// one wrapping ErrLockLost and the loss's cause when the hold had already
// ended; in no case is another holder's node ever touched. A Mutex that was
// not made by NewMutex, or was copied, gives store.ErrInvalidArgument.
func (m *Mutex) Unlock(ctx context.Context) error { return m.ex().unlock(ctx, "unlock") }

// Context returns a context that is cancelled the moment the current hold
// ends, with the reason as its cause (see the package doc). When the Mutex
// is not held it returns a context already cancelled with ErrNotLocked.
func (m *Mutex) Context() context.Context { return m.ex().context() }

// Token returns the fencing token of the current hold, or -1 when the Mutex
// is not held. Tokens grow with every successive grant of the same lock (it
// is the contender node's Seq), so storage can reject a stale holder.
func (m *Mutex) Token() int64 { return m.ex().token() }

// Guard returns the guard of the current hold's node, for a write that
// must be applied only while the lock is held (see store.Guard), or the
// zero Guard when the Mutex is not held.
func (m *Mutex) Guard() store.Guard { return m.ex().guard() }

// Locker returns a sync.Locker whose methods call Lock and Unlock with
// context.Background(). Since sync.Locker cannot return errors, they panic
// with the error (which matches the sentinels of this package and store
// with errors.Is) when the store fails, the session has ended, the lock was
// lost while held, or it was not held: a caller that wants to survive these
// should use Lock and Unlock.
func (m *Mutex) Locker() gosync.Locker {
	return locker{lock: m.Lock, unlock: m.Unlock}
}

type locker struct {
	lock, unlock func(context.Context) error
}

func (l locker) Lock() {
	if err := l.lock(context.Background()); err != nil {
		panic(err)
	}
}

func (l locker) Unlock() {
	if err := l.unlock(context.Background()); err != nil {
		panic(err)
	}
}

// exclusive is one exclusive lock side: a Mutex, or the writers of an
// RWMutex.
type exclusive struct {
	st   store.Store
	path string
	opts lockOptions
	spec *recipe.Spec // of the lock's contenders
	// local holds a token while a goroutine of this value holds or
	// acquires the lock, so that they exclude each other without store
	// round trips.
	local chan struct{}
	self  *exclusive // x itself, unless x is a copy

	mu   gosync.Mutex
	hold *recipe.Hold // nil when not held
	// last is the latest grant's hold, kept after its release: an Unlock
	// after a release whose removal could not finish (the session's
	// cleaner deletes the node) removes it rather than report
	// ErrNotLocked (see recipe.Hold.Release).
	last *recipe.Hold
}

// init sets x up in place: x remembers its own address, so that a copy can
// tell it is one.
func (x *exclusive) init(st store.Store, path, prefix, kind string, opts lockOptions) {
	*x = exclusive{st: st, path: path, opts: opts, local: make(chan struct{}, 1),
		spec: opts.spec(path, prefix, recipe.Predecessor, opts.recorder(kind, path, ErrNodeDeleted))}
	x.self = x
}

// usable reports a Mutex or RWMutex that was not made by its constructor,
// with a nil store, with a path no lock can have, or that was copied: a
// copy shares the original's state, and an Unlock through it would leave
// the original waiting for ever.
func (x *exclusive) usable(op string) error {
	switch {
	case x.local == nil || x.st == nil:
		return opErr(op, x.path, fmt.Errorf("%w: lock not made by NewMutex or NewRWMutex with a store", store.ErrInvalidArgument))
	case x.self != x:
		return opErr(op, x.path, fmt.Errorf("%w: lock copied after NewMutex or NewRWMutex made it; share the pointer instead", store.ErrInvalidArgument))
	case x.opts.bad != nil:
		return opErr(op, x.path, x.opts.bad)
	}
	if err := recipe.ValidateDir(x.path); err != nil {
		return opErr(op, x.path, err)
	}
	return nil
}

func (x *exclusive) lock(ctx context.Context, op string) error {
	if err := x.usable(op); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return acquireErr(ctx, op, x.path, nil)
	}
	select {
	case x.local <- struct{}{}:
	case <-ctx.Done():
		x.spec.Rec.Begin(ctx).Failed(ctx, ctx.Err())
		return acquireErr(ctx, op, x.path, nil)
	}
	h, err := recipe.Acquire(ctx, x.st, x.spec)
	if err != nil {
		<-x.local
		return acquireErr(ctx, op, x.path, err)
	}
	x.grant(h)
	return nil
}

func (x *exclusive) tryLock(ctx context.Context, op string) (bool, error) {
	if err := x.usable("try" + op); err != nil {
		return false, err
	}
	select {
	case x.local <- struct{}{}:
	default:
		x.spec.Rec.Try().Busy(ctx)
		return false, nil
	}
	h, err := recipe.TryAcquire(ctx, x.st, x.spec)
	if err != nil || h == nil {
		<-x.local
		if err != nil {
			return false, acquireErr(ctx, "try"+op, x.path, err)
		}
		return false, nil
	}
	x.grant(h)
	return true, nil
}

// grant makes h the current hold. A removal the last release left pending
// was done before the grant (recipe.Flush).
func (x *exclusive) grant(h *recipe.Hold) {
	x.mu.Lock()
	x.hold, x.last = h, h
	x.mu.Unlock()
}

func (x *exclusive) unlock(ctx context.Context, op string) error {
	if err := x.usable(op); err != nil {
		return err
	}
	x.mu.Lock()
	held, last := x.hold != nil, x.last
	x.hold = nil
	x.mu.Unlock()
	if last == nil {
		return opErr(op, x.path, ErrNotLocked)
	}
	if held {
		defer func() { <-x.local }()
	}
	lost, err := release(ctx, last, ErrUnlocked, ErrNotLocked)
	return releaseErr(op, x.path, ErrLockLost, lost, err)
}

func (x *exclusive) context() context.Context {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.hold == nil {
		return notHeld
	}
	return x.hold.Context()
}

func (x *exclusive) guard() store.Guard {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.hold == nil {
		return store.Guard{}
	}
	return x.hold.Guard()
}

func (x *exclusive) token() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.hold == nil {
		return -1
	}
	return x.hold.Token()
}
