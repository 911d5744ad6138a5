package sync

import (
	"context"
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Errors of the Semaphore, the StripedMutex and the DoubleBarrier.
var (
	// ErrInvalidLimit: a Semaphore, StripedMutex or DoubleBarrier was made
	// with a limit under 1.
	ErrInvalidLimit = errors.New("sync: limit must be at least 1")
	// ErrMismatch: the limit of a Semaphore, StripedMutex or DoubleBarrier
	// differs from the one of those using its path now. It is the same
	// error as partition.ErrMismatch and queue.ErrMismatch.
	ErrMismatch = recipe.ErrMismatch
)

// limitSetting returns the setting that the contenders of a Semaphore,
// StripedMutex or DoubleBarrier with marker record of limit n: in their
// names, so that it goes with the last of them (recipe.Setting).
func limitSetting(marker string, n int) *recipe.Setting {
	return &recipe.Setting{Marker: marker, Key: 'n', Value: n, Name: "limit"}
}

// Semaphore is a distributed counting semaphore: at most n leases are held
// at a time among all the Semaphore values, on any session, that name the
// same path. It is what golang.org/x/sync/semaphore is within one process,
// and what Curator's InterProcessSemaphoreV2 is on ZooKeeper.
//
// Each Acquire creates an ephemeral sequential "lease-" node under the
// semaphore's node; the n lowest (by Seq) hold leases, and the others wait
// in line, first come first served. No release wakes a herd: the first
// waiter in line watches the n holders' nodes and is the only one a release
// wakes; every later waiter watches the waiter just before it, which, once
// it holds a lease, touches its node (sets its data again) to hand that duty
// down the line. A release thus wakes one waiter, whose grant wakes the next
// in line, and a waiter that gives up or dies wakes only the waiter behind
// it. The first waiter sets one watch per holder, so a large n makes its
// waits dearer, and nobody else's.
//
// The limit n is recorded in every lease's node name ("lease-n3-…"), and
// Acquire and TryAcquire with an n that differs from that of a lease
// there fail with ErrMismatch; an n under 1 fails with ErrInvalidLimit.
// The limit lives only as long as the leases: once the last is released,
// the semaphore's node goes with it (see Parents in package store), and
// the next Acquire sets the limit anew.
//
// A Semaphore is safe for concurrent use: its goroutines acquire leases
// independently, each counting against n. A Semaphore must not be copied
// after first use; the zero value is not usable, make one with
// NewSemaphore. The LockOptions are those of Mutex: the disconnection
// policy of the leases, the data of their nodes, and the metrics and logs.
//
// When the session ends, a waiting Acquire returns an error wrapping the
// session's cause, and every lease held through it ends (see Lease): its
// node is gone, and the first waiter in line gets its place.
type Semaphore struct {
	st   store.Store
	path string
	n    int
	opts lockOptions
	spec *recipe.Spec // of the leases
}

// NewSemaphore returns a Semaphore of n leases whose node is at path in st.
// It does no I/O: an invalid path and an n under 1 are reported by every
// Acquire and TryAcquire, and an n that differs from that of the leases
// there by the one that meets them.
func NewSemaphore(st store.Store, path string, n int, opts ...LockOption) *Semaphore {
	o := newLockOptions(opts)
	s := &Semaphore{st: st, path: path, n: n, opts: o}
	limit := limitSetting(names.Lease, n)
	s.spec = o.spec(path, limit.Prefix(), recipe.Order{Block: s.blockers, Granted: handOn},
		o.recorder(telemetry.KindSemaphore, path, ErrNodeDeleted))
	s.spec.Setting = limit
	return s
}

// Path returns the path of the semaphore's node.
func (s *Semaphore) Path() string {
	if s == nil {
		return ""
	}
	return s.path
}

// Limit returns n, the number of leases.
func (s *Semaphore) Limit() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Acquire acquires a lease, blocking until one of the n is free, ctx is done
// or the session ends. On success it returns the lease, which the caller
// must Release. Otherwise it returns an error (ctx.Err() wrapped when ctx
// ended first) and has removed its node, so that the semaphore is as if it
// had never been called, and the waiters behind it move up.
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	if err := s.prepare(ctx, "acquire"); err != nil {
		return nil, err
	}
	h, err := recipe.Acquire(ctx, s.st, s.spec)
	if err != nil {
		return nil, acquireErr(ctx, "acquire", s.path, err)
	}
	return &Lease{path: s.path, hold: h}, nil
}

