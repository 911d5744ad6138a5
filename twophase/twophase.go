// Package twophase is ZooKeeper's two-phase commit recipe on a store.Store:
// a coordinator asks named participants to vote on a transaction, and the
// transaction commits only when every participant voted commit. It runs
// unchanged on ZooKeeper (zkstore), etcd (etcdstore) and in memory
// (memstore).
//
// # Nodes
//
// A transaction is a node and one child per participant, all persistent:
//
//	<path>                  the header: deadline, participants, and the decision
//	<path>/<participant>    the participant's slot: "" → "joined" → "commit" | "abort"
//	<path>/<participant>/alive-NNN   ephemeral, while the participant has joined
//	                                 and not yet voted
//
// [Begin] creates the header (version 0, undecided) and the slots. [Join]
// creates the participant's ephemeral alive node and marks its slot "joined";
// [Participant.Vote] writes "commit" or "abort" into the slot, once (the write
// is conditional on the slot's version, so a second vote fails with
// [ErrVoted]), and then deletes the alive node.
//
// # The decision
//
// The decision is written into the header, by a write conditional on its
// version being 0: whoever writes first decides, for everyone, for good, and
// later attempts read the decision instead. It is commit when every slot says
// "commit", and abort when
//
//   - a participant voted abort (it decides itself, at once: [ReasonVote]);
//   - a participant that joined lost its alive node without voting: its
//     session ended, or it gave up ([ReasonLost]);
//   - the deadline passed first ([ReasonDeadline]), or the coordinator aborted
//     ([ReasonCoordinator]).
//
// [Coordinator.Wait] drives the decision: it watches the header, the slots and
// the alive nodes of the participants that joined, and decides as soon as a
// rule applies. So does every participant in part: a participant that votes
// commit reads the other slots and decides commit if its vote was the last;
// one that votes abort decides abort; and every party waiting for the outcome
// decides abort when the deadline passes. Everyone learns the decision from a
// watch on the header, never by polling.
//
// # Crashes
//
//   - Coordinator, any time: after a restart (a new session) it takes its
//     transaction back with [Resume], by path, and checks [Coordinator.ID]
//     against the one Begin gave; then it Waits, Aborts or Forgets as
//     before, or abandons it safely (Abort, and Collect once the parties
//     had the time to learn the outcome). Begin at the path says ErrExists.
//   - Coordinator, after the decision: nothing is lost; the participants
//     learn the decision from the header, now or after a restart.
//   - Coordinator, before the decision: the last participant to vote commit
//     decides commit; otherwise an abort vote, or the deadline (any waiting
//     participant decides it) aborts. A participant whose session is lost
//     before it votes is then only noticed by the deadline.
//   - Coordinator during Begin: the slots it did not make can never say
//     commit, so the deadline aborts unless a Resume makes them; a Begin that fails removes what it made,
//     or aborts the transaction if a participant joined already.
//   - Participant, before voting: its alive node goes with its session, and
//     the coordinator aborts at once; a participant that restarts and joins
//     again in time (with a new session) can still vote.
//   - Participant, after voting: its vote stands; after a restart it calls
//     Join (or [Await]) and Wait to learn the outcome, which the header keeps
//     until the transaction is forgotten.
//
// Deadlines are compared with each party's own clock: a fast clock aborts
// early, never inconsistently.
//
// # Garbage collection
//
// A finished transaction is deleted by the last of its parties to forget it:
// each participant calls [Participant.Forget] once it has acted on the
// outcome (it deletes its slot), and the coordinator calls
// [Coordinator.Forget] (it marks the header). Whichever of them finds no slot
// left and the header marked deletes the header, and with it the
// directories above it that the store made (see Parents in the store
// package): nothing of the transaction is left. Until then anyone can read
// the outcome again; after it, [Await] and [Join] fail with
// [ErrNoTransaction]. A party that never forgets (it crashed for good) keeps
// the transaction in the store; [Collect] deletes a decided transaction
// whatever its parties did, for a janitor.
//
// All calls take a ctx, ride out a lost connection while the session lives
// and are safe for concurrent use. Errors match the sentinels of this
// package and of store with errors.Is; an abort is an *AbortError, which
// matches [ErrAborted]. Bad input is store.ErrInvalidArgument (a nil store,
// a nil or zero Coordinator or Participant, a bad participant list) or
// store.ErrInvalidPath; a nil ctx panics, as Go's convention is for a nil
// Context (pass context.TODO when unsure).
package twophase

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Reason says why a transaction aborted.
type Reason int

