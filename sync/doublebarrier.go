package sync

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Errors of the DoubleBarrier.
var (
	// ErrEntered: Enter was called on a DoubleBarrier that is entered.
	ErrEntered = errors.New("sync: double barrier already entered")
	// ErrNotEntered: Leave was called on a DoubleBarrier that is not
	// entered.
	ErrNotEntered = errors.New("sync: double barrier not entered")
)

// DoubleBarrier is one participant of a double barrier, the ZooKeeper
// recipe: Enter blocks until n participants have entered, so that they start
// a computation together, and Leave blocks until all of them have left, so
// that they end it together. Participants may be on any sessions; each one
// uses its own DoubleBarrier value.
//
// # The limit
//
// n is a limit, not a threshold: every round admits exactly n participants,
// the first n to arrive (in the order of their nodes' Seq). A participant
// that arrives while a round is filling beyond n, or while a released round
// is still inside, waits for the next round, which fills once every member
// of the round before it has left. Every member node records n in its
// name ("member-n3-…"), and an Enter with an n that differs from that of a
// member there fails with ErrMismatch; an n under 1 fails with
// ErrInvalidLimit.
//
// # Layout
//
// Each participant creates an ephemeral sequential "member-" node under the
// barrier's node. The participant that finds n members in the filling round
// releases it by writing the round's first and last Seq into the "ready"
// node, which every other member watches. Leave uses the recipe's
// lowest/highest scheme: the lowest member waits for the highest one to go,
// and every other member deletes its node and waits for the lowest one to
// go, so each departure wakes at most one process until the last, which
// removes the "ready" node in the same atomic step as its own
// (store.Write): once every member has left, nothing of the barrier stays. (A round whose last members
// crashed rather than left keeps its "ready" node until the next round
// replaces it.)
//
// # Failures
//
// A participant whose session ends (a crash, an expiry) loses its ephemeral
// node. Before the round is released it no longer counts: the others go on
// waiting until n live participants are present. After the release it
// counts as having left: Leave never waits for it. In both cases nobody is
// held forever by a dead participant. Only a live member that never calls
// Leave holds its round's other members in Leave, and the next round in
// Enter.
//
// # Options
//
// A DoubleBarrier takes the LockOptions that make sense for it: WithData
// and WithLabel (the data of its member node: the identity record by
// default), WithMeterProvider, WithPathLabel and WithLogger. A member counts
// as a holder from Enter to Leave, and as lost (ErrNodeDeleted, or the
// session's end) when its node goes before it leaves. WithDisconnectPolicy
// is refused (every call fails with store.ErrInvalidArgument): a member
// holds nothing it could lose to a disconnection.
//
// A DoubleBarrier is safe for concurrent use, though one participant enters
// and leaves once at a time: its calls are serialized, Enter on an entered
// participant fails with ErrEntered and Leave on one that is not entered with
// ErrNotEntered. After Leave it may Enter again, into a later round. A
// DoubleBarrier must not be copied after first use; the zero value is not
// usable, make one with NewDoubleBarrier.
type DoubleBarrier struct {
	st   store.Store
	path string
	n    int
	opts lockOptions
	rec  *telemetry.Recorder

	// turn holds a token while no call is running; a call takes it.
	turn chan struct{}
	self *DoubleBarrier // b itself, unless b is a copy

	limit *recipe.Setting // n, as the member nodes record it

	// Guarded by turn.
	entered bool
	me      dbNode  // own node, while entered
	round   dbRound // own round, while entered
	held    *telemetry.Holding
	gone    bool // the own node was found deleted by someone else
}

type dbNode struct {
	path string
	seq  int64
}

// dbRound is the content of the ready node: the Seq of the first and the last
// member of the released round, and the node's version.
type dbRound struct {
	lo, hi  int64
	version int64
}

func (r dbRound) has(seq int64) bool { return r.lo <= seq && seq <= r.hi }

// NewDoubleBarrier returns a participant of the double barrier of n
// participants whose node is at path in st. It does no I/O: an invalid path,
// an n under 1 or one that differs from the stored one are reported by
// Enter. The options are described under Options.
func NewDoubleBarrier(st store.Store, path string, n int, opts ...LockOption) *DoubleBarrier {
	o := newLockOptions(opts)
	if o.policySet && o.bad == nil {
		o.bad = fmt.Errorf("%w: a double barrier has no disconnect policy", store.ErrInvalidArgument)
	}
	b := &DoubleBarrier{st: st, path: path, n: n, opts: o, turn: make(chan struct{}, 1),
		rec: o.recorder(telemetry.KindDoubleBarrier, path, ErrNodeDeleted)}
	b.self = b
	b.limit = limitSetting(names.Member, n)
	b.turn <- struct{}{}
	return b
}

