package twophase

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Coordinator is the side of a transaction that began it: it waits for the
// votes and decides. Its methods are safe for concurrent use; it holds no
// ephemeral node, so a coordinator whose session ends loses nothing but its
// ability to decide (see the package doc, Crashes). A nil or zero
// Coordinator is not usable (its methods fail with
// store.ErrInvalidArgument); make one with Begin or Resume.
type Coordinator struct {
	st   store.Store
	path string
	h    header // as begun: undecided
}

// Begin creates the transaction at path, with one slot per participant (in
// any order, each named once, each a valid path segment) and its deadline,
// and returns its coordinator. It fails with ErrExists when a transaction is
// at path already (even a finished one that is not deleted yet; see Resume),
// and with store.ErrInvalidArgument for a nil st, an empty or repeated
// participant or a zero deadline.
//
// Begin blocks for 1 + len(participants) creates. When it fails (ctx ended,
// the store failed) it removes what it made; if a participant joined
// meanwhile it aborts the transaction instead (ReasonCoordinator).
func Begin(ctx context.Context, st store.Store, path string, participants []string, deadline time.Time) (*Coordinator, error) {
	if err := checkStore(st); err != nil {
		return nil, opErr(ctx, "begin", path, err)
	}
	if err := checkNames(path, participants); err != nil {
		return nil, opErr(ctx, "begin", path, err)
	}
	if deadline.IsZero() {
		return nil, opErr(ctx, "begin", path, fmt.Errorf("%w: no deadline", store.ErrInvalidArgument))
	}
	if ctx.Err() != nil {
		return nil, opErr(ctx, "begin", path, ctx.Err())
	}
	h := header{ID: newID(), Deadline: deadline, Participants: slices.Clone(participants)}
	if err := create(ctx, st, path, h); err != nil {
		return nil, opErr(ctx, "begin", path, err)
	}
	c := &Coordinator{st: st, path: path, h: h}
	if _, err := c.makeSlots(ctx); err != nil {
		return nil, opErr(ctx, "begin", path, errors.Join(err, c.undo(ctx, participants)))
	}
	return c, nil
}

// makeSlots creates the participants' slots that are not there yet, and
// returns those it created. A slot there already is Begin's, made before a
// lost reply or a crash.
func (c *Coordinator) makeSlots(ctx context.Context) ([]string, error) {
	var made []string
	for _, name := range c.h.Participants {
		_, err := retry(ctx, c.st, func() (store.Node, error) {
			return c.st.Create(ctx, store.Join(c.path, name), nil, store.Persistent)
		})
		switch {
		case err == nil:
			made = append(made, name)
		case !errors.Is(err, store.ErrNodeExists):
			return made, err
		}
	}
	return made, nil
}

// Resume returns the coordinator of the transaction at path, for a
// coordinator that restarted after a crash (its session ended) to take its
// transaction back: to Wait for the decision (deciding it as Wait does),
// Abort it, or Forget it once decided. Compare ID with the one Begin gave
// to tell the transaction from a later one at the same path.
//
// When the transaction is undecided and Begin crashed before it made every
// slot, Resume makes the missing ones, so the transaction can still commit.
// It fails with ErrNoTransaction when there is no transaction at path,
// store.ErrInvalidArgument for a nil st and store.ErrInvalidPath for a bad
// path. Several coordinators of one transaction are safe: each decision is
// written once, whoever writes it.
func Resume(ctx context.Context, st store.Store, path string) (*Coordinator, error) {
	c, err := resume(ctx, st, path)
	if err != nil {
		return nil, opErr(ctx, "resume", path, err)
	}
	return c, nil
}

func resume(ctx context.Context, st store.Store, path string) (*Coordinator, error) {
	if err := checkStore(st); err != nil {
		return nil, err
	}
	if err := store.ValidatePath(path); err != nil {
		return nil, err
	}
	h, _, err := readHeader(ctx, st, path)
	if err != nil {
		return nil, err
	}
	decided := h.decided()
	// As begun: the decision is read from the header, never from c.h.
	h.Outcome, h.Reason, h.Participant, h.Forgotten = "", "", "", false
	c := &Coordinator{st: st, path: path, h: h}
	if decided {
		return c, nil
	}
	made, err := c.makeSlots(ctx)
	if err != nil || len(made) == 0 {
		return c, err
	}
	// Decided (abort: a missing slot never commits), forgotten or
	// collected while the slots were made: those slots (and a header
	// parent the creates made again) would stay until Collect, so they go.
	now, _, err := readHeader(ctx, st, path)
	if err == nil && !now.decided() {
		return c, nil
	}
	for _, name := range made {
		_ = st.Delete(ctx, store.Join(path, name))
	}
	if errors.Is(err, ErrNoTransaction) {
		_ = st.Delete(ctx, path)
		return nil, err
	}
	return c, nil
}

