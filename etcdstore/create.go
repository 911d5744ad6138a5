package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

// A create is one transaction, sent as one attempt (see Bounds in the
// package doc) by a goroutine of the Store's, on the session's context
// rather than the caller's: the caller may leave, but the attempt's outcome
// is still worth knowing, to undo precisely what it made.
//
// When the caller leaves while an attempt may be applied (one is in
// flight, or an earlier one failed with an unknown outcome) or after the
// create made its parent apart, abandon hands the create to undo, which
// runs until it is done or the session ends:
//
//  1. It waits for the attempt in flight (at most the attempt timeout).
//  2. If an attempt is known to have made the node, it deletes the node
//     with that CreateRevision. If the outcome of one is unknown, it
//     deletes the node if it is there as made (sequential or ephemeral
//     nodes only; a fixed persistent name may be someone else's) and, in
//     the same transaction, moves the session's create fence.
//  3. It retries that transaction until it is applied.
//  4. A parent the create made apart (makeParents) and no node came to
//     fill is removed as the last one out of it would remove it
//     (leaveParent).
//
// A create that fails with its caller still there (an attempt after its
// parents' own transaction failed) takes back the parents it made apart
// the same way (send). That transaction itself is sent again when it
// fails with ErrDisconnected: it makes directories, no node, so its
// outcome does not matter.
//
// The fence closes the last gap: an attempt the server applies after the
// undo (a request held in a frozen link, or proposed by a member before a
// leader change and committed after) would make the node again. Every
// create transaction therefore requires the fence key's ModRevision to be
// the one its sender last saw; once the undo has moved it, no earlier
// attempt can apply. A create that meets a moved fence learns the new
// revision from the read that follows a refusal (see createReq) and is sent
// again.

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
func (s *Store) send(ctx context.Context, r *createReq) (_ store.Node, _ []store.Child, err error) {
	defer func() {
		if err != nil && ctx.Err() == nil {
			s.leaveParent(r) // with ctx ended, abandon does
		}
	}()
	// The transaction makes missing ancestors itself (see createReq);
	// only when they are too many are they made first, by a transaction
	// of their own.
	// unknown is set once an attempt may have been applied without our
	// seeing its reply.
	name := r.name
	unknown := false
	for i := 1; ; {
		var out txnResult
		if r.mode&store.Sequential != 0 {
			// A sequential node's name is its own (fresh, or one this
			// session freed), so a create given up in flight is undone
			// without its reply: by that name, lease and data, behind a
			// moved fence (see undo). Its attempt runs on the caller's
			// goroutine and is cancelled with the call.
			out = s.attemptHere(ctx, r)
			if out.err != nil && (ctx.Err() != nil || s.ctx.Err() != nil) {
				if ctx.Err() != nil {
					s.abandon(r, nil, true)
				}
				return store.Node{}, nil, s.fail(ctx, "create", name, context.Cause(ctx))
			}
		} else {
			// Any other create's outcome is awaited after its caller
			// left: only the reply tells whether the node found is one
			// it made.
			if err := ctx.Err(); err != nil {
				// Nothing is sent on an ended ctx: the reply could
				// otherwise win the select below over it.
				s.abandon(r, nil, unknown) // the parent it made, if any
				return store.Node{}, nil, s.fail(ctx, "create", name, err)
			}
			res := s.attempt1(r)
			select {
			case out = <-res:
			case <-ctx.Done():
				s.abandon(r, res, unknown)
				return store.Node{}, nil, s.fail(ctx, "create", name, context.Cause(ctx))
			case <-s.ctx.Done():
				return store.Node{}, nil, s.fail(ctx, "create", name, s.sessionErr())
			}
		}
		var (
			n    store.Node
			kids []store.Child
			err  error
		)
		if out.err == nil {
			// A reply after the deadline proves nothing.
			if serr := s.sessionErr(); serr != nil {
				return store.Node{}, nil, fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(name), serr)
			}
			n, kids, err = r.result(out.resp)
			if err == nil && r.readsParent {
				s.ops.learnParent(r.parent, out.resp.Responses[1].GetResponseRange().Kvs)
			}
			if errors.Is(err, errRefused) {
				// Rare: what tells why is read apart (see
				// createReq); a failed read is a failed attempt.
				var why *clientv3.TxnResponse
				if why, out.err = s.readRefused(ctx, r); out.err == nil {
					if r.parent != "/" {
						s.ops.learnParent(r.parent, why.Responses[readParent].GetResponseRange().Kvs)
					}
					n, kids, err = r.explain(why.Responses, unknown)
				}
			}
		}
		if out.err == nil {
			switch {
			case errors.Is(err, errNoParent):
				s.dirs.drop(r.parent)
				r.madeParent = true
				err := s.makeParents(ctx, r.name)
				if s.madeParentsHook != nil {
					s.madeParentsHook()
				}
				if err == nil {
					continue
				}
				// Its outcome does not matter (it makes directories, no
				// node): one that fails as an attempt does is sent again
				// after a pause while ctx lives. A reply the server sent
				// at ctx's deadline ("request timed out") comes this way
				// too, just before ctx says it is done.
				if !errors.Is(err, store.ErrEphemeralParent) && ctx.Err() == nil &&
					errors.Is(s.fail(ctx, "create", name, err), store.ErrDisconnected) &&
					s.sleep(ctx, backoff(i)) == nil {
					i++
					continue
				}
				if ctx.Err() != nil {
					s.abandon(r, nil, unknown)
				}
				if errors.Is(err, store.ErrEphemeralParent) {
					return store.Node{}, nil, err // its own answer, no client error to classify
				}
				return store.Node{}, nil, s.fail(ctx, "create", name, err)
			case errors.Is(err, errFenced):
				s.raiseFence(r.seenFence)
				continue
			case errors.Is(err, errChanged):
				continue
			}
			return n, kids, err
		}
		err = s.fail(ctx, "create", name, out.err)
		if r.mode&store.Sequential == 0 || !errors.Is(err, store.ErrDisconnected) {
			if ctx.Err() != nil {
				s.abandon(r, nil, unknown) // an earlier attempt may have made it
			}
			return store.Node{}, nil, err
		}
		unknown = true
		if serr := s.sleep(ctx, backoff(i)); serr != nil {
			if ctx.Err() != nil {
				s.abandon(r, nil, unknown)
			}
			return store.Node{}, nil, s.fail(ctx, "create", name, serr)
		}
		i++
	}
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