// usable reports a DoubleBarrier that was not made by NewDoubleBarrier,
// with a nil store or a path no barrier can have, or that was copied.
func (b *DoubleBarrier) usable(op string) error {
	var err error
	switch {
	case b == nil || b.turn == nil || b.st == nil:
		err = fmt.Errorf("%w: double barrier not made by NewDoubleBarrier with a store", store.ErrInvalidArgument)
	case b.self != b:
		err = fmt.Errorf("%w: double barrier copied after NewDoubleBarrier made it", store.ErrInvalidArgument)
	case b.opts.bad != nil:
		err = b.opts.bad
	default:
		err = recipe.ValidateDir(b.path)
	}
	if err != nil {
		return fmt.Errorf("sync: %s double barrier %q: %w", op, store.ShortPath(b.Path()), err)
	}
	return nil
}

// Path returns the path of the barrier's node.
func (b *DoubleBarrier) Path() string {
	if b == nil {
		return ""
	}
	return b.path
}

// Enter joins the barrier and blocks until the participant's round of n is
// complete. It fails with ErrMismatch when a member there has another n. A
// lost connection is ridden out while ctx and the session live.
//
// When ctx ends first Enter deletes the participant's node and returns
// ctx.Err(), unless the round was released with it in just then: Enter then
// returns nil and the participant is in, as with golang.org/x/sync's
// semaphore. Should the release and the deletion cross, the others are
// released counting it, and it counts as having left at once, like a
// participant that crashed. When the session ends Enter returns an error
// wrapping its cause, or ErrNodeDeleted when the store reports the node gone
// before the session's end (or someone else deleted it); the participant is
// then out of the barrier.
func (b *DoubleBarrier) Enter(ctx context.Context) error {
	if err := b.usable("enter"); err != nil {
		return err
	}
	if b.n < 1 {
		return fmt.Errorf("%w: double barrier %q of %d", ErrInvalidLimit, store.ShortPath(b.path), b.n)
	}
	if err := b.lock(ctx); err != nil {
		return err
	}
	defer b.unlock()
	if b.entered {
		return fmt.Errorf("sync: enter double barrier %q: %w", store.ShortPath(b.path), ErrEntered)
	}
	a := b.rec.Begin(ctx)
	err := b.enter(ctx, a)
	if err != nil {
		a.Failed(ctx, err)
	}
	return err
}

func (b *DoubleBarrier) enter(ctx context.Context, a telemetry.Attempt) error {
	if err := recipe.Flush(ctx, b.st, b.path); err != nil {
		return b.fail(ctx, "enter", err)
	}
	node, err := recipe.Retry(ctx, b.st, func() (store.Node, error) {
		return b.st.Create(ctx, store.Join(b.path, b.limit.Prefix()), b.opts.nodeData(a.Start()), store.EphemeralSequential)
	})
	if err != nil {
		return b.fail(ctx, "enter", err)
	}
	me := dbNode{path: node.Path, seq: node.Seq}
	r, err := b.awaitRound(ctx, me)
	if err != nil && ctx.Err() != nil {
		r, err = b.lateRound(ctx, me)
	}
	if err != nil {
		return b.fail(ctx, "enter", errors.Join(err, recipe.Remove(ctx, b.st, b.rec, store.Node{Path: me.path, Seq: me.seq})))
	}
	b.entered, b.me, b.round, b.gone = true, me, r, false
	b.held = a.Granted(ctx, node)
	return nil
}

// Leave leaves the barrier and blocks until every member of the
// participant's round has left (or lost its session). Leave on a participant
// that has not entered returns ErrNotEntered.
//
// When ctx ends first Leave deletes the participant's node all the same, so
// that it counts as having left, and returns ctx.Err(). When the session
// ends it returns an error wrapping its cause. Either way the participant is
// no longer entered.
func (b *DoubleBarrier) Leave(ctx context.Context) error {
	if err := b.usable("leave"); err != nil {
		return err
	}
	if err := b.lock(ctx); err != nil {
		return err
	}
	defer b.unlock()
	if !b.entered {
		return fmt.Errorf("sync: leave double barrier %q: %w", store.ShortPath(b.path), ErrNotEntered)
	}
	b.entered = false
	held := b.held
	b.held = nil
	err := b.leave(ctx)
	if err != nil {
		err = b.fail(ctx, "leave", errors.Join(err, recipe.Remove(ctx, b.st, b.rec, store.Node{Path: b.me.path, Seq: b.me.seq})))
	}
	held.End(b.loss(ctx, err))
	return err
}