// ID returns the transaction's ID, written in its header by Begin: it tells
// this transaction from another begun later at the same path. "" for a nil
// Coordinator.
func (c *Coordinator) ID() string {
	if c == nil {
		return ""
	}
	return c.h.ID
}

// create creates the header at path; a create whose reply was lost is found
// again by its ID.
func create(ctx context.Context, st store.Store, path string, h header) error {
	_, err := retry(ctx, st, func() (store.Node, error) { return st.Create(ctx, path, h.encode(), store.Persistent) })
	if !errors.Is(err, store.ErrNodeExists) {
		return err
	}
	got, _, rerr := readHeader(ctx, st, path)
	if rerr == nil && got.ID == h.ID {
		return nil
	}
	return ErrExists
}

// undo removes what a failed Begin made: the slots made, then the header;
// when a slot cannot go (a participant joined), it aborts the transaction.
func (c *Coordinator) undo(ctx context.Context, made []string) error {
	gctx, cancel := recipe.GraceContext(ctx)
	defer cancel()
	for _, name := range made {
		if err := c.st.Delete(gctx, store.Join(c.path, name)); err != nil && !errors.Is(err, store.ErrNoNode) {
			_, derr := decide(gctx, c.st, c.path, c.h.aborted(ReasonCoordinator, ""))
			return derr
		}
	}
	if err := c.st.Delete(gctx, c.path); err != nil && !errors.Is(err, store.ErrNoNode) {
		_, derr := decide(gctx, c.st, c.path, c.h.aborted(ReasonCoordinator, ""))
		return derr
	}
	return nil
}

// usable reports a Coordinator not made by Begin (or Resume): a nil or
// zero one.
func (c *Coordinator) usable(ctx context.Context, op string) error {
	if c == nil || c.st == nil {
		return opErr(ctx, op, c.Path(), fmt.Errorf("%w: coordinator not made by Begin", store.ErrInvalidArgument))
	}
	return nil
}

// Path returns the path of the transaction; "" for a nil Coordinator.
func (c *Coordinator) Path() string {
	if c == nil {
		return ""
	}
	return c.path
}

// Wait blocks until the transaction is decided, ctx is done or the session
// ends, deciding it itself as soon as a rule of the package doc applies: it
// watches the header, every slot not voted yet, and the alive nodes of the
// participants that joined, and wakes on their changes and at the deadline.
// It returns nil for a commit and an *AbortError (ErrAborted) for an abort;
// a Wait cut short (ctx, session) returns that error and leaves the
// transaction as it was, for a later Wait, a participant or the deadline to
// decide.
func (c *Coordinator) Wait(ctx context.Context) error {
	if err := c.usable(ctx, "wait"); err != nil {
		return err
	}
	for attempt := 0; ; {
		h, err := c.round(ctx)
		switch {
		case err == nil && h.decided():
			return h.outcome()
		case err == nil:
			attempt = 0
		case recipe.RideOut(ctx, c.st, err, attempt):
			attempt++
		default:
			return opErr(ctx, "wait", c.path, err)
		}
	}
}