func (s *Store) fenceRev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fence
}

// raiseFence records rev as the fence's ModRevision if it is newer: it only
// grows while the session lives.
func (s *Store) raiseFence(rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fence = max(s.fence, rev)
}

// abandon has r undone by a goroutine of the Store's and waits for that at
// most one attempt timeout. inflight, when not nil, delivers the outcome
// of the attempt that the caller left; unknown says whether
// an earlier attempt's outcome is unknown.
func (s *Store) abandon(r *createReq, inflight <-chan txnResult, unknown bool) {
	if inflight == nil && !unknown && !r.madeParent {
		return
	}
	done := make(chan struct{})
	s.undos.Add(1)
	if !s.goWatch(func() {
		defer s.undos.Done()
		defer close(done)
		s.undo(r, inflight, unknown)
	}) {
		s.undos.Done()
		return // the session is over: its ephemeral nodes go with it
	}
	t := time.NewTimer(s.attempt)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Debug("etcdstore: abandoned create not undone yet; undo goes on", "node", r.name)
	}
}

// undo deletes what r may have made, and moves the fence when an attempt's
// outcome is unknown, retrying until that is done or the session ends.
func (s *Store) undo(r *createReq, inflight <-chan txnResult, unknown bool) {
	var made int64 // CreateRevision of the node, when an attempt is known to have made it
	if inflight != nil {
		// The attempt runs on the session's context, bounded by the
		// attempt timeout: this wait is bounded too.
		out := <-inflight
		if out.err != nil {
			unknown = true
		} else if n, _, err := r.result(out.resp); err == nil {
			made = n.Seq
		}
	}
	if made == 0 && !unknown {
		s.leaveParent(r)
		return // not made, and no attempt can be applied any more
	}
	var cmps []clientv3.Cmp
	switch {
	case made != 0:
		cmps = []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(r.name), "=", made)}
	case r.mode&store.Sequential != 0 || r.lease != 0:
		cmps = []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(r.name), ">", 0),
			clientv3.Compare(clientv3.LeaseValue(r.name), "=", r.lease),
			clientv3.Compare(clientv3.Value(r.name), "=", string(r.data)),
		}
	}
	var then, els []clientv3.Op
	if cmps != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(r.name+"/"), "=", 0).WithPrefix())
		then = append(then, clientv3.OpDelete(r.name))
		if op, _, ok := s.reclaimNow(r.name); ok {
			then = append(then, op)
		}
	}
	if unknown {
		fence := clientv3.OpPut(s.fenceKey, "", clientv3.WithLease(s.lease))
		then, els = append(then, fence), append(els, fence)
	}
	for i := 1; ; i++ {
		ctx, cancel := context.WithTimeout(s.ctx, s.attempt)
		resp, err := s.txn(ctx, cmps, then, els)
		cancel()
		switch {
		case err == nil:
			if unknown {
				s.raiseFence(resp.Header.Revision)
			}
			deleted := resp.Succeeded && cmps != nil
			s.log.Debug("etcdstore: abandoned create undone", "node", r.name, "deleted", deleted, "fenced", unknown, "attempts", i)
			switch {
			case !deleted:
				s.leaveParent(r)
			case s.later.Delay > 0 && r.parent != "/":
				s.later.Emptied(r.parent)
			}
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.end(fmt.Errorf("%w: lease not found by the undo of a create", store.ErrSessionExpired))
			return
		case s.ctx.Err() != nil:
			return
		}
		s.log.Debug("etcdstore: undo of an abandoned create failed; retrying", "node", r.name, "attempt", i, "err", err)
		s.probe()
		if s.sleep(s.ctx, backoff(i)) != nil {
			return
		}
	}
}

