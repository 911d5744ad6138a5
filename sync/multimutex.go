package sync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	gosync "sync"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// MemberError is the cause of a MultiMutex hold's end when one of its member
// locks ended first: which member, and why. It unwraps to the member's own
// cause (ErrNodeDeleted, ErrDisconnected, store.ErrSessionExpired, ...), so
// errors.Is sees through it.
type MemberError struct {
	Path string // the member lock that ended
	Err  error  // why, as a Mutex's hold would report it
}

func (e *MemberError) Error() string {
	if e == nil {
		return "sync: member lock lost"
	}
	return fmt.Sprintf("sync: member lock %q lost: %v", e.Path, e.Err)
}

// Unwrap returns e.Err.
func (e *MemberError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// MultiMutex locks a set of paths all together or not at all, as Curator's
// InterProcessMultiLock does: it holds every member lock at once, or none.
//
// Each member is an ordinary Mutex contender ("lock-" node) under its path,
// so a MultiMutex and a Mutex (or a Curator or go-zookeeper lock) on a
// member path exclude each other. Lock takes the members one at a time in
// one canonical order, the paths sorted and without duplicates, whatever
// order the caller gave: two MultiMutexes whose sets overlap both wait for
// the lower shared path first, so they never wait for each other in a cycle.
// (Code that also takes several plain Mutexes in another order can still
// deadlock against them, as with any lock ordering.)
//
// A granted MultiMutex has one hold context, Context, cancelled the moment
// any member is lost, with a *MemberError that says which member and why; and
// one fencing token per member, Token(path).
//
// The LockOptions are those of Mutex. Each member records its metrics and
// logs as a Mutex on its path would (kind mutex): a MultiMutex's acquisition
// is one acquisition per member, its hold one hold per member.
//
// A MultiMutex is safe for concurrent use and excludes the goroutines that
// share it, as a Mutex does. It must not be copied after first use; the zero
// value is not usable (its methods fail with store.ErrInvalidArgument), make
// one with NewMultiMutex. When the session ends, a Lock in progress returns
// the session's cause and the hold ends (its members' nodes are gone with
// the session).
type MultiMutex struct {
	st    store.Store
	paths []string       // sorted, without duplicates
	bad   error          // why the set is unusable, reported by every call
	specs []*recipe.Spec // of each member's contenders, as a mutex on its path
	// local holds a token while a goroutine of this value holds or
	// acquires the locks.
	local chan struct{}

	mu   gosync.Mutex
	hold *multiHold // nil when not held
	// last is the latest grant, kept after its release: an Unlock after a
	// release whose removals could not all finish (the session's cleaner
	// deletes the nodes) removes them rather than report ErrNotLocked.
	last *multiHold
}

// NewMultiMutex returns a MultiMutex on the locks at paths in st, in any
// order and with any repetition. It does no I/O: an empty set
// (store.ErrInvalidArgument), a path no lock can have (store.ErrInvalidPath:
// an invalid path, or the root, as NewMutex), or a path inside another
// member's (store.ErrInvalidArgument, since a lock's directory holds only
// its contenders) is reported by every later call.
func NewMultiMutex(st store.Store, paths []string, opts ...LockOption) *MultiMutex {
	ps := slices.Clone(paths)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	o := newLockOptions(opts)
	specs := make([]*recipe.Spec, len(ps))
	for i, p := range ps {
		specs[i] = o.spec(p, names.Lock, recipe.Predecessor, o.recorder(telemetry.KindMutex, p, ErrNodeDeleted))
	}
	bad := o.bad
	if bad == nil {
		bad = checkMembers(ps)
	}
	return &MultiMutex{st: st, paths: ps, bad: bad, specs: specs, local: make(chan struct{}, 1)}
}

// checkMembers reports why the sorted, deduplicated paths cannot be locked
// together.
func checkMembers(ps []string) error {
	if len(ps) == 0 {
		return fmt.Errorf("%w: no path to lock", store.ErrInvalidArgument)
	}
	for i, p := range ps {
		// As NewMutex: the root cannot be a lock's directory.
		if err := recipe.ValidateDir(p); err != nil {
			return err
		}
		// Sorted, a path's descendants come right after it.
		if i+1 < len(ps) && strings.HasPrefix(ps[i+1], p+"/") {
			return fmt.Errorf("%w: %q is inside %q", store.ErrInvalidArgument, store.ShortPath(ps[i+1]), store.ShortPath(p))
		}
	}
	return nil
}

// Paths returns the member paths in the order Lock takes them: sorted,
// without duplicates.
func (m *MultiMutex) Paths() []string {
	if m == nil {
		return nil
	}
	return slices.Clone(m.paths)
}

// usable reports a MultiMutex not made by NewMultiMutex with a store, or
// made with an unusable set of paths.
func (m *MultiMutex) usable(op string) error {
	if m == nil || m.local == nil || m.st == nil {
		return m.opErr(op, fmt.Errorf("%w: lock not made by NewMultiMutex with a store", store.ErrInvalidArgument))
	}
	if m.bad != nil {
		return m.opErr(op, m.bad)
	}
	return nil
}

// Lock acquires every member lock, blocking until all are held, ctx is done
// or the session ends. It takes them one at a time in the order of Paths,
// each as Mutex.Lock would (waiting in that lock's line). On failure it
// returns an error (ctx.Err() wrapped, with its cause, when ctx ended first)
// and has released the members it had taken and removed its nodes, so the
// other contenders are as if it had never asked. Calling Lock while this
// MultiMutex is held blocks until an Unlock (or ctx).
func (m *MultiMutex) Lock(ctx context.Context) error {
	if err := m.usable("lock"); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return m.opErr("lock", recipe.CtxErr(ctx, nil))
	}
	select {
	case m.local <- struct{}{}:
	case <-ctx.Done():
		return m.opErr("lock", recipe.CtxErr(ctx, nil))
	}
	holds, err := m.take(ctx, true)
	if err != nil {
		<-m.local
		return m.opErr("lock", recipe.CtxErr(ctx, err))
	}
	m.grant(holds)
	return nil
}

