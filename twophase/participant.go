package twophase

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Participant is one participant of a transaction, joined through one
// session. Its methods are safe for concurrent use. A nil or zero
// Participant is not usable (its methods fail with
// store.ErrInvalidArgument); make one with Join.
//
// While it has joined and not voted, the participant's session holds its
// alive node: if the session ends, the coordinator aborts the transaction
// (ReasonLost). After its vote, its session may end freely: the vote stands
// and a new session can Join again to learn the outcome.
type Participant struct {
	st   store.Store
	path string
	name string
	h    header // as read at Join

	mu    gosync.Mutex
	alive store.Node // the alive node, with Path "" when none
	voted bool       // a vote is in the slot
}

// Join joins the transaction at path as the participant name, through st's
// session, and returns the participant. It fails with ErrNoTransaction when
// there is no transaction at path, and with ErrNotParticipant when name is
// not one of its participants (store.ErrInvalidArgument for a nil st or a
// name that cannot be a slot's). If Begin has not made the slot yet, Join
// waits for it; if the transaction is decided meanwhile (its deadline passed,
// say), Join returns the outcome's error.
//
// Join creates the participant's alive node (ephemeral) and marks its slot
// joined. A participant that joins again after a restart keeps the vote it
// had written: Vote then fails with ErrVoted, and Wait reports the outcome.
// A Join that fails removes its alive node, so the transaction is as before;
// one that fails after it marked the slot aborts the transaction as a lost
// participant would.
func Join(ctx context.Context, st store.Store, path, name string) (*Participant, error) {
	p, err := join(ctx, st, path, name)
	if err != nil {
		return nil, opErr(ctx, "join", path, err)
	}
	return p, nil
}

func join(ctx context.Context, st store.Store, path, name string) (*Participant, error) {
	if err := checkStore(st); err != nil {
		return nil, err
	}
	if err := checkName(path, name); err != nil {
		return nil, err
	}
	h, _, err := readHeader(ctx, st, path)
	if err != nil {
		return nil, err
	}
	if !contains(h.Participants, name) {
		return nil, fmt.Errorf("%w: %q", ErrNotParticipant, name)
	}
	p := &Participant{st: st, path: path, name: name, h: h}
	slot, err := p.waitSlot(ctx)
	if err != nil {
		return nil, err
	}
	if slot.Version >= versionVoted {
		p.voted = true
		return p, nil
	}
	// The alive node first, then the mark: a slot marked joined without an
	// alive node means a participant lost.
	n, err := st.Create(ctx, store.Join(p.slot(), alivePrefix), nil, store.EphemeralSequential)
	if err != nil {
		return nil, err
	}
	p.alive = n
	if slot.Version == 0 {
		_, err = retry(ctx, st, func() (store.Node, error) { return st.Set(ctx, p.slot(), []byte(joined), 0) })
		if errors.Is(err, store.ErrBadVersion) {
			err = p.rejoined(ctx)
		}
	}
	if err != nil {
		return nil, errors.Join(err, recipe.Remove(ctx, st, nil, p.alive))
	}
	return p, nil
}

// rejoined handles a Join that found its slot marked meanwhile: by another
// session of the same participant, which may have voted.
func (p *Participant) rejoined(ctx context.Context) error {
	n, err := retry(ctx, p.st, func() (store.Node, error) { return p.st.Get(ctx, p.slot()) })
	if err != nil {
		return err
	}
	if n.Version >= versionVoted {
		p.voted = true
		err := recipe.Remove(ctx, p.st, nil, p.alive)
		p.alive = store.Node{}
		return err
	}
	return nil
}

// waitSlot returns the participant's slot, waiting for Begin to make it.
func (p *Participant) waitSlot(ctx context.Context) (store.Node, error) {
	for attempt := 0; ; {
		n, err := p.st.Get(ctx, p.slot())
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, store.ErrNoNode):
			if err := p.awaitSlot(ctx); err != nil {
				return store.Node{}, err
			}
		case recipe.RideOut(ctx, p.st, err, attempt):
			attempt++
		default:
			return store.Node{}, err
		}
	}
}