// leaveParent takes back the parent of r, an abandoned create that made no
// node, when r made it (makeParents; see leftEmpty).
func (s *Store) leaveParent(r *createReq) {
	if r.madeParent {
		s.leftEmpty(r.parent)
	}
}

// leftEmpty removes dir, which a create made (makeParents) and then made
// no node in, if it holds nothing and was made implicitly: no delete in it
// would ever take it back. It goes as after the last node in it: at once
// with no reclaim delay, else once that is up.
func (s *Store) leftEmpty(dir string) {
	switch {
	case dir == "/":
	case s.later.Delay > 0:
		s.later.Emptied(dir)
	default:
		s.reclaimDir(dir)
	}
}

// errNoParent says that a create's parent is missing, and the create
// cannot make it: make it first.
var errNoParent = errors.New("etcdstore: parent missing")

// errFenced says that a create's transaction was sent with an old fence
// revision: send it again with the new one.
var errFenced = errors.New("etcdstore: create fence moved")

// errRefused says that a create's transaction made no node: read why
// (createReq.reads).
var errRefused = errors.New("etcdstore: create refused")

// errChanged says that the read after a refused create found nothing that
// refuses it any more (what did was changed in between): send it again.
var errChanged = errors.New("etcdstore: create refused, then unrefused")

// createReq is one create, sent as one transaction: if the node is absent,
// the fence unmoved and the parent exists with no lease (below the root),
// put the node. Else, nested, when the parent is missing and no ancestor is
// attached to a lease: make every missing ancestor as a directory (with its
// marker, see reclaim.go) and put the node; so a name whose directories
// were reclaimed is made again in one round trip. It lists the parent's
// subtree after the put when list is set. The nested branch names every
// ancestor and the node's data a second time: past inlineMax of data, or
// inlineDepth ancestors or inlineBytes of their paths (etcd bounds a
// request's size and operations), it is left out, and a missing parent is
// made first by makeParents, apart.
//
// A transaction that makes no node reads nothing: a second request (reads)
// then reads the node, the fence and the parent, to tell ErrNodeExists (or
// the node an earlier attempt made), a moved fence, a missing parent and
// ErrEphemeralParent apart. Refusals are rare, and an Else branch that read
// them would cost every create its requests' building, encoding and
// parsing. The read comes after the refusal, so what it finds held at a
// moment within the call, when the create would have been refused too: the
// answer is the one a create sent then would get. What the read finds
// changed in between (nothing refuses the create any more) sends the
// create again; a parent found missing is made by makeParents, whose own
// transaction refuses an ancestor attached to a lease.
type createReq struct {
	name, parent string
	// nops, when not nil, are the operations of a reused name (see
	// names).
	nops *nameOps
	// known says that the parent exists as far as the Store knows (see
	// dirs): the transaction carries no branch that makes it.
	known  bool
	data   []byte
	lease  clientv3.LeaseID
	mode   store.Mode
	list   int // listNone, listAll or listWindow
	window int // the window's size, with listWindow
	// complete says, with listWindow, whether the window read reaches the
	// first child.
	complete bool
	// fence is the fence revision the transaction is sent with;
	// seenFence the one the read after a refusal found.
	fence, seenFence int64
	// readsParent says that the transaction reads the parent after the
	// put (its second operation), to learn its CreateRevision (see
	// parentCmps).
	readsParent bool
	// madeParent says that makeParents ran for it: the parent may be
	// one this create made (see leaveParent).
	madeParent bool
}

