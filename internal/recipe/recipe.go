// Package recipe is the machinery that corral's lock, election and semaphore
// recipes share: contender nodes (ephemeral sequential children of one
// directory), the order they form, waiting for the one that blocks us, and
// the "hold" a granted contender keeps until it ends.
//
// # Contenders
//
// A contender is a child of a recipe directory that takes part in the
// ordering. [Parse] recognises corral's own names and those of the clients
// corral interoperates with (names.IsContender), so that mixed fleets
// exclude each other: on ZooKeeper any child with a 10-digit suffix, on
// etcd corral's marked names and the lease-ID keys of etcd's own
// concurrency.Mutex and Election.
//
// The [Kind] of a contender comes from the marker in its name, found by
// substring (never by prefix, because of the protected prefix):
// names.Read (and kazoo's names.KazooRead) makes a [Reader], names.Write a
// [Writer], names.Latch a [Latch], anything else (names.Lock, foreign
// names) is [Exclusive]. Contenders are ordered by store Seq, never by
// name: the children a store lists are already sorted that way.
//
// # Acquiring
//
// [Acquire] creates the contender node and blocks until a [Blocker] says
// that no earlier contender blocks it. Where the store reads windows of
// children (store.WindowLister), the contender reads only the few
// contenders up to its own node (4; 16 for a reader, which looks past other
// readers for the last writer), so that what an acquisition costs does not
// grow with the number of waiters; a window that holds no blocker and does
// not reach the first child is followed by the full listing. Elsewhere it
// lists the directory ([Create]: one round trip with store.CreateLister,
// else Create then Children). It waits on exactly the blocking node
// ([WaitGone], a store.WatchNode loop that re-checks after every event), so
// a release wakes only the waiters it unblocks. A node watch is set only
// while the node exists, so it fires at the latest when the node goes: a
// wait given up (ctx, session, connection) leaves at most a watch on a
// node that is still there, and the watches a session holds stay within a
// constant of the live nodes however many waits it makes. After any wait it reads its
// view again: a predecessor that gave up was not the holder, and the own
// node must still be there while the session lives before the grant is
// reported. Where the store records the release of an exclusive holder
// (store.FrontDeleter, HoldOptions.Front), one point read that finds the
// node it waited for so released, and its own node still there, stands in
// for the view: etcd sorts a whole directory to read even a window, so
// that read is what keeps a handoff's cost from growing with the waiters.
// On any error or cancellation the node is removed ([Remove], on
// context.WithoutCancel with the [CleanupTimeout] bound).
// [TryAcquire] is the non-blocking form. [Predecessor] is the blocker of a
// mutex, a writer or an election candidate; [LastWriter] that of a reader.
//
// # Waiting and granting
//
// Every wait of a contender is [WaitAny]: for one node to go (a mutex's
// predecessor, [WaitGone]), for any of several to go (a semaphore's first
// waiter watches the holders), or also for a node to be touched, its data
// set again, which is how a recipe wakes one chosen waiter (a semaphore's
// hand-down, a striped lock's hand-over). Every grant passes [Confirm]: a
// contender is granted only while its session lives and the store reports
// no lost connection; while ownership is unknown it waits, and then checks
// its node is still its own. The recipes that order contenders their own
// way (sync's Semaphore and StripedMutex) keep only that order, and their
// error wrapping. The telemetry recorder a primitive passes (Acquire,
// Create, Remove, HoldOptions.Rec) receives the logs of removals that are
// retried or left to the session's cleaner.
//
// # Holding
//
// [NewHold] turns a granted node into a [Hold], whose Context is derived
// from the session's Context and is cancelled with a cause the moment the
// session ends (store.ErrSessionExpired or store.ErrClosed), the own node is
// deleted by someone else (HoldOptions.Deleted), the connection is lost if
// the policy says so (HoldOptions.Disconnected), or the holder releases it
// (the cause given to [Hold.Release]). Its [Hold.Token] is the node's
// store.Node.Fence: a fencing token that grows with every successive grant
// under the directory, across its removals.
// A Hold owns a goroutine that watches its own node and, under the
// disconnect policy, one that watches the connection; Release (or Stop)
// ends them and waits for them. With HoldOptions.Lazy they start only at the
// first call of Context, so a holder that never asks pays no watch; Release
// then still reports a loss it finds (node gone, session ended, connection
// lost since the grant).
//
// Cleanup of an abandoned create is the adapter's part of the contract: a
// Create whose ctx ends may return before its node is undone (zkstore
// deletes it when the late reply comes).
//
// Errors are the store's, wrapped; the caller wraps them again with its own
// package prefix.
//
// It ships: sync, election, queue, twophase and inspect import it. The
// test rigs live apart, under internal/testing.
package recipe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Kind classifies a contender by the marker in its name.
type Kind uint8