// loss is the cause of a membership lost before Leave: the session's end,
// the own node deleted by someone else, or a failure to leave; nil when the
// member left (ctx ending in Leave still leaves).
func (b *DoubleBarrier) loss(ctx context.Context, err error) error {
	switch {
	case b.st.Context().Err() != nil:
		return context.Cause(b.st.Context())
	case b.gone:
		return ErrNodeDeleted
	case err != nil && ctx.Err() == nil:
		return err
	}
	return nil
}

func (b *DoubleBarrier) leave(ctx context.Context) error {
	mine := true // the own node should exist
	for attempt := 0; ; attempt++ {
		members, err := b.roundMembers(ctx)
		if err != nil && recipe.RideOut(ctx, b.st, err, attempt) {
			continue
		}
		if err != nil {
			return err
		}
		attempt = -1
		i := dbIndex(members, b.me.path)
		if i < 0 && mine {
			if err := b.st.Context().Err(); err != nil {
				return context.Cause(b.st.Context())
			}
			mine = false // deleted by someone else: it has left
			b.gone = true
		}
		switch {
		case len(members) == 0:
			return nil
		case i == 0 && len(members) == 1:
			return b.leaveLast(ctx)
		case i == 0:
			// Lowest: leave last, once the highest (and so, in turn,
			// every other) member has gone.
			err = recipe.WaitGone(ctx, b.st, members[len(members)-1].path, members[len(members)-1].seq)
		default:
			if i > 0 {
				if err := b.deleteNode(ctx, b.me.path); err != nil {
					return err
				}
				mine = false
			}
			err = recipe.WaitGone(ctx, b.st, members[0].path, members[0].seq)
		}
		if err != nil {
			return err
		}
	}
}