const (
	// ReasonVote: a participant voted abort.
	ReasonVote Reason = iota + 1
	// ReasonLost: a participant that had joined lost its alive node before
	// it voted (its session ended, or its Join gave up).
	ReasonLost
	// ReasonDeadline: the deadline passed before every participant voted.
	ReasonDeadline
	// ReasonCoordinator: the coordinator aborted (Coordinator.Abort, or a
	// Begin that failed after a participant had joined).
	ReasonCoordinator
)

var reasons = map[Reason]string{
	ReasonVote:        "vote",
	ReasonLost:        "lost",
	ReasonDeadline:    "deadline",
	ReasonCoordinator: "coordinator",
}

func (r Reason) String() string {
	if s, ok := reasons[r]; ok {
		return s
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

func parseReason(s string) Reason {
	for r, name := range reasons {
		if name == s {
			return r
		}
	}
	return 0
}

// Errors of the package.
var (
	// ErrAborted: the transaction aborted. The error is an *AbortError that
	// says why.
	ErrAborted = errors.New("twophase: transaction aborted")
	// ErrCommitted: Coordinator.Abort came after the commit.
	ErrCommitted = errors.New("twophase: transaction committed")
	// ErrVoted: a participant voted again; its first vote stands.
	ErrVoted = errors.New("twophase: already voted")
	// ErrNotParticipant: Join with a name the transaction does not list.
	ErrNotParticipant = errors.New("twophase: not a participant")
	// ErrNoTransaction: there is no transaction at the path (never begun,
	// or forgotten by all its parties and deleted).
	ErrNoTransaction = errors.New("twophase: no such transaction")
	// ErrExists: Begin at a path where a transaction exists.
	ErrExists = errors.New("twophase: transaction exists")
	// ErrUndecided: Forget or Collect of a transaction not decided yet.
	ErrUndecided = errors.New("twophase: transaction not decided")
)

// AbortError is the outcome of an aborted transaction, as Wait and Await
// return it. It matches ErrAborted with errors.Is.
type AbortError struct {
	Reason Reason
	// Participant is the participant that voted abort or was lost; "" for
	// the deadline and the coordinator.
	Participant string
}

func (e *AbortError) Error() string {
	if e == nil {
		return ErrAborted.Error()
	}
	switch e.Reason {
	case ReasonVote:
		return fmt.Sprintf("twophase: transaction aborted: participant %q voted abort", e.Participant)
	case ReasonLost:
		return fmt.Sprintf("twophase: transaction aborted: participant %q lost before it voted", e.Participant)
	case ReasonDeadline:
		return "twophase: transaction aborted: deadline passed"
	case ReasonCoordinator:
		return "twophase: transaction aborted by the coordinator"
	}
	return fmt.Sprintf("twophase: transaction aborted (%v)", e.Reason)
}

// Unwrap returns ErrAborted.
func (e *AbortError) Unwrap() error { return ErrAborted }

// The states of a slot, and the outcomes of a header.
const (
	joined        = "joined"
	voteCommit    = "commit"
	voteAbort     = "abort"
	alivePrefix   = "alive-"
	versionJoined = 1 // a slot's version once joined
	versionVoted  = 2 // and once voted
)

// header is the data of a transaction's node.
type header struct {
	// ID tells the Begin that made the node from any other, for a create
	// whose reply was lost.
	ID           string    `json:"id"`
	Deadline     time.Time `json:"deadline"`
	Participants []string  `json:"participants"`
	Outcome      string    `json:"outcome,omitempty"` // voteCommit or voteAbort
	Reason       string    `json:"reason,omitempty"`
	Participant  string    `json:"participant,omitempty"`
	// Forgotten is set by the coordinator's Forget.
	Forgotten bool `json:"coordinatorForgotten,omitempty"`
}

func (h header) decided() bool { return h.Outcome != "" }

// outcome returns nil for a commit, an *AbortError for an abort.
func (h header) outcome() error {
	if h.Outcome == voteCommit {
		return nil
	}
	return &AbortError{Reason: parseReason(h.Reason), Participant: h.Participant}
}

// aborted returns h decided abort for reason.
func (h header) aborted(reason Reason, participant string) header {
	h.Outcome, h.Reason, h.Participant = voteAbort, reason.String(), participant
	return h
}

func (h header) committed() header {
	h.Outcome = voteCommit
	return h
}

func (h header) encode() []byte {
	data, err := json.Marshal(h)
	if err != nil {
		panic(err) // strings, a time and a bool always marshal
	}
	return data
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkNames reports a participant list that cannot be a transaction's.
func checkNames(path string, names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("%w: no participant", store.ErrInvalidArgument)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if err := checkName(path, n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("%w: participant %q twice", store.ErrInvalidArgument, n)
		}
		seen[n] = true
	}
	return nil
}

func checkName(path, name string) error {
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%w: participant name %q", store.ErrInvalidArgument, name)
	}
	return store.ValidatePath(store.Join(path, name))
}

// checkStore reports a nil store, as sync and queue do.
func checkStore(st store.Store) error {
	if st == nil {
		return fmt.Errorf("%w: nil store", store.ErrInvalidArgument)
	}
	return nil
}

// readHeader reads the transaction at path, with the node's version.
func readHeader(ctx context.Context, st store.Store, path string) (header, int64, error) {
	n, err := retry(ctx, st, func() (store.Node, error) { return st.Get(ctx, path) })
	if errors.Is(err, store.ErrNoNode) {
		return header{}, 0, ErrNoTransaction
	}
	if err != nil {
		return header{}, 0, err
	}
	var h header
	if err := json.Unmarshal(n.Data, &h); err != nil || h.ID == "" {
		return header{}, 0, fmt.Errorf("%w: %q holds no transaction", ErrNoTransaction, store.ShortPath(path))
	}
	return h, n.Version, nil
}

// decide writes d, a decided header, over the undecided one (version 0) at
// path, and returns the decision that stands: d, or the one written first.
func decide(ctx context.Context, st store.Store, path string, d header) (header, error) {
	_, err := retry(ctx, st, func() (store.Node, error) { return st.Set(ctx, path, d.encode(), 0) })
	switch {
	case err == nil:
		return d, nil
	case errors.Is(err, store.ErrNoNode):
		return header{}, ErrNoTransaction
	case !errors.Is(err, store.ErrBadVersion):
		return header{}, err
	}
	// Decided already (or ours, applied before a lost reply): read it.
	h, _, err := readHeader(ctx, st, path)
	if err == nil && !h.decided() {
		err = fmt.Errorf("%w: %q changed but is not decided", ErrNoTransaction, store.ShortPath(path))
	}
	return h, err
}

// await blocks until the transaction at path, begun as base, is decided, and
// returns the decision. When base's deadline passes first it decides abort
// itself. It watches the header: no polling.
func await(ctx context.Context, st store.Store, path string, base header) (header, error) {
	for attempt := 0; ; attempt++ {
		h, ev, stop, err := watchHeader(ctx, st, path)
		if err != nil {
			if recipe.RideOut(ctx, st, err, attempt) {
				continue
			}
			return header{}, err
		}
		if h.decided() {
			stop()
			return h, nil
		}
		wait := time.Until(base.Deadline)
		if wait <= 0 {
			stop()
			return decide(ctx, st, path, base.aborted(ReasonDeadline, ""))
		}
		t := time.NewTimer(wait)
		select {
		case e := <-ev:
			if e.Err != nil && !recipe.RideOut(ctx, st, e.Err, attempt) {
				t.Stop()
				stop()
				return header{}, recipe.CtxErr(ctx, e.Err)
			}
		case <-t.C:
		}
		t.Stop()
		stop()
	}
}

// watchHeader returns the header at path, and when it is undecided a watch of
// its next change and the function that drops the watch.
func watchHeader(ctx context.Context, st store.Store, path string) (header, <-chan store.Event, context.CancelFunc, error) {
	wctx, stop := context.WithCancel(ctx)
	stat, ev, err := store.WatchNode(wctx, st, path)
	switch {
	case errors.Is(err, store.ErrNoNode):
		stop()
		return header{}, nil, nil, ErrNoTransaction
	case err != nil:
		stop()
		return header{}, nil, nil, err
	case stat.Version == 0:
		// Undecided: the header is the one Begin wrote, and the watch
		// reports the decision.
		return header{}, ev, stop, nil
	}
	stop()
	h, _, err := readHeader(ctx, st, path)
	return h, nil, func() {}, err
}

// watchSlot reports whether the slot name of the transaction at path
// exists and, when it does not, returns a watch that fires when a child of
// the transaction's node is made or deleted, or the node goes: the slot's
// creation among them. It watches the transaction's node rather than the
// slot's name, whose creation may never come (a coordinator that crashed
// in Begin), so that the watch ends with the transaction at the latest
// (see store.NodeWatcher). A missing transaction is ErrNoTransaction.
func watchSlot(ctx context.Context, st store.Store, path, name string) (bool, <-chan store.Event, error) {
	kids, ev, err := st.ChildrenW(ctx, path)
	if errors.Is(err, store.ErrNoNode) {
		return false, nil, ErrNoTransaction
	}
	if err != nil {
		return false, nil, err
	}
	for _, k := range kids {
		if k.Name == name {
			return true, nil, nil
		}
	}
	return false, ev, nil
}

// forget deletes the transaction at path when nobody needs it any more: no
// slot is left and the coordinator has forgotten it. The delete fails, and
// leaves it, if a slot appears meanwhile.
func forget(ctx context.Context, st store.Store, path string) error {
	h, _, err := readHeader(ctx, st, path)
	if errors.Is(err, ErrNoTransaction) || (err == nil && !h.Forgotten) {
		return nil
	}
	if err != nil {
		return err
	}
	kids, err := retry(ctx, st, func() ([]store.Child, error) { return st.Children(ctx, path) })
	if err != nil || len(kids) > 0 {
		return ignoreNoNode(err)
	}
	_, err = retry(ctx, st, func() (struct{}, error) { return struct{}{}, st.Delete(ctx, path) })
	if errors.Is(err, store.ErrNotEmpty) {
		return nil
	}
	return ignoreNoNode(err)
}

// Await blocks until the transaction at path is decided, ctx is done or the
// session ends, and returns its outcome: nil for a commit, an *AbortError
// (matching ErrAborted) for an abort, and ErrNoTransaction when there is no
// transaction at path. When the transaction's deadline passes first, Await
// decides abort. It is how a party that restarted, or an observer, learns the
// outcome; it writes nothing else and leaves no node.
func Await(ctx context.Context, st store.Store, path string) error {
	if err := checkStore(st); err != nil {
		return opErr(ctx, "await", path, err)
	}
	base, _, err := readHeader(ctx, st, path)
	if err != nil {
		return opErr(ctx, "await", path, err)
	}
	if base.decided() {
		return base.outcome()
	}
	h, err := await(ctx, st, path, base)
	if err != nil {
		return opErr(ctx, "await", path, err)
	}
	return h.outcome()
}

// Collect deletes the decided transaction at path and everything under it,
// whether or not its parties forgot it: for a janitor, once the parties had
// the time to learn the outcome. It fails with ErrUndecided, and deletes
// nothing, while the transaction is undecided (Await decides it once its
// deadline has passed). A transaction already gone is no error.
func Collect(ctx context.Context, st store.Store, path string) error {
	if err := checkStore(st); err != nil {
		return opErr(ctx, "collect", path, err)
	}
	h, _, err := readHeader(ctx, st, path)
	if errors.Is(err, ErrNoTransaction) {
		return nil
	}
	if err == nil && !h.decided() {
		err = ErrUndecided
	}
	if err == nil {
		err = deleteTree(ctx, st, path)
	}
	return opErr(ctx, "collect", path, err)
}

// deleteTree deletes the node at path and everything under it.
func deleteTree(ctx context.Context, st store.Store, path string) error {
	kids, err := retry(ctx, st, func() ([]store.Child, error) { return st.Children(ctx, path) })
	if err != nil {
		return ignoreNoNode(err)
	}
	for _, k := range kids {
		if err := deleteTree(ctx, st, store.Join(path, k.Name)); err != nil {
			return err
		}
	}
	_, err = retry(ctx, st, func() (struct{}, error) { return struct{}{}, st.Delete(ctx, path) })
	return ignoreNoNode(err)
}

func ignoreNoNode(err error) error {
	if errors.Is(err, store.ErrNoNode) {
		return nil
	}
	return err
}

// retry calls fn until it succeeds or fails with anything but a lost
// connection that the session survives.
func retry[T any](ctx context.Context, st store.Store, fn func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := fn()
		if err == nil || !recipe.RideOut(ctx, st, err, attempt) {
			return v, err
		}
	}
}

// opErr reports a failed call, matching ctx.Err() and its cause when ctx
// ended; nil when err is nil.
func opErr(ctx context.Context, op, path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("twophase: %s %q: %w", op, store.ShortPath(path), recipe.CtxErr(ctx, err))
}
