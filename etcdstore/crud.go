package etcdstore

import (
	"context"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

// Get returns the node at p, or ErrNoNode. The root has no data and Seq 0.
func (s *Store) Get(ctx context.Context, p string) (store.Node, error) {
	if err := store.ValidatePath(p); err != nil {
		return store.Node{}, err
	}
	if err := s.enter(ctx); err != nil {
		return store.Node{}, fmt.Errorf("etcdstore: get %q: %w", store.ShortPath(p), err)
	}
	if p == "/" {
		return store.Node{Path: "/"}, nil
	}
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return s.kv.Get(ctx, p)
	})
	if err != nil {
		return store.Node{}, s.fail(ctx, "get", p, err)
	}
	if len(resp.Kvs) == 0 {
		return store.Node{}, fmt.Errorf("etcdstore: get %q: %w", store.ShortPath(p), store.ErrNoNode)
	}
	return node(resp.Kvs[0]), nil
}

// Set replaces the data of the node at p if its Version is version, or
// whatever it is when version is store.AnyVersion, keeping the node's lease.
func (s *Store) Set(ctx context.Context, p string, data []byte, version int64) (store.Node, error) {
	if err := store.ValidatePath(p); err != nil {
		return store.Node{}, err
	}
	if p == "/" {
		return store.Node{}, fmt.Errorf("etcdstore: set %q: %w: the root holds no data", store.ShortPath(p), store.ErrInvalidPath)
	}
	if err := store.ValidateData(data); err != nil {
		return store.Node{}, err
	}
	if version < store.AnyVersion {
		return store.Node{}, fmt.Errorf("etcdstore: set %q: %w: version %d", store.ShortPath(p), store.ErrInvalidArgument, version)
	}
	if err := s.enter(ctx); err != nil {
		return store.Node{}, fmt.Errorf("etcdstore: set %q: %w", store.ShortPath(p), err)
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(p), ">", 0)}
	if version != store.AnyVersion {
		cmps = append(cmps, clientv3.Compare(clientv3.Version(p), "=", version+1))
	}
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.kv.Txn(ctx).If(cmps...).
			Then(clientv3.OpPut(p, string(data), clientv3.WithIgnoreLease()), clientv3.OpGet(p)).
			Else(clientv3.OpGet(p, clientv3.WithKeysOnly())).
			Commit()
	})
	if err != nil {
		return store.Node{}, s.fail(ctx, "set", p, err)
	}
	if !resp.Succeeded {
		if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
			return store.Node{}, fmt.Errorf("etcdstore: set %q: %w", store.ShortPath(p), store.ErrNoNode)
		}
		return store.Node{}, fmt.Errorf("etcdstore: set %q: %w", store.ShortPath(p), store.ErrBadVersion)
	}
	return node(resp.Responses[1].GetResponseRange().Kvs[0]), nil
}

// Delete deletes the node at p: ErrNoNode when it does not exist,
// ErrNotEmpty when it has children (checked in the same transaction). An
// attempt given up after the attempt timeout fails with ErrDisconnected:
// the node may or may not have been deleted.
func (s *Store) Delete(ctx context.Context, p string) error {
	return s.delete(ctx, p, 0, byName)
}

// DeleteSeq deletes the node at p if its Seq (CreateRevision) is seq, in
// one transaction that also checks that it has no children: ErrNoNode when
// there is no node at p or another one, ErrNotEmpty when it has children.
// An attempt given up after the attempt timeout fails with ErrDisconnected:
// the node may or may not have been deleted. Once this session's node is
// known to be gone, its name may be used again (see Names in the package
// doc).
func (s *Store) DeleteSeq(ctx context.Context, p string, seq int64) error {
	return s.delete(ctx, p, seq, bySeq)
}

// DeleteFront is DeleteSeq that, in the same transaction, records seq as
// the last front release of p's parent (see [store.FrontDeleter]). The
// record is a key of the adapter's own (see WithChroot), attached to this
// session's lease: it goes when the session does, and a waiter that finds
// no record reads the contenders again, as it would without one.
func (s *Store) DeleteFront(ctx context.Context, p string, seq int64) error {
	return s.delete(ctx, p, seq, front)
}

// FollowsFront reports whether the node at p has Seq seq and the record of
// p's parent is prev, with one read-only transaction of two point reads;
// see [store.FrontDeleter].
func (s *Store) FollowsFront(ctx context.Context, p string, seq, prev int64) (bool, error) {
	if err := store.ValidatePath(p); err != nil {
		return false, err
	}
	if p == "/" {
		return false, nil
	}
	if err := s.enter(ctx); err != nil {
		return false, fmt.Errorf("etcdstore: read %q: %w", store.ShortPath(p), err)
	}
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(ctx, nil, []clientv3.Op{clientv3.OpGet(p, clientv3.WithKeysOnly()), clientv3.OpGet(s.frontKey(p))}, nil)
	})
	if err != nil {
		return false, s.fail(ctx, "read", p, err)
	}
	own, rec := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(own) == 0 || own[0].CreateRevision != seq || len(rec) == 0 {
		return false, nil
	}
	return string(rec[0].Value) == strconv.FormatInt(prev, 10), nil
}

