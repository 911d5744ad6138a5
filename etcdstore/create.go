package etcdstore

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

// Create creates the node at p; see [store.Store]. A sequential node's name
// is p followed by 16 hexadecimal digits: random, or those of a node of this
// session that was deleted with DeleteSeq (see Names in the package doc).
//
// The create is one transaction: it checks that the node does not exist and
// that its parent exists and is not attached to a lease, and puts the node;
// when the parent is missing and no ancestor is attached to a lease, the
// same transaction makes the missing ancestors, as persistent empty keys,
// and puts the node. (For the deepest paths, or data over 256 KiB, that
// would not fit one request: then a transaction of its own checks the
// ancestors and makes the missing ones first, and the create is sent
// again.) Each is one attempt, given up after the attempt timeout. When
// the outcome of a sequential create is unknown (its reply was lost or did
// not come in time: ErrDisconnected), Create sends the same transaction
// again with the same unique name until it gets an answer, ctx ends or the
// session ends; the node it then finds under that name with
// this session's lease is the one it created, so a lost reply never makes a
// duplicate. A non-sequential create with an unknown outcome fails with
// ErrDisconnected.
//
// When ctx ends while an attempt may be applied, Create has the node undone
// (see Abandoned creates in the package doc), waits for that at most one
// attempt timeout, and returns ctx's error; the undo goes on until it is
// done or the session ends.
func (s *Store) Create(ctx context.Context, p string, data []byte, mode store.Mode) (store.Node, error) {
	n, _, _, err := s.create(ctx, p, data, mode, listNone, 0, 0)
	return n, err
}

// CreateAndList creates a node as Create does and, in the same transaction,
// lists the children of its parent as Children would right after the create.
func (s *Store) CreateAndList(ctx context.Context, p string, data []byte, mode store.Mode) (store.Node, []store.Child, error) {
	n, kids, _, err := s.create(ctx, p, data, mode, listAll, 0, 0)
	return n, kids, err
}

// CreateAndWindow creates a node as Create does and, in the same
// transaction, reads the window of its parent's children that ends with
// it, as ChildrenUpTo(parent, node.Seq, n) would right after the create:
// one range of the parent's subtree sorted by CreateRevision, of at most n
// keys. (The server still reads the whole subtree to sort it; what it
// sends does not grow with it.)
func (s *Store) CreateAndWindow(ctx context.Context, p string, data []byte, mode store.Mode, n int) (store.Node, []store.Child, bool, error) {
	if n < 1 {
		return store.Node{}, nil, false, fmt.Errorf("etcdstore: create %q: %w: window of %d", store.ShortPath(p), store.ErrInvalidArgument, n)
	}
	node, kids, complete, err := s.create(ctx, p, data, mode, listWindow, n, 0)
	if err != nil || kids != nil {
		return node, kids, complete, err
	}
	// Found again after a lost reply: the transaction read no window.
	kids, complete, err = s.ChildrenUpTo(ctx, store.Parent(node.Path), node.Seq, n)
	if err != nil {
		return store.Node{}, nil, false, errors.Join(err, s.undoMade(node))
	}
	return node, kids, complete, nil
}

// undoMade deletes node, made by a create whose caller does not get it,
// within a fresh attempt.
func (s *Store) undoMade(node store.Node) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.attempt)
	defer cancel()
	return s.DeleteSeq(ctx, node.Path, node.Seq)
}

// What a create transaction lists besides making the node.
const (
	listNone = iota
	listAll
	listWindow
)