const (
	// Exclusive contenders (mutex nodes and any foreign contender) block
	// every later contender.
	Exclusive Kind = iota
	// Reader contenders block only later writers and exclusive contenders.
	Reader
	// Writer contenders are exclusive; they come from a shared lock.
	Writer
	// Latch contenders are leader-latch candidates.
	Latch
)

func (k Kind) String() string {
	switch k {
	case Exclusive:
		return "exclusive"
	case Reader:
		return "reader"
	case Writer:
		return "writer"
	case Latch:
		return "latch"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Contender is one child of a recipe directory that takes part in the
// ordering.
type Contender struct {
	Name string
	Seq  int64
	Kind Kind
}

// Parse reports whether name is the name of a contender
// (names.IsContender) and of which kind.
func Parse(name string) (Kind, bool) {
	return kindOf(name), names.IsContender(name)
}

func kindOf(name string) Kind {
	switch {
	case strings.Contains(name, names.Read), strings.Contains(name, names.KazooRead):
		return Reader
	case strings.Contains(name, names.Write):
		return Writer
	case strings.Contains(name, names.Latch):
		return Latch
	}
	return Exclusive
}

// classify returns the family of the child named name, its kind and
// whether it is a contender (Parse). A name with a marker (names.Marker)
// holds no other, so its marker alone tells all three.
func classify(name string) (names.Family, Kind, bool) {
	if m, ok := names.Marker(name); ok {
		return m.Family, kindOf(m.Text), true
	}
	kind, ok := Parse(name)
	return names.FamilyOf(name), kind, ok
}

// Contenders returns the contenders among kids, in the order given (a
// store lists children sorted by Seq).
func Contenders(kids []store.Child) []Contender {
	cs := make([]Contender, 0, len(kids))
	for _, k := range kids {
		if _, kind, ok := classify(k.Name); ok {
			cs = append(cs, Contender{Name: k.Name, Seq: k.Seq, Kind: kind})
		}
	}
	return cs
}

// contenders is CheckFamily(dir, kids, want), then Contenders(kids) and
// the nodes of family want (a semaphore's leases, a group's members, which
// are no contenders to other recipes), in one pass over the names: a
// waiter reads them at every check of its directory.
func contenders(dir string, kids []store.Child, want names.Family) ([]Contender, error) {
	cs := make([]Contender, 0, len(kids))
	for _, k := range kids {
		f, kind, ok := classify(k.Name)
		if err := checkFamily(dir, k.Name, f, want); err != nil {
			return nil, err
		}
		if ok || f == want {
			cs = append(cs, Contender{Name: k.Name, Seq: k.Seq, Kind: kind})
		}
	}
	return cs, nil
}

// Index returns the index of the contender named name in cs, or -1.
func Index(cs []Contender, name string) int {
	for i, c := range cs {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Create creates an ephemeral sequential contender node dir/prefix with
// data and returns it with the contenders of dir right after the create. It
// uses store.CreateLister for one round trip when st has it. It first
// removes the session's own abandoned nodes in dir (Flush), so the new node
// never queues behind one of them. On error no node is left behind, or the
// error says it will be removed (ErrRemovalPending).
func Create(ctx context.Context, st store.Store, rec *telemetry.Recorder, dir, prefix string, data []byte) (store.Node, []Contender, error) {
	n, kids, err := createListed(ctx, st, rec, dir, prefix, data)
	if err != nil {
		return store.Node{}, nil, err
	}
	cs, err := contenders(dir, kids, names.FamilyOf(prefix))
	if err != nil {
		return store.Node{}, nil, errors.Join(err, Remove(ctx, st, rec, n))
	}
	return n, cs, nil
}

// CreateChildren is Create that returns the children of dir as listed, for
// a recipe that reads its nodes itself (a semaphore counts its leases).
func CreateChildren(ctx context.Context, st store.Store, rec *telemetry.Recorder, dir, prefix string, data []byte) (store.Node, []store.Child, error) {
	n, kids, err := createListed(ctx, st, rec, dir, prefix, data)
	if err != nil {
		return store.Node{}, nil, err
	}
	if err := CheckFamily(dir, kids, names.FamilyOf(prefix)); err != nil {
		return store.Node{}, nil, errors.Join(err, Remove(ctx, st, rec, n))
	}
	return n, kids, nil
}

// createListed is CreateChildren before the check of the children's
// family: the caller checks them, and removes the node if they fail.
func createListed(ctx context.Context, st store.Store, rec *telemetry.Recorder, dir, prefix string, data []byte) (store.Node, []store.Child, error) {
	if err := Flush(ctx, st, dir); err != nil {
		return store.Node{}, nil, err
	}
	p := store.Join(dir, prefix)
	if cl, ok := store.Find[store.CreateLister](st); ok {
		return cl.CreateAndList(ctx, p, data, store.EphemeralSequential)
	}
	n, err := st.Create(ctx, p, data, store.EphemeralSequential)
	if err != nil {
		return store.Node{}, nil, err
	}
	kids, err := Children(ctx, st, dir)
	if err != nil {
		return store.Node{}, nil, errors.Join(SessionErr(st, err), Remove(ctx, st, rec, n))
	}
	return n, kids, nil
}

// SessionErr returns err, with the session's end in front when the session
// ended (see SyncSession): a call can fail on the lost connection that
// precedes an expiry.
func SessionErr(st store.Store, err error) error {
	SyncSession(st)
	cause := context.Cause(st.Context())
	if cause == nil || errors.Is(err, cause) {
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// A view is what a contender knows of the contenders up to its own node:
// all of them (from a full listing), or the last few (from a window, where
// the store reads one).
type view struct {
	cs       []Contender
	complete bool // cs starts at the first contender
}

// create creates the contender node and returns it with the view right
// after: a window of the given size where st reads windows
// (store.WindowLister), else the full listing (Create).
func create(ctx context.Context, st store.Store, rec *telemetry.Recorder, dir, prefix string, data []byte, window int) (store.Node, view, error) {
	wl, ok := store.Find[store.WindowLister](st)
	if !ok {
		n, cs, err := Create(ctx, st, rec, dir, prefix, data)
		return n, view{cs: cs, complete: true}, err
	}
	if err := Flush(ctx, st, dir); err != nil {
		return store.Node{}, view{}, err
	}
	n, kids, complete, err := wl.CreateAndWindow(ctx, store.Join(dir, prefix), data, store.EphemeralSequential, window)
	if err != nil {
		return store.Node{}, view{}, err
	}
	cs, err := contenders(dir, kids, names.FamilyOf(prefix))
	if err != nil {
		return store.Node{}, view{}, errors.Join(err, Remove(ctx, st, rec, n))
	}
	return n, view{cs: cs, complete: complete}, nil
}

// read reads the view of n's contender again: the window of the given size
// that ends with it where st reads windows, else the full listing.
func read(ctx context.Context, st store.Store, n store.Node, window int) (view, error) {
	dir, name := store.Parent(n.Path), n.Name()
	wl, ok := store.Find[store.WindowLister](st)
	if !ok {
		return list(ctx, st, dir, name)
	}
	type win struct {
		kids     []store.Child
		complete bool
	}
	w, err := Retry(ctx, st, func() (win, error) {
		kids, complete, err := wl.ChildrenUpTo(ctx, dir, n.Seq, window)
		return win{kids, complete}, err
	})
	if err != nil {
		return view{}, err
	}
	cs, err := contenders(dir, w.kids, names.FamilyOf(name))
	if err != nil {
		return view{}, err
	}
	return view{cs: cs, complete: w.complete}, nil
}

// Children lists the children of dir, riding out a lost connection while
// ctx and the session live (see Retry).
func Children(ctx context.Context, st store.Store, dir string) ([]store.Child, error) {
	return Retry(ctx, st, func() ([]store.Child, error) { return st.Children(ctx, dir) })
}

// list reads the full view of the contender named name in dir.
func list(ctx context.Context, st store.Store, dir, name string) (view, error) {
	kids, err := Children(ctx, st, dir)
	if err != nil {
		return view{}, err
	}
	cs, err := contenders(dir, kids, names.FamilyOf(name))
	if err != nil {
		return view{}, err
	}
	return view{cs: cs, complete: true}, nil
}

// followsFront reports whether c, the contender that n waited for and
// that is gone now, left from the front (see HoldOptions.Front) while n's
// node is still there, where the store records that (store.FrontDeleter).
// Nothing then comes before n: no contender came before c, none came
// between c and n but readers (c was n's blocker, under Predecessor or
// LastWriter), and none can come before n later (a Seq is never handed
// out again). Readers and etcd's own clients never leave a record, so no
// read is spent on them.
func followsFront(ctx context.Context, st store.Store, n store.Node, c Contender) (bool, error) {
	fd, ok := store.Find[store.FrontDeleter](st)
	if !ok || c.Kind == Reader || names.IsLeaseKey(c.Name) {
		return false, nil
	}
	return Retry(ctx, st, func() (bool, error) { return fd.FollowsFront(ctx, n.Path, n.Seq, c.Seq) })
}

// Pause waits before the attempt-th retry (from 0) after a lost
// connection: 10 ms, doubling, at most 500 ms. It returns ctx's error when
// ctx ends first, and the session's cause when the session ends first.
// Every recipe that rides out a lost connection paces its retries with it.
func Pause(ctx context.Context, st store.Store, attempt int) error {
	d := min(10*time.Millisecond<<min(attempt, 6), 500*time.Millisecond)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-st.Context().Done():
		return context.Cause(st.Context())
	}
}

// RideOut reports whether err is a lost connection that a loop should
// ride out, after pausing before its attempt-th retry (see Pause). It
// reports false for any other error, and when ctx or the session ends
// first.
func RideOut(ctx context.Context, st store.Store, err error, attempt int) bool {
	if !errors.Is(err, store.ErrDisconnected) || ctx.Err() != nil || st.Context().Err() != nil {
		return false
	}
	return Pause(ctx, st, attempt) == nil
}

// Retry calls fn until it succeeds, fails with an error other than
// store.ErrDisconnected, ctx is done or the session ends, pacing its tries
// with Pause.
func Retry[T any](ctx context.Context, st store.Store, fn func() (T, error)) (T, error) {
	return retry(ctx, st, 0, fn)
}

// retry is Retry going on after tries tries of fn that failed with
// store.ErrDisconnected (made apart by its caller): it pauses first, at the
// pace of its tries so far, unless tries is 0.
func retry[T any](ctx context.Context, st store.Store, tries int, fn func() (T, error)) (T, error) {
	var v T
	for ; ; tries++ {
		if tries > 0 {
			if err := Pause(ctx, st, tries-1); err != nil {
				return v, err
			}
		}
		var err error
		v, err = fn()
		if err == nil || !errors.Is(err, store.ErrDisconnected) || ctx.Err() != nil {
			return v, err
		}
	}
}

// CtxErr returns err made to match ctx.Err() and the cause of ctx's end
// (context.Cause) when ctx has ended, so that a caller who cancelled with a
// cause (context.WithCancelCause) finds it in the error. It returns err
// unchanged while ctx lives, and ctx's error when err is nil.
func CtxErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if cerr == nil {
		return err
	}
	switch {
	case err == nil:
		err = cerr
	case !errors.Is(err, cerr):
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if cause := context.Cause(ctx); cause != cerr && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}

// NameRoom and DepthRoom are the room a recipe keeps in a path for the
// nodes it makes below its directory: a directory may be at most
// store.MaxPathSize - NameRoom bytes long and store.MaxPathDepth - DepthRoom
// segments deep.
const (
	NameRoom  = 256
	DepthRoom = 4
)

// ValidateDir returns nil if dir can be a recipe's directory, and an error
// wrapping store.ErrInvalidPath otherwise: dir must be a valid path, not
// the root (which cannot be created or deleted, and is shared by
// everything), and leave NameRoom bytes for the names below it.
func ValidateDir(dir string) error {
	if err := store.ValidatePath(dir); err != nil {
		return err
	}
	if dir == "/" {
		return fmt.Errorf("%w %q: a recipe cannot use the root", store.ErrInvalidPath, store.ShortPath(dir))
	}
	if max := store.MaxPathSize - NameRoom; len(dir) > max {
		return fmt.Errorf("%w: %d bytes, at most %d for a recipe's path (%.40q...)", store.ErrInvalidPath, len(dir), max, dir)
	}
	if max := store.MaxPathDepth - DepthRoom; strings.Count(dir, "/") > max {
		return fmt.Errorf("%w: %d segments, at most %d for a recipe's path (%.40q...)", store.ErrInvalidPath, strings.Count(dir, "/"), max, dir)
	}
	return nil
}