// TryAcquire acquires a lease if one is free now, without waiting. It
// returns the lease and true when it got one, nil and false when all n are
// held, and an error when the store failed. It costs the same round trips as
// an uncontended Acquire, and one more when it has to give up (or, on a
// store without CreateLister, when a waiter has already lined up behind it).
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, bool, error) {
	if err := s.prepare(ctx, "tryacquire"); err != nil {
		return nil, false, err
	}
	h, err := recipe.TryAcquire(ctx, s.st, s.spec)
	if err != nil {
		return nil, false, acquireErr(ctx, "tryacquire", s.path, err)
	}
	if h == nil {
		return nil, false, nil
	}
	return &Lease{path: s.path, hold: h}, true, nil
}

// prepare checks the Semaphore and its limit.
func (s *Semaphore) prepare(ctx context.Context, op string) error {
	if s == nil || s.st == nil {
		return opErr(op, s.Path(), fmt.Errorf("%w: semaphore not made by NewSemaphore with a store", store.ErrInvalidArgument))
	}
	if s.opts.bad != nil {
		return opErr(op, s.path, s.opts.bad)
	}
	if err := recipe.ValidateDir(s.path); err != nil {
		return opErr(op, s.path, err)
	}
	if s.n < 1 {
		return opErr(op, s.path, fmt.Errorf("%w: %d", ErrInvalidLimit, s.n))
	}
	if ctx.Err() != nil {
		return acquireErr(ctx, op, s.path, nil)
	}
	return nil
}

// blockers is the semaphore's order (recipe.Order.Block): the n lowest
// leases hold; the first waiter (own == n) waits for any of the n holders
// to go; every later one for the waiter before it to go or to be touched
// (a lease node's version is 0 until its holder touches it, see handOn).
func (s *Semaphore) blockers(dir string, cs []recipe.Contender, own int) []recipe.Watch {
	switch {
	case own < s.n:
		return nil
	case own > s.n:
		w := cs[own-1].Watch(dir)
		w.Touch = true
		return []recipe.Watch{w}
	}
	ws := make([]recipe.Watch, s.n)
	for j, c := range cs[:s.n] {
		ws[j] = c.Watch(dir)
	}
	return ws
}

// handOn is the last step of a grant to own (recipe.Order.Granted),
// followed in line by behind leases: the next in line may be watching own,
// so touch it (setting its data again, the identity record included), and
// it moves up and watches the holders in its turn.
func handOn(ctx context.Context, st store.Store, own store.Node, behind int) error {
	if behind == 0 {
		return nil
	}
	_, err := recipe.Retry(ctx, st, func() (store.Node, error) {
		return st.Set(ctx, own.Path, own.Data, store.AnyVersion)
	})
	return err
}

// Lease is one of a Semaphore's n leases, held from Acquire until Release.
// Its methods are safe for concurrent use. Only Acquire and TryAcquire make
// usable leases: the zero Lease's Context is cancelled with ErrNotLocked,
// its Token is -1 and its Release fails with store.ErrInvalidArgument.
//
// A lease is lost when its session ends, when its node is deleted by
// someone else, or (under the default LoseOnDisconnect policy) when the
// connection is lost; Context is then cancelled with the reason, and
// Release returns an error wrapping ErrLockLost.
type Lease handle

// Context returns a context that is cancelled the moment the lease ends,
// with the reason as its cause: ErrUnlocked, ErrNodeDeleted,
// ErrDisconnected, store.ErrSessionExpired or store.ErrClosed. Do the work
// the lease guards under it.
func (l *Lease) Context() context.Context { return (*handle)(l).context() }

// Token returns the lease's fencing token, its node's (store.Node.Fence:
// the Seq, on ZooKeeper plus the directory's creation zxid), which grows
// with every lease granted by the semaphore and orders the grants.
func (l *Lease) Token() int64 { return (*handle)(l).token() }

// Guard returns the guard of the lease's node, for a write that must be
// applied only while the lease is held (see store.Guard); the zero Guard
// for a nil or zero Lease.
func (l *Lease) Guard() store.Guard { return (*handle)(l).guard() }

// Release gives the lease back and removes its node, which wakes the first
// waiter in line. The lease ends at once; the removal is tried until ctx
// ends, and for a short grace after (see the package doc, "Outages"), so a
// cancelled ctx still releases. If the node could not be removed by then
// (the connection is lost), Release returns an error wrapping
// store.ErrDisconnected, the session removes the node as soon as the
// connection allows, and a second Release waits for that removal as the
// first did. Releasing a lease that was lost returns an error wrapping
// ErrLockLost and the cause; releasing it again after a release that
// removed its node returns an error wrapping ErrUnlocked, and touches
// nothing.
func (l *Lease) Release(ctx context.Context) error {
	if !(*handle)(l).granted() {
		return opErr("release", "", fmt.Errorf("%w: lease not granted by a Semaphore", store.ErrInvalidArgument))
	}
	return (*handle)(l).release(ctx, "release", ErrUnlocked, ErrUnlocked, ErrLockLost)
}