// create makes the node; own, when not 0, is a lease of its own to attach
// it to (see CreateLeased) instead of the session's.
func (s *Store) create(ctx context.Context, p string, data []byte, mode store.Mode, list, window int, own clientv3.LeaseID) (store.Node, []store.Child, bool, error) {
	if err := store.ValidateCreate(p, data, mode); err != nil {
		return store.Node{}, nil, false, err
	}
	if err := s.enter(ctx); err != nil {
		return store.Node{}, nil, false, fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(p), err)
	}
	s.later.Keep(store.Parent(p))

	name, reused := p, false
	var nops *nameOps
	switch mode {
	case store.EphemeralSequential:
		name, nops, reused = s.names.newName(p)
	case store.Sequential:
		name = freshName(p)
	}
	lease := own
	if mode&store.Ephemeral != 0 {
		lease = s.lease
	}
	parent := store.Parent(name)
	r := &createReq{name: name, nops: nops, parent: parent, known: s.dirs.has(parent), data: data, lease: lease, mode: mode, list: list, window: window}
	n, kids, err := s.send(ctx, r)
	if reused && errors.Is(err, store.ErrNodeExists) {
		// Someone made a node under a name this session freed: its
		// own, or a guess. Take a new one.
		r = &createReq{name: freshName(p), parent: parent, known: r.known, data: data, lease: lease, mode: mode, list: list, window: window}
		n, kids, err = s.send(ctx, r)
	}
	if err == nil {
		s.dirs.add(parent)
	}
	if err == nil && mode == store.EphemeralSequential {
		s.names.made(n.Path, p, n.Seq, r.nops)
	}
	return n, kids, r.complete, err
}

// send sends r's transaction, retrying as Create says, and returns its
// result. It ends with ctx or the session (see call.go). A create that
// fails after it made its parents apart takes them back (leaveParent) if
// they hold nothing: an error that ends it with its caller still there
// (an attempt that failed after them) would otherwise leave them for good.
//
// The transaction makes missing ancestors itself (see createReq); only
// when they are too many are they made first, by a transaction of their
// own (parentsMissing).
func (s *Store) send(ctx context.Context, r *createReq) (_ store.Node, _ []store.Child, err error) {
	defer func() {
		if err != nil && ctx.Err() == nil {
			s.leaveParent(r) // with ctx ended, abandon does
		}
	}()
	// unknown is set once an attempt may have been applied without our
	// seeing its reply.
	unknown := false
	for i := 1; ; {
		out, err := s.sendAttempt(ctx, r, unknown)
		if err != nil {
			return store.Node{}, nil, err
		}
		var (
			n    store.Node
			kids []store.Child
		)
		if out.err == nil {
			// A reply after the session's end proves nothing.
			if serr := s.sessionErr(); serr != nil {
				return store.Node{}, nil, fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(r.name), serr)
			}
			n, kids, err = s.answer(ctx, r, &out, unknown)
		}
		if out.err != nil {
			if err := s.afterUnknown(ctx, r, out.err, i, unknown); err != nil {
				return store.Node{}, nil, err
			}
			unknown = true
			i++
			continue
		}
		switch {
		case errors.Is(err, errNoParent):
			paused, err := s.parentsMissing(ctx, r, i, unknown)
			if err != nil {
				return store.Node{}, nil, err
			}
			if paused {
				i++
			}
			continue
		case errors.Is(err, errFenced):
			s.raiseFence(r.seenFence)
			continue
		case errors.Is(err, errChanged):
			continue
		}
		return n, kids, err
	}
}

// sendAttempt sends r's transaction as one attempt. When the call must
// end (ctx or the session ended) it returns the error to end it with,
// after handing to abandon what the call leaves behind; otherwise the
// attempt's outcome. unknown says whether an earlier attempt's outcome is
// unknown.
func (s *Store) sendAttempt(ctx context.Context, r *createReq, unknown bool) (txnResult, error) {
	if r.mode&store.Sequential != 0 {
		// A sequential node's name is its own (fresh, or one this
		// session freed), so a create given up in flight is undone
		// without its reply: by that name, lease and data, behind a
		// moved fence (see undo). Its attempt runs on the caller's
		// goroutine and is cancelled with the call.
		out := s.attemptHere(ctx, r)
		if out.err != nil && (ctx.Err() != nil || s.ctx.Err() != nil) {
			if ctx.Err() != nil {
				s.abandon(r, nil, true)
			}
			return out, s.fail(ctx, "create", r.name, context.Cause(ctx))
		}
		return out, nil
	}
	// Any other create's outcome is awaited after its caller left: only
	// the reply tells whether the node found is one it made.
	if err := ctx.Err(); err != nil {
		// Nothing is sent on an ended ctx: the reply could otherwise
		// win the select below over it.
		s.abandon(r, nil, unknown) // the parent it made, if any
		return txnResult{}, s.fail(ctx, "create", r.name, err)
	}
	res := s.attempt1(r)
	select {
	case out := <-res:
		return out, nil
	case <-ctx.Done():
		s.abandon(r, res, unknown)
		return txnResult{}, s.fail(ctx, "create", r.name, context.Cause(ctx))
	case <-s.ctx.Done():
		return txnResult{}, s.fail(ctx, "create", r.name, s.sessionErr())
	}
}