// frontKey is the key of the front record of p's parent.
func (s *Store) frontKey(p string) string {
	return s.ownKeys + "front" + store.Parent(p)
}

// How delete picks the node it deletes.
const (
	byName = iota // the node at the path, whichever it is
	bySeq         // only the node with the given Seq
	front         // as bySeq, and record it as its parent's front release
)

// delete is Delete, DeleteSeq or DeleteFront, as how says: one transaction
// that deletes p if it has no children (and, but for byName, if its
// CreateRevision is seq), else reads p to tell why not (but for byName, in
// a second request).
func (s *Store) delete(ctx context.Context, p string, seq int64, how int) error {
	if err := store.ValidatePath(p); err != nil {
		return err
	}
	if p == "/" {
		return fmt.Errorf("etcdstore: delete %q: %w: the root cannot be deleted", store.ShortPath(p), store.ErrInvalidPath)
	}
	if err := s.enter(ctx); err != nil {
		return fmt.Errorf("etcdstore: delete %q: %w", store.ShortPath(p), err)
	}
	bySeq := how != byName
	// A node this session made ephemeral has its name's operations (see
	// names), and no directory marker or record: no node is ever made
	// below an ephemeral one (create checks that the parent has no
	// lease), so it was never a directory. A directory deleted by name
	// takes its marker and record along.
	var o *nameOps
	if bySeq {
		o = s.names.liveOps(p, seq, s.lease)
	}
	cmps := make([]clientv3.Cmp, 1, 2)
	var (
		then   []clientv3.Op
		keys   clientv3.Op
		seqCmp clientv3.Cmp
	)
	if o != nil {
		// o.del has no room to spare: appending to then copies it.
		cmps[0], then, keys, seqCmp = o.leaf, o.del, o.keys, o.seq
	} else {
		cmps[0] = clientv3.Compare(clientv3.CreateRevision(p+"/"), "=", 0).WithPrefix()
		then, keys, seqCmp = s.dropDir(p), clientv3.OpGet(p, clientv3.WithKeysOnly()), clientv3.CreateRevision(p)
	}
	if bySeq {
		cmps = append(cmps, clientv3.Compare(seqCmp, "=", seq))
	}
	// The front record is written unless the delete empties the
	// directory, which then goes with its record (see reclaim.go).
	var rec []clientv3.Op
	if how == front {
		rec = append(rec, clientv3.OpPut(s.frontKey(p), strconv.FormatInt(seq, 10), clientv3.WithLease(s.lease)))
	}
	s.dirs.drop(p)
	op, dirs, ok := s.reclaimNow(p, rec...)
	if ok {
		then = append(then, op)
	} else {
		then = append(then, rec...)
	}
	// A delete by Seq reads why it was refused apart, in the rare case:
	// the node with that Seq, once gone, never comes back, so a later
	// read tells as well as the transaction's own. One by name needs the
	// read in the transaction: a node at its name may be made in between.
	var els []clientv3.Op
	if !bySeq {
		els = []clientv3.Op{keys}
	}
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(ctx, cmps, then, els)
	})
	if err == nil && resp.Succeeded {
		s.deleted(ctx, p, resp, ok, dirs)
	}
	var why *clientv3.TxnResponse // what tells why it was refused
	switch {
	case err == nil && !resp.Succeeded && bySeq:
		why, err = do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return s.txn(ctx, nil, []clientv3.Op{keys}, nil)
		})
	case err == nil && !resp.Succeeded:
		why = resp
	}
	// A name whose node is gone is free again (see names) when the node is
	// known to be the one this session made; a delete by name cannot tell
	// which node it deleted, so it drops the name for good.
	gone := func() {
		if bySeq {
			s.names.deleted(p, seq)
		} else {
			s.names.forget(p)
		}
	}
	switch {
	case err != nil:
		if !bySeq {
			s.names.forget(p)
		}
		return s.fail(ctx, "delete", p, err)
	case resp.Succeeded && resp.Responses[0].GetResponseDeleteRange().Deleted > 0:
		gone()
		return nil
	case resp.Succeeded:
		gone()
		return fmt.Errorf("etcdstore: delete %q: %w", store.ShortPath(p), store.ErrNoNode)
	}
	if kvs := why.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 && (!bySeq || kvs[0].CreateRevision == seq) {
		return fmt.Errorf("etcdstore: delete %q: %w", store.ShortPath(p), store.ErrNotEmpty)
	}
	gone()
	if bySeq {
		return fmt.Errorf("etcdstore: delete %q: %w: no node with Seq %d", store.ShortPath(p), store.ErrNoNode, seq)
	}
	return fmt.Errorf("etcdstore: delete %q: %w", store.ShortPath(p), store.ErrNoNode)
}

func node(kv *mvccpb.KeyValue) store.Node {
	return store.Node{
		Path:    string(kv.Key),
		Data:    kv.Value,
		Seq:     kv.CreateRevision,
		Version: kv.Version - 1,
		Owner:   kv.Lease,
	}
}
