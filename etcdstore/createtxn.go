package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

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

// txn returns r's transaction; els is the nested branch that makes the
// missing ancestors, or nil (see createReq).
func (r *createReq) txn(s *Store) (cmps []clientv3.Cmp, then, els []clientv3.Op) {
	// Sized for the usual case (a parent below the root, a listing), so
	// that building a create allocates each slice once.
	then = make([]clientv3.Op, 1, 3)
	r.readsParent = false
	if r.nops != nil && r.parent != "/" && r.list != listAll && r.inline() == nil {
		return r.reusedTxn(s, then)
	}
	cmps = make([]clientv3.Cmp, 2, 4)
	if o := r.nops; o != nil {
		cmps[0] = o.absent
		then[0] = o.put // with the lease of an ephemeral node
		then[0].WithValueBytes(r.data)
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
	return cmps, then, []clientv3.Op{r.makesParents(s, cmps[:2], then, as)}
}

// reusedTxn returns the transaction of a create under a name this session
// freed (see names), below the root, listing no more than a window and
// making no parent: its compares are built once (nameOps.guards). then
// holds room for the put.
func (r *createReq) reusedTxn(s *Store, then []clientv3.Op) (cmps []clientv3.Cmp, _, els []clientv3.Op) {
	o := r.nops
	then[0] = o.put // with the lease of an ephemeral node
	then[0].WithValueBytes(r.data)
	cmps, rev := o.guards(s, r.parent, r.fence)
	then = r.readParent(s, then, rev)
	if r.list == listWindow {
		then = append(then, s.ops.window(opKey{r.parent, r.window}))
	}
	return cmps, then, nil
}

// makesParents returns the nested branch of r's transaction that makes
// the missing ancestors as (see createReq), given the node's compares
// (absent, fence) and the operations then of the outer branch. It is
// evaluated against the state before the transaction, as the outer
// compares are: it applies exactly when the outer one fails for a missing
// parent alone, and then makes the missing ancestors as makeParents does.
func (r *createReq) makesParents(s *Store, node []clientv3.Cmp, then []clientv3.Op, as []string) clientv3.Op {
	mk := append(slices.Clip(node), clientv3.Compare(clientv3.CreateRevision(r.parent), "=", 0))
	made := make([]clientv3.Op, 0, len(as)+len(then))
	for _, a := range as {
		mk = append(mk, clientv3.Compare(clientv3.LeaseValue(a), "=", 0))
		made = append(made, s.makeDir(a))
	}
	return clientv3.OpTxn(mk, append(made, then...), nil)
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