// answer interprets the reply out.resp to r's transaction: the node (and
// listing) made, or why it made none, read apart after a refusal (see
// createReq). A failed read of why is a failed attempt: answer sets
// out.err to its error. retried says that an earlier attempt may have
// made the node.
func (s *Store) answer(ctx context.Context, r *createReq, out *txnResult, retried bool) (store.Node, []store.Child, error) {
	n, kids, err := r.result(out.resp)
	if err == nil && r.readsParent {
		s.ops.learnParent(r.parent, out.resp.Responses[1].GetResponseRange().Kvs)
	}
	if !errors.Is(err, errRefused) {
		return n, kids, err
	}
	// Rare: what tells why is read apart (see createReq).
	why, rerr := s.readRefused(ctx, r)
	if rerr != nil {
		out.err = rerr
		return store.Node{}, nil, nil
	}
	if r.parent != "/" {
		s.ops.learnParent(r.parent, why.Responses[readParent].GetResponseRange().Kvs)
	}
	return r.explain(why.Responses, retried)
}

// afterUnknown decides what follows an attempt of r that failed with aerr
// (the i-th pause so far): nil when r is sent again, after a pause, for
// the outcome of a sequential create that lost its reply is found by
// sending it again; otherwise the error that ends the call, after handing
// to abandon what an attempt may have made. unknown says whether an
// earlier attempt's outcome is unknown.
func (s *Store) afterUnknown(ctx context.Context, r *createReq, aerr error, i int, unknown bool) error {
	err := s.fail(ctx, "create", r.name, aerr)
	if r.mode&store.Sequential == 0 || !errors.Is(err, store.ErrDisconnected) {
		if ctx.Err() != nil {
			s.abandon(r, nil, unknown) // an earlier attempt may have made it
		}
		return err
	}
	if serr := s.sleep(ctx, backoff(i)); serr != nil {
		if ctx.Err() != nil {
			s.abandon(r, nil, true)
		}
		return s.fail(ctx, "create", r.name, serr)
	}
	return nil
}

// txnResult is the outcome of one transaction.
type txnResult struct {
	resp *clientv3.TxnResponse
	err  error
}

// attempt1 sends r's transaction as one attempt in a goroutine of the
// Store's, on the session's context, and returns the channel its outcome
// arrives on.
func (s *Store) attempt1(r *createReq) <-chan txnResult {
	res := make(chan txnResult, 1)
	r.fence = s.fenceRev()
	cmps, then, els := r.txn(s)
	started := s.goWatch(func() {
		actx, cancel := context.WithTimeout(s.ctx, s.attempt)
		defer cancel()
		resp, err := s.txn(actx, cmps, then, els)
		if err != nil && s.ctx.Err() == nil && actx.Err() != nil {
			s.log.Debug("etcdstore: attempt given up", "op", "create", "node", r.name, "timeout", s.attempt, "err", err)
			err = fmt.Errorf("%w: no reply within the attempt timeout (%v): %w", store.ErrDisconnected, s.attempt, err)
		}
		res <- txnResult{resp, err}
	})
	if !started {
		res <- txnResult{err: s.sessionErr()}
	}
	return res
}

// attemptHere sends r's transaction as one attempt of a call made with ctx.
func (s *Store) attemptHere(ctx context.Context, r *createReq) txnResult {
	r.fence = s.fenceRev()
	cmps, then, els := r.txn(s)
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(ctx, cmps, then, els)
	})
	return txnResult{resp, err}
}