// TryLock tries to acquire every member lock without waiting for another
// holder. It reports whether it got them all; when a member is held (by
// anyone, this MultiMutex included) it releases those it took and returns
// false and nil, and false and an error when the store failed.
func (m *MultiMutex) TryLock(ctx context.Context) (bool, error) {
	if err := m.usable("trylock"); err != nil {
		return false, err
	}
	select {
	case m.local <- struct{}{}:
	default:
		return false, nil
	}
	holds, err := m.take(ctx, false)
	if err != nil || holds == nil {
		<-m.local
		if err != nil {
			return false, m.opErr("trylock", recipe.CtxErr(ctx, err))
		}
		return false, nil
	}
	m.grant(holds)
	return true, nil
}

// take acquires the members in order, waiting for each (wait) or not. It
// returns their holds, or nil when a member was not granted at once, or an
// error; in both cases it has released the members it took. Each member
// records as a mutex on its path.
func (m *MultiMutex) take(ctx context.Context, wait bool) ([]*recipe.Hold, error) {
	holds := make([]*recipe.Hold, 0, len(m.specs))
	for _, sp := range m.specs {
		acquire := recipe.TryAcquire
		if wait {
			acquire = recipe.Acquire
		}
		h, err := acquire(ctx, m.st, sp)
		if err != nil {
			err = fmt.Errorf("member %q: %w", store.ShortPath(sp.Dir), err)
		}
		if err != nil || h == nil {
			return nil, errors.Join(err, giveBack(ctx, holds))
		}
		holds = append(holds, h)
	}
	return holds, nil
}