// The bounds of a create that makes its missing ancestors itself (see
// createReq).
const (
	inlineMax   = 256 << 10
	inlineDepth = 32
	inlineBytes = 64 << 10
)

// The reads after a refused create (see createReq): the node, the fence,
// then the parent (below the root only), then the listing (listAll only).
const (
	readNode = iota
	readFence
	readParent
)

// inline returns the ancestors that r's transaction makes when they are
// missing, outermost first, or nil when it makes none (see createReq).
func (r *createReq) inline() []string {
	if r.known || r.parent == "/" || len(r.data) > inlineMax {
		return nil
	}
	as := ancestors(r.name)
	size := 0
	for _, a := range as {
		size += len(a)
	}
	if len(as) > inlineDepth || size > inlineBytes {
		return nil
	}
	return as
}

// ops keeps the parts of a create that depend on its parent (and listing
// window) alone, and the compare of the create fence, built once: building
// one costs the client as many allocations as sending it. An Op or a Cmp is
// a value that sending only reads (a chroot prefixes a copy), so one is
// shared by every create under the parent. It forgets all once it holds
// maxOps.
type ops struct {
	mu      sync.Mutex
	windows map[opKey]clientv3.Op
	dirs    map[string]*dirOps
	// fenceAt is the compare that the fence is at fenceRev.
	fenceAt  clientv3.Cmp
	fenceRev int64
}

// opKey names a cached window read: that of window children of p.
type opKey struct {
	p      string
	window int
}

// dirOps are the parts of a create that depend on its parent alone.
type dirOps struct {
	exists, noLease clientv3.Cmp // the parent exists, attached to no lease
	get             clientv3.Op  // its key-only read
	// rev is the parent's CreateRevision as last read with no lease
	// attached, 0 while unknown; at compares it. Under ops.mu.
	rev int64
	at  clientv3.Cmp
}

const maxOps = 1024

// window returns the read of the window of k.window children of k.p.
func (c *ops) window(k opKey) clientv3.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op, ok := c.windows[k]; ok {
		return op
	}
	key, opts := windowRange(k.p, 0, k.window)
	op := clientv3.OpGet(key, opts...)
	if c.windows == nil || len(c.windows) >= maxOps {
		c.windows = make(map[opKey]clientv3.Op)
	}
	c.windows[k] = op
	return op
}

// dir returns the parts of a create under parent p.
func (c *ops) dir(p string) *dirOps {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.dirs[p]; ok {
		return d
	}
	d := &dirOps{
		exists:  clientv3.Compare(clientv3.CreateRevision(p), ">", 0),
		noLease: clientv3.Compare(clientv3.LeaseValue(p), "=", 0),
		get:     clientv3.OpGet(p, clientv3.WithKeysOnly()),
	}
	if c.dirs == nil || len(c.dirs) >= maxOps {
		c.dirs = make(map[string]*dirOps)
	}
	c.dirs[p] = d
	return d
}