// roundMembers lists the members of the own round still present, by Seq.
func (b *DoubleBarrier) roundMembers(ctx context.Context) ([]dbNode, error) {
	kids, err := b.st.Children(ctx, b.path)
	if errors.Is(err, store.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := recipe.CheckFamily(b.path, kids, names.Members); err != nil {
		return nil, err
	}
	var members []dbNode
	for _, m := range b.members(kids) {
		if b.round.has(m.seq) {
			members = append(members, m)
		}
	}
	return members, nil
}

// awaitRound waits until the participant me is in a released round.
func (b *DoubleBarrier) awaitRound(ctx context.Context, me dbNode) (dbRound, error) {
	waited, attempt := false, 0
	for {
		if waited {
			// After a wait the release is the likely news: one read,
			// without a watch, tells.
			if r, err := b.getRound(ctx); err == nil && r.has(me.seq) {
				return r, nil
			}
		}
		r, in, err := b.enterStep(ctx, me)
		if err != nil && recipe.RideOut(ctx, b.st, err, attempt) {
			attempt++
			continue
		}
		if err != nil || in {
			return r, err
		}
		waited, attempt = true, 0
	}
}

// enterStep looks at the barrier once and reports me's round if it has been
// released. Otherwise it waits for the event that can change that: the
// release of the filling round, or the departure of the previous round's
// lowest member (the last to leave). If the filling round has n members
// already, it releases it instead.
func (b *DoubleBarrier) enterStep(ctx context.Context, me dbNode) (dbRound, bool, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // drops the watch on ready if it did not fire
	released, _, readyEv, err := b.st.ExistsW(wctx, b.readyPath())
	if err != nil {
		return dbRound{}, false, err
	}
	var prev dbRound
	if released {
		prev, err = b.getRound(ctx)
		if errors.Is(err, store.ErrNoNode) {
			return dbRound{}, false, nil // deleted meanwhile: look again
		}
		if err != nil {
			return dbRound{}, false, err
		}
		if prev.has(me.seq) {
			return prev, true, nil
		}
		if me.seq < prev.lo {
			return dbRound{}, false, fmt.Errorf("sync: member %q skipped by round %d..%d", store.ShortPath(me.path), prev.lo, prev.hi)
		}
	}
	kids, err := b.st.Children(ctx, b.path)
	if err != nil {
		return dbRound{}, false, err
	}
	if err := recipe.CheckFamily(b.path, kids, names.Members); err != nil {
		return dbRound{}, false, err
	}
	var old, fresh []dbNode
	found := false
	for _, m := range b.members(kids) {
		if m.seq < me.seq {
			if err := b.limit.Check(b.path, store.Base(m.path)); err != nil {
				return dbRound{}, false, err
			}
		}
		found = found || m.path == me.path
		if released && m.seq <= prev.hi {
			old = append(old, m)
		} else {
			fresh = append(fresh, m)
		}
	}
	if !found {
		return dbRound{}, false, b.lostErr()
	}
	if len(old) > 0 {
		// The previous round is still inside; its lowest member leaves
		// last.
		cancel()
		return dbRound{}, false, recipe.WaitGone(ctx, b.st, old[0].path, old[0].seq)
	}
	if len(fresh) < b.n {
		return dbRound{}, false, barrierAwait(ctx, b.st, readyEv)
	}
	next := dbRound{lo: fresh[0].seq, hi: fresh[b.n-1].seq}
	err = b.publish(ctx, next, released, prev.version)
	switch {
	case errors.Is(err, store.ErrNodeExists), errors.Is(err, store.ErrBadVersion), errors.Is(err, store.ErrNoNode):
		return dbRound{}, false, nil // someone else released a round: look again
	case err != nil:
		return dbRound{}, false, err
	}
	return next, next.has(me.seq), nil
}

// lateRound checks, after ctx ended, whether me's round was released all
// the same, and returns it if so and ctx.Err() otherwise.
func (b *DoubleBarrier) lateRound(ctx context.Context, me dbNode) (dbRound, error) {
	cctx, cancel := recipe.GraceContext(ctx)
	defer cancel()
	r, err := b.getRound(cctx)
	if err == nil && r.has(me.seq) {
		if _, err := b.st.Get(cctx, me.path); err == nil {
			return r, nil
		}
	}
	return dbRound{}, ctx.Err()
}

// members returns the participants' nodes among kids, by Seq.
func (b *DoubleBarrier) members(kids []store.Child) []dbNode {
	var ms []dbNode
	for _, k := range kids {
		if strings.Contains(k.Name, names.Member) {
			ms = append(ms, dbNode{path: store.Join(b.path, k.Name), seq: k.Seq})
		}
	}
	return ms
}

func dbIndex(ms []dbNode, path string) int {
	for i, m := range ms {
		if m.path == path {
			return i
		}
	}
	return -1
}

func (b *DoubleBarrier) readyPath() string { return store.Join(b.path, names.Ready) }

func (b *DoubleBarrier) getRound(ctx context.Context) (dbRound, error) {
	node, err := b.st.Get(ctx, b.readyPath())
	if err != nil {
		return dbRound{}, err
	}
	var r dbRound
	if _, err := fmt.Sscanf(string(node.Data), "%d %d", &r.lo, &r.hi); err != nil {
		return dbRound{}, fmt.Errorf("sync: %q holds %q, not a round: %w", store.ShortPath(node.Path), node.Data, err)
	}
	r.version = node.Version
	return r, nil
}

// publish releases round r by writing it into the ready node, which exists
// (at version) or not.
func (b *DoubleBarrier) publish(ctx context.Context, r dbRound, exists bool, version int64) error {
	data := fmt.Appendf(nil, "%d %d", r.lo, r.hi)
	if !exists {
		_, err := b.st.Create(ctx, b.readyPath(), data, store.Persistent)
		return err
	}
	_, err := b.st.Set(ctx, b.readyPath(), data, version)
	return err
}

// leaveLast removes the own node, the last of its round's, and with it the
// record of the round (the ready node), in one atomic step (store.Write),
// so that a barrier nobody is in leaves nothing behind. The record cannot
// go apart from the node: deleted first, a newcomer would count this
// member in the next round; after, it could be the next round's. While
// the node is there no next round can be released (its members wait for
// the last of this one), so the record is still this round's, at the
// version read. Should it not be (or the store not write atomically), the
// own node goes alone and the record stays for the next round to replace.
func (b *DoubleBarrier) leaveLast(ctx context.Context) error {
	_, err := store.Write(ctx, b.st, nil, []store.Op{
		store.DeleteOp(b.me.path, store.AnyVersion),
		store.DeleteOp(b.readyPath(), b.round.version),
	})
	var refused *store.WriteError
	if err == nil || !errors.As(err, &refused) && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return b.deleteNode(ctx, b.me.path)
}

func (b *DoubleBarrier) deleteNode(ctx context.Context, path string) error {
	err := b.st.Delete(ctx, path)
	if errors.Is(err, store.ErrNoNode) {
		return nil
	}
	return err
}

func (b *DoubleBarrier) lostErr() error {
	recipe.SyncSession(b.st)
	if b.st.Context().Err() != nil {
		return context.Cause(b.st.Context())
	}
	return ErrNodeDeleted
}

func (b *DoubleBarrier) fail(ctx context.Context, op string, err error) error {
	return fmt.Errorf("sync: %s double barrier %q: %w", op, store.ShortPath(b.path), recipe.CtxErr(ctx, err))
}

// lock takes the participant's turn. A free turn is taken even when ctx
// has ended, so that a cancelled Leave still leaves.
func (b *DoubleBarrier) lock(ctx context.Context) error {
	select {
	case <-b.turn:
		return nil
	default:
	}
	select {
	case <-b.turn:
		return nil
	case <-ctx.Done():
		return recipe.CtxErr(ctx, nil)
	}
}

func (b *DoubleBarrier) unlock() { b.turn <- struct{}{} }