// giveBack releases holds taken by an acquisition that failed, last first,
// and returns what could not be removed.
func giveBack(ctx context.Context, holds []*recipe.Hold) error {
	var errs []error
	for _, h := range slices.Backward(holds) {
		if _, err := h.Release(ctx, ErrUnlocked); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *MultiMutex) grant(holds []*recipe.Hold) {
	// Not derived from the session's context: a session's end is a loss
	// of every member, reported as a *MemberError like any other.
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &multiHold{paths: m.paths, members: holds, ctx: ctx, cancel: cancel}
	m.mu.Lock()
	// Removals the last release left pending are done before the grant
	// (recipe.Flush in each member).
	m.hold, m.last = h, h
	m.mu.Unlock()
}

// Unlock releases every member lock and removes their nodes, on
// context.WithoutCancel(ctx), bounded, so a cancelled ctx still releases.
// It returns an error wrapping ErrNotLocked, and changes nothing, when the
// MultiMutex is not held; and one wrapping ErrLockLost and a *MemberError
// naming the first member lost when the hold had already ended. It releases
// every member in any case, and never touches another holder's node.
func (m *MultiMutex) Unlock(ctx context.Context) error {
	if err := m.usable("unlock"); err != nil {
		return err
	}
	m.mu.Lock()
	held, last := m.hold != nil, m.last
	m.hold = nil
	m.mu.Unlock()
	if last == nil {
		return m.opErr("unlock", ErrNotLocked)
	}
	if held {
		defer func() { <-m.local }()
	}
	lost, err := last.release(ctx)
	if lost != nil {
		return m.opErr("unlock", errors.Join(fmt.Errorf("%w: %w", ErrLockLost, lost), err))
	}
	if err != nil {
		return m.opErr("unlock", err)
	}
	return nil
}

// Context returns a context that is cancelled the moment the current hold
// ends: with ErrUnlocked after Unlock, or with a *MemberError as soon as any
// member lock is lost (its session ended, its node was deleted, or the
// connection was lost under LoseOnDisconnect). When the MultiMutex is not
// held it returns a context already cancelled with ErrNotLocked. The first
// call of a hold starts the watches of its members' nodes.
func (m *MultiMutex) Context() context.Context {
	if m == nil {
		return notHeld
	}
	m.mu.Lock()
	h := m.hold
	m.mu.Unlock()
	if h == nil {
		return notHeld
	}
	return h.context()
}

// Token returns the fencing token of the member lock at path in the
// current hold (its node's Seq, which grows with every grant of that lock,
// to a MultiMutex or a Mutex alike), or -1 when the MultiMutex is not held
// or path is not a member.
func (m *MultiMutex) Token(path string) int64 {
	h := m.member(path)
	if h == nil {
		return -1
	}
	return h.Token()
}

// Guard returns the guard of the member lock at path in the current hold,
// for a write that must be applied only while the MultiMutex holds it (see
// store.Guard), or the zero Guard when the MultiMutex is not held or path
// is not a member.
func (m *MultiMutex) Guard(path string) store.Guard {
	h := m.member(path)
	if h == nil {
		return store.Guard{}
	}
	return h.Guard()
}

// member returns the hold of the member at path, or nil.
func (m *MultiMutex) member(path string) *recipe.Hold {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hold == nil {
		return nil
	}
	i, ok := slices.BinarySearch(m.paths, path)
	if !ok {
		return nil
	}
	return m.hold.members[i]
}

func (m *MultiMutex) opErr(op string, err error) error {
	if m == nil {
		return fmt.Errorf("sync: %s: %w", op, err)
	}
	short := make([]string, len(m.paths))
	for i, p := range m.paths {
		short[i] = store.ShortPath(p)
	}
	return fmt.Errorf("sync: %s %q: %w", op, short, err)
}

// multiHold is a granted MultiMutex: one recipe.Hold per member, and the
// context that ends with the first of them.
type multiHold struct {
	paths   []string
	members []*recipe.Hold
	ctx     context.Context
	cancel  context.CancelCauseFunc

	mu       gosync.Mutex
	watching bool          // the members' contexts are tied to ctx
	stopped  bool          // released: tie nothing more
	stops    []func() bool // the ties, undone on release
}

// context ties the members' contexts to the hold's the first time it is
// asked for (which starts the members' watches: they are lazy, as a
// Mutex's).
func (h *multiHold) context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watching || h.stopped {
		return h.ctx
	}
	h.watching = true
	for i, mh := range h.members {
		mctx, path := mh.Context(), h.paths[i]
		lose := func() { h.cancel(&MemberError{Path: path, Err: context.Cause(mctx)}) }
		if mctx.Err() != nil {
			// Known lost already (Hold.Context checks): say so now,
			// not when AfterFunc's goroutine gets to it.
			lose()
			continue
		}
		h.stops = append(h.stops, context.AfterFunc(mctx, lose))
	}
	return h.ctx
}

// release ends the hold with ErrUnlocked and releases every member, last
// first (see recipe.Hold.Release). lost is the cause of an end
// that came before (a *MemberError), err what could not be removed. A later
// release only retries the removals left pending, and returns ErrNotLocked
// when there were none.
func (h *multiHold) release(ctx context.Context) (lost, err error) {
	h.mu.Lock()
	again := h.stopped
	h.stopped = true
	stops := h.stops
	h.mu.Unlock()
	if h.ctx.Err() != nil && !again {
		lost = context.Cause(h.ctx)
	}
	h.cancel(ErrUnlocked)
	for _, stop := range stops {
		stop()
	}
	var errs []error
	mlost := make([]error, len(h.members))
	released := false // a member, or a pending removal
	for i, mh := range slices.Backward(h.members) {
		var err error
		mlost[i], err = release(ctx, mh, ErrUnlocked, ErrNotLocked)
		if errors.Is(err, ErrNotLocked) {
			continue
		}
		released = true
		if err != nil {
			errs = append(errs, err)
		}
	}
	if !released {
		return nil, ErrNotLocked
	}
	for i, c := range mlost {
		if lost == nil && c != nil {
			// Lost with nobody watching: say which, as the context
			// would have.
			lost = &MemberError{Path: h.paths[i], Err: c}
		}
	}
	return lost, errors.Join(errs...)
}