// parent returns the parts of a create under p, and rev, the parent's
// CreateRevision as a create last read it with no lease (0 while unknown),
// with at, the compare that the parent is the key made then (see
// parentCmps).
func (c *ops) parent(p string) (d *dirOps, at clientv3.Cmp, rev int64) {
	d = c.dir(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	return d, d.at, d.rev
}

// learnParent records what a read of the parent p found (kvs): its
// CreateRevision when it has no lease, else that it is unknown.
func (c *ops) learnParent(p string, kvs []*mvccpb.KeyValue) {
	d := c.dir(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case len(kvs) == 0 || kvs[0].Lease != 0:
		d.rev = 0
	case kvs[0].CreateRevision != d.rev:
		d.rev, d.at = kvs[0].CreateRevision, clientv3.Compare(clientv3.CreateRevision(p), "=", kvs[0].CreateRevision)
	}
}

// parentCmps appends to cmps the compares of a create under p (below the
// root) that its parent exists with no lease attached, and returns the
// parent's CreateRevision they require, 0 for none. Once a create has read
// the parent's CreateRevision (where rev is 0, its transaction reads the
// parent too, and learnParent records it), that is one compare, that the
// parent is the key made then, where it is two (it exists, it has no
// lease): one range fewer for the server to decode twice (request and
// log) and look up, on every create. The one compare holds what the two
// do, for a key's lease changes only when the key is made again (a Store
// makes keys only where none is, and Set keeps the lease); a parent made
// again since fails it, and the read after that refusal (see createReq)
// learns the new one.
func (s *Store) parentCmps(cmps []clientv3.Cmp, p string) ([]clientv3.Cmp, int64) {
	d, at, rev := s.ops.parent(p)
	if rev != 0 {
		return append(cmps, at), rev
	}
	return append(cmps, d.exists, d.noLease), 0
}

// fence returns the compare that the fence key's ModRevision is rev: the
// same until the fence moves.
func (c *ops) fence(key string, rev int64) clientv3.Cmp {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenceAt.Key == nil || c.fenceRev != rev {
		c.fenceAt, c.fenceRev = clientv3.Compare(clientv3.ModRevision(key), "=", rev), rev
	}
	return c.fenceAt
}

// txn returns r's transaction; els is the nested branch that makes the
// missing ancestors, or nil (see createReq).
func (r *createReq) txn(s *Store) (cmps []clientv3.Cmp, then, els []clientv3.Op) {
	// Sized for the usual case (a parent below the root, a listing), so
	// that building a create allocates each slice once.
	then = make([]clientv3.Op, 1, 3)
	r.readsParent = false
	if o := r.nops; o != nil {
		then[0] = o.put // with the lease of an ephemeral node
		then[0].WithValueBytes(r.data)
		if r.parent != "/" && r.list != listAll && r.inline() == nil {
			cmps, rev := o.guards(s, r.parent, r.fence)
			then = r.readParent(s, then, rev)
			if r.list == listWindow {
				then = append(then, s.ops.window(opKey{r.parent, r.window}))
			}
			return cmps, then, nil
		}
	}
	cmps = make([]clientv3.Cmp, 2, 4)
	if o := r.nops; o != nil {
		cmps[0] = o.absent
	} else {
		cmps[0] = clientv3.Compare(clientv3.CreateRevision(r.name), "=", 0)
		if r.lease != 0 {
			then[0] = clientv3.OpPut(r.name, string(r.data), clientv3.WithLease(r.lease))
		} else {
			then[0] = clientv3.OpPut(r.name, string(r.data))
		}
	}
	cmps[1] = s.ops.fence(s.fenceKey, r.fence)
	as := r.inline()
	if r.parent != "/" {
		var rev int64
		cmps, rev = s.parentCmps(cmps, r.parent)
		if as == nil {
			then = r.readParent(s, then, rev)
		}
	}
	switch r.list {
	case listAll:
		key, opts := listRange(r.parent)
		then = append(then, clientv3.OpGet(key, opts...))
	case listWindow:
		// The new key has the highest CreateRevision of all: the
		// window's first key. A node found again after a lost reply
		// comes with no window: it is read apart (see
		// CreateAndWindow).
		then = append(then, s.ops.window(opKey{r.parent, r.window}))
	}
	if as == nil {
		return cmps, then, nil
	}
	// The nested branch is evaluated against the state before the
	// transaction, as the outer compares are: it applies exactly when
	// the outer one fails for a missing parent alone, and then makes
	// the missing ancestors as makeParents does.
	mk := append(slices.Clip(cmps[:2]), clientv3.Compare(clientv3.CreateRevision(r.parent), "=", 0))
	made := make([]clientv3.Op, 0, len(as)+len(then))
	for _, a := range as {
		mk = append(mk, clientv3.Compare(clientv3.LeaseValue(a), "=", 0))
		made = append(made, s.makeDir(a))
	}
	return cmps, then, []clientv3.Op{clientv3.OpTxn(mk, append(made, then...), nil)}
}

// readParent appends to then (the put alone) the parent's read when its
// CreateRevision is unknown (rev 0; see parentCmps).
func (r *createReq) readParent(s *Store, then []clientv3.Op, rev int64) []clientv3.Op {
	if rev != 0 {
		return then
	}
	r.readsParent = true
	return append(then, s.ops.dir(r.parent).get)
}

// result interprets the reply of r.txn: errRefused when it made no node.
func (r *createReq) result(resp *clientv3.TxnResponse) (store.Node, []store.Child, error) {
	made, rs := resp.Succeeded, resp.Responses
	if !made && r.inline() != nil {
		nested := rs[0].GetResponseTxn()
		made, rs = nested.Succeeded, nested.Responses
	}
	if !made {
		return store.Node{}, nil, errRefused
	}
	n := store.Node{Path: r.name, Data: r.data, Seq: resp.Header.Revision, Owner: int64(r.lease)}
	switch r.list {
	case listAll:
		listResp := rs[len(rs)-1].GetResponseRange()
		_, kids := children(r.parent, listResp.Kvs)
		return n, kids, nil
	case listWindow:
		listResp := rs[len(rs)-1].GetResponseRange()
		kids, complete := window(r.parent, listResp, r.window)
		r.complete = complete
		return n, kids, nil
	}
	return n, nil, nil
}

// reads returns what is read after r's transaction made no node (see
// createReq): the node, the fence, the parent below the root, and the
// listing with listAll.
func (r *createReq) reads(s *Store) []clientv3.Op {
	ops := make([]clientv3.Op, 2, 4)
	if o := r.nops; o != nil {
		ops[readNode] = o.get
	} else {
		ops[readNode] = clientv3.OpGet(r.name)
	}
	ops[readFence] = s.fenceGet
	if r.parent != "/" {
		ops = append(ops, s.ops.dir(r.parent).get)
	}
	if r.list == listAll {
		key, opts := listRange(r.parent)
		ops = append(ops, clientv3.OpGet(key, opts...))
	}
	return ops
}

// readRefused reads what tells why r's transaction made no node, in one
// attempt of a call made with ctx.
func (s *Store) readRefused(ctx context.Context, r *createReq) (*clientv3.TxnResponse, error) {
	ops := r.reads(s)
	return do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(ctx, nil, ops, nil)
	})
}