// awaitSlot waits until the slot exists, or fails with the outcome when
// the transaction is decided first (deciding abort at the deadline).
func (p *Participant) awaitSlot(ctx context.Context) error {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	exists, sev, err := watchSlot(wctx, p.st, p.path, p.name)
	if err != nil || exists {
		return err
	}
	h, hev, _, err := watchHeader(wctx, p.st, p.path)
	if err != nil {
		return err
	}
	if h.decided() {
		return h.outcome()
	}
	wait := time.Until(p.h.Deadline)
	if wait <= 0 {
		h, err := decide(ctx, p.st, p.path, p.h.aborted(ReasonDeadline, ""))
		if err != nil {
			return err
		}
		return h.outcome()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-sev:
	case <-hev:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (p *Participant) slot() string { return store.Join(p.path, p.name) }

// usable reports a Participant not made by Join: a nil or zero one.
func (p *Participant) usable(ctx context.Context, op string) error {
	if p == nil || p.st == nil {
		path := ""
		if p != nil {
			path = p.path
		}
		return opErr(ctx, op, path, fmt.Errorf("%w: participant not made by Join", store.ErrInvalidArgument))
	}
	return nil
}

// Name returns the participant's name; "" for a nil Participant.
func (p *Participant) Name() string {
	if p == nil {
		return ""
	}
	return p.name
}

// Vote writes the participant's vote, commit or abort, once: a second vote
// (through this value or another session of the same participant) fails with
// ErrVoted and changes nothing. After the vote it removes its alive node,
// and then takes its part in the decision: an abort vote decides abort at
// once, and a commit vote that finds every other slot voted commit decides
// commit. Vote does not wait for the outcome (see Wait). A vote after the
// decision is recorded and changes nothing.
func (p *Participant) Vote(ctx context.Context, commit bool) error {
	if err := p.usable(ctx, "vote"); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.voted {
		return opErr(ctx, "vote", p.path, fmt.Errorf("%w: %q", ErrVoted, p.name))
	}
	vote := voteAbort
	if commit {
		vote = voteCommit
	}
	_, err := retry(ctx, p.st, func() (store.Node, error) { return p.st.Set(ctx, p.slot(), []byte(vote), versionJoined) })
	switch {
	case errors.Is(err, store.ErrBadVersion):
		// Voted already, or ours applied before a lost reply.
		n, gerr := p.st.Get(ctx, p.slot())
		if gerr != nil || n.Version < versionVoted || string(n.Data) != vote {
			return opErr(ctx, "vote", p.path, errors.Join(fmt.Errorf("%w: %q", ErrVoted, p.name), gerr))
		}
	case errors.Is(err, store.ErrNoNode):
		return opErr(ctx, "vote", p.path, ErrNoTransaction)
	case err != nil:
		return opErr(ctx, "vote", p.path, err)
	}
	p.voted = true
	// The alive node goes only now that the vote is in (see Coordinator).
	// One that cannot go now is the session's cleaner's.
	if p.alive.Path != "" {
		_ = recipe.Remove(ctx, p.st, nil, p.alive)
		p.alive = store.Node{}
	}
	if !commit {
		_, err = decide(ctx, p.st, p.path, p.h.aborted(ReasonVote, p.name))
	} else {
		err = p.commitIfLast(ctx)
	}
	return opErr(ctx, "vote", p.path, err)
}

// commitIfLast decides commit when every slot says commit.
func (p *Participant) commitIfLast(ctx context.Context) error {
	for _, name := range p.h.Participants {
		n, err := retry(ctx, p.st, func() (store.Node, error) { return p.st.Get(ctx, store.Join(p.path, name)) })
		if errors.Is(err, store.ErrNoNode) {
			return nil // a slot Begin did not make: never commits
		}
		if err != nil {
			return err
		}
		if string(n.Data) != voteCommit {
			return nil // the coordinator, a later voter or the deadline decides
		}
	}
	_, err := decide(ctx, p.st, p.path, p.h.committed())
	return err
}

// Wait blocks until the transaction is decided, ctx is done or the session
// ends, and returns the outcome: nil for a commit, an *AbortError (matching
// ErrAborted) for an abort. When the deadline passes first, Wait decides
// abort. It watches the transaction's header, so the decision wakes it; it
// leaves no node.
func (p *Participant) Wait(ctx context.Context) error {
	if err := p.usable(ctx, "wait"); err != nil {
		return err
	}
	h, err := await(ctx, p.st, p.path, p.h)
	if err != nil {
		return opErr(ctx, "wait", p.path, err)
	}
	return h.outcome()
}

// Forget tells that the participant no longer needs the transaction (it has
// acted on the outcome): it deletes the participant's slot, and the whole
// transaction when it is the last party to forget (see the package doc).
// It fails with ErrUndecided while the transaction is undecided, and does
// nothing when the transaction is gone already.
func (p *Participant) Forget(ctx context.Context) error {
	if err := p.usable(ctx, "forget"); err != nil {
		return err
	}
	h, _, err := readHeader(ctx, p.st, p.path)
	switch {
	case errors.Is(err, ErrNoTransaction):
		return nil
	case err != nil:
		return opErr(ctx, "forget", p.path, err)
	case !h.decided():
		return opErr(ctx, "forget", p.path, ErrUndecided)
	}
	p.mu.Lock()
	p.alive = store.Node{} // deleted with the slot
	p.mu.Unlock()
	if err := deleteTree(ctx, p.st, p.slot()); err != nil {
		return opErr(ctx, "forget", p.path, err)
	}
	return opErr(ctx, "forget", p.path, forget(ctx, p.st, p.path))
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}