// round looks at the transaction once, with watches on what could decide
// it: it returns the decision when there is one or it makes one, and
// otherwise waits for the next change (or the deadline) and returns an
// undecided header.
func (c *Coordinator) round(ctx context.Context) (header, error) {
	wctx, stop := context.WithCancel(ctx)
	defer stop() // drops the watches that did not fire
	h, ev, _, err := watchHeader(wctx, c.st, c.path)
	if err != nil || h.decided() {
		return h, err
	}
	changes := []<-chan store.Event{ev}
	var abortVote, lost string
	commits := 0
	for _, name := range c.h.Participants {
		v, watches, err := c.slot(wctx, name)
		if err != nil {
			return header{}, err
		}
		changes = append(changes, watches...)
		switch v {
		case voteCommit:
			commits++
		case voteAbort:
			abortVote = cmp(abortVote, name)
		case lostVote:
			lost = cmp(lost, name)
		}
	}
	switch {
	case abortVote != "":
		return decide(ctx, c.st, c.path, c.h.aborted(ReasonVote, abortVote))
	case commits == len(c.h.Participants):
		return decide(ctx, c.st, c.path, c.h.committed())
	case lost != "":
		return decide(ctx, c.st, c.path, c.h.aborted(ReasonLost, lost))
	}
	wait := time.Until(c.h.Deadline)
	if wait <= 0 {
		return decide(ctx, c.st, c.path, c.h.aborted(ReasonDeadline, ""))
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	if _, e, err := recipe.FirstEvent(ctx, changes, t.C); err != nil {
		return header{}, err
	} else if e.Err != nil {
		if ctx.Err() != nil {
			return header{}, ctx.Err()
		}
		return header{}, e.Err // the caller rides out a lost connection
	}
	return header{}, nil
}

// cmp keeps the first name reported.
func cmp(have, name string) string {
	if have != "" {
		return have
	}
	return name
}

// lostVote is what slot reports for a participant that joined and lost its
// alive node without voting.
const lostVote = "lost"

// slot reads the state of a participant's slot ("", joined, voteCommit,
// voteAbort or lostVote) and watches what can change it: the slot's data
// until the vote, and the alive nodes while joined.
func (c *Coordinator) slot(ctx context.Context, name string) (string, []<-chan store.Event, error) {
	p := store.Join(c.path, name)
	stat, ev, err := store.WatchNode(ctx, c.st, p)
	if errors.Is(err, store.ErrNoNode) {
		// Not made (Begin still running, or it crashed): never commit.
		made, ev, err := watchSlot(ctx, c.st, c.path, name)
		if err != nil || made {
			return "", nil, err // made meanwhile: the caller looks again
		}
		return "", []<-chan store.Event{ev}, nil
	}
	switch {
	case err != nil:
		return "", nil, err
	case stat.Version >= versionVoted:
		n, err := c.st.Get(ctx, p)
		if err != nil {
			return "", nil, err
		}
		return string(n.Data), nil, nil
	case stat.Version < versionJoined:
		return "", []<-chan store.Event{ev}, nil
	}
	// Joined: alive while an alive node is there. The slot is read again
	// after the listing: a participant writes its vote before it deletes
	// its alive node, so a vote written before the node went is seen.
	kids, cev, err := c.st.ChildrenW(ctx, p)
	if err != nil {
		return "", nil, err
	}
	for _, k := range kids {
		if alive(k.Name) {
			return joined, []<-chan store.Event{ev, cev}, nil
		}
	}
	n, err := c.st.Get(ctx, p)
	if err != nil {
		return "", nil, err
	}
	if n.Version >= versionVoted {
		return string(n.Data), nil, nil
	}
	return lostVote, nil, nil
}

// alive reports whether name is an alive node's (zkstore puts a protected
// prefix in front).
func alive(name string) bool { return strings.Contains(name, alivePrefix) }

// Abort aborts the transaction unless it is decided already. It returns nil
// when the transaction is aborted (by this call or before it) and
// ErrCommitted when it had committed.
func (c *Coordinator) Abort(ctx context.Context) error {
	if err := c.usable(ctx, "abort"); err != nil {
		return err
	}
	h, err := decide(ctx, c.st, c.path, c.h.aborted(ReasonCoordinator, ""))
	if err != nil {
		return opErr(ctx, "abort", c.path, err)
	}
	if h.Outcome == voteCommit {
		return opErr(ctx, "abort", c.path, ErrCommitted)
	}
	return nil
}

// Forget tells that the coordinator no longer needs the transaction; the
// last of the coordinator and the participants to forget it deletes it (see
// the package doc). It fails with ErrUndecided while the transaction is
// undecided, and does nothing when it is gone already.
func (c *Coordinator) Forget(ctx context.Context) error {
	if err := c.usable(ctx, "forget"); err != nil {
		return err
	}
	for {
		h, version, err := readHeader(ctx, c.st, c.path)
		switch {
		case errors.Is(err, ErrNoTransaction):
			return nil
		case err != nil:
			return opErr(ctx, "forget", c.path, err)
		case !h.decided():
			return opErr(ctx, "forget", c.path, ErrUndecided)
		case h.Forgotten:
			return opErr(ctx, "forget", c.path, forget(ctx, c.st, c.path))
		}
		h.Forgotten = true
		_, err = retry(ctx, c.st, func() (store.Node, error) { return c.st.Set(ctx, c.path, h.encode(), version) })
		if errors.Is(err, store.ErrBadVersion) || errors.Is(err, store.ErrNoNode) {
			continue // read it again
		}
		if err != nil {
			return opErr(ctx, "forget", c.path, err)
		}
		return opErr(ctx, "forget", c.path, forget(ctx, c.st, c.path))
	}
}