// explain interprets rs, the reads after r's transaction made no node.
// retried says that an earlier attempt may have made the node.
func (r *createReq) explain(rs []*pb.ResponseOp, retried bool) (store.Node, []store.Child, error) {
	kvs := rs[readNode].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return store.Node{}, nil, r.refused(rs)
	}
	kv := kvs[0]
	// Only a sequential name is ours alone; finding it after a lost
	// reply, with our lease (or none, as we asked), means we made it.
	ours := retried && r.mode&store.Sequential != 0 && kv.Lease == int64(r.lease) && bytes.Equal(kv.Value, r.data)
	if !ours {
		return store.Node{}, nil, fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(r.name), store.ErrNodeExists)
	}
	if r.list == listAll {
		_, kids := children(r.parent, rs[len(rs)-1].GetResponseRange().Kvs)
		return node(kv), kids, nil
	}
	return node(kv), nil, nil
}

// refused tells why r's transaction made no node, from the reads rs that
// found none: a moved fence, a missing parent, a parent attached to a
// lease, or nothing any more (errChanged).
func (r *createReq) refused(rs []*pb.ResponseOp) error {
	var fence int64
	if f := rs[readFence].GetResponseRange().Kvs; len(f) > 0 {
		fence = f[0].ModRevision
	}
	if fence != r.fence {
		r.seenFence = fence
		return errFenced
	}
	if r.parent == "/" {
		return errChanged
	}
	switch p := rs[readParent].GetResponseRange().Kvs; {
	case len(p) == 0:
		return errNoParent
	case p[0].Lease != 0:
		return fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(r.name), store.ErrEphemeralParent)
	}
	return errChanged
}

// ancestors returns the ancestors of p below the root, outermost first.
func ancestors(p string) []string {
	var as []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			as = append(as, p[:i])
		}
	}
	return as
}

// makeParents makes the missing ancestors of name as persistent empty keys,
// each marked as made implicitly (see reclaim.go), in one transaction (one
// attempt) that checks that none of them is attached to a lease:
// ErrEphemeralParent if one is.
func (s *Store) makeParents(ctx context.Context, name string) error {
	as := ancestors(name)
	var cmps []clientv3.Cmp
	var then []clientv3.Op
	for _, a := range as {
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(a), "=", 0))
		then = append(then, s.makeDir(a))
	}
	resp, err := do(s, ctx, func(actx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(actx, cmps, then, nil)
	})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(name), store.ErrEphemeralParent)
	}
	return nil
}
