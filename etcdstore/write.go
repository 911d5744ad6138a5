package etcdstore

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

var _ store.GuardedWriter = (*Store)(nil)

// WriteIf applies ops under guards in one transaction: it compares each
// guard's CreateRevision with its Seq and each op's condition (the key's
// CreateRevision, its Version, an empty subtree below a delete, a parent
// with no lease under a create), and applies every op; see
// [store.GuardedWriter]. When a compare fails, the transaction's other
// branch reads the guards' and ops' keys instead, and WriteIf tells from
// them, as of that moment, which guard or op refused. The transaction is
// one attempt: one whose reply is lost or late is not sent again
// (ErrDisconnected, its outcome unknown). A set keeps its node's lease; a
// create makes a persistent key.
func (s *Store) WriteIf(ctx context.Context, guards []store.Guard, ops []store.Op) ([]store.Node, error) {
	if err := store.ValidateWrite(guards, ops); err != nil {
		return nil, err
	}
	path := "/"
	if len(ops) > 0 {
		path = ops[0].Path
	}
	if err := s.enter(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: write %q: %w", store.ShortPath(path), err)
	}
	w := s.writeTxn(guards, ops)
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(ctx, w.cmps, w.then, w.els)
	})
	for _, op := range ops {
		if op.Type == store.OpDelete {
			// A name deleted by name is this session's no more, whatever
			// the outcome (see names).
			s.names.forget(op.Path)
		}
	}
	if err != nil {
		return nil, s.fail(ctx, "write", path, err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("etcdstore: write %q: %w", store.ShortPath(path), refusedWrite(guards, ops, resp.Responses))
	}
	return s.written(ops, w.results, resp), nil
}

// writeTxn is the transaction of a WriteIf.
type writeTxn struct {
	cmps      []clientv3.Cmp
	then, els []clientv3.Op
	// results holds, for each op, the index in then of the read that
	// gives its result (a set's), or -1.
	results []int
}

// writeTxn builds the transaction of WriteIf(guards, ops): its compares,
// its writes, and the reads (els) that tell why it was refused, in the
// order of guards and ops (see refusedWrite).
func (s *Store) writeTxn(guards []store.Guard, ops []store.Op) writeTxn {
	w := writeTxn{results: make([]int, len(ops))}
	for _, g := range guards {
		if g.Seq > 0 {
			w.cmps = append(w.cmps, clientv3.Compare(clientv3.CreateRevision(g.Path), "=", g.Seq))
		} else {
			// Every key's CreateRevision is above 0: such a guard
			// never holds.
			w.cmps = append(w.cmps, clientv3.Compare(clientv3.CreateRevision(g.Path), "<", 0))
		}
		w.els = append(w.els, clientv3.OpGet(g.Path, clientv3.WithKeysOnly()))
	}
	for i, op := range ops {
		w.results[i] = -1
		p := op.Path
		w.els = append(w.els, clientv3.OpGet(p, clientv3.WithKeysOnly()))
		if op.Type == store.OpCreate {
			w.cmps = append(w.cmps, clientv3.Compare(clientv3.CreateRevision(p), "=", 0))
			if parent := store.Parent(p); parent != "/" {
				w.cmps = append(w.cmps,
					clientv3.Compare(clientv3.CreateRevision(parent), ">", 0),
					clientv3.Compare(clientv3.LeaseValue(parent), "=", 0))
				w.els = append(w.els, clientv3.OpGet(parent, clientv3.WithKeysOnly()))
			}
			s.later.Keep(store.Parent(p))
			w.then = append(w.then, clientv3.OpPut(p, string(op.Data)))
			continue
		}
		w.cmps = append(w.cmps, clientv3.Compare(clientv3.CreateRevision(p), ">", 0))
		if op.Version != store.AnyVersion {
			w.cmps = append(w.cmps, clientv3.Compare(clientv3.Version(p), "=", op.Version+1))
		}
		switch op.Type {
		case store.OpSet:
			w.then = append(w.then, clientv3.OpPut(p, string(op.Data), clientv3.WithIgnoreLease()), clientv3.OpGet(p, clientv3.WithKeysOnly()))
			w.results[i] = len(w.then) - 1
		case store.OpDelete:
			w.cmps = append(w.cmps, clientv3.Compare(clientv3.CreateRevision(p+"/"), "=", 0).WithPrefix())
			w.els = append(w.els, clientv3.OpGet(p+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1)))
			s.dirs.drop(p)
			w.then = append(w.then, s.dropDir(p)...)
		}
	}
	return w
}

// written returns the results of a WriteIf whose transaction resp was
// applied, and hands the parents its deletes may have emptied to the
// reclaimer.
func (s *Store) written(ops []store.Op, results []int, resp *clientv3.TxnResponse) []store.Node {
	out := make([]store.Node, len(ops))
	for i, op := range ops {
		switch op.Type {
		case store.OpCreate:
			out[i] = store.Node{Path: op.Path, Data: op.Data, Seq: resp.Header.Revision}
		case store.OpSet:
			n := node(resp.Responses[results[i]].GetResponseRange().Kvs[0])
			n.Data = op.Data
			out[i] = n
		case store.OpDelete:
			s.leftEmpty(store.Parent(op.Path))
			fallthrough
		default:
			out[i] = store.Node{Path: op.Path}
		}
	}
	return out
}

// refusedWrite tells which guard or op refused a WriteIf, from rs, the
// reads of its transaction's other branch (see writeTxn), as the first
// whose condition they show unmet.
func refusedWrite(guards []store.Guard, ops []store.Op, rs []*pb.ResponseOp) error {
	next := func() []*mvccpb.KeyValue {
		kvs := rs[0].GetResponseRange().Kvs
		rs = rs[1:]
		return kvs
	}
	for i, g := range guards {
		if kvs := next(); len(kvs) == 0 || kvs[0].CreateRevision != g.Seq {
			return store.GuardRefused(guards, i)
		}
	}
	for i, op := range ops {
		if err := refusedOp(op, next); err != nil {
			return store.OpRefused(ops, i, err)
		}
	}
	// Unreachable: a compare failed, and the reads of the same moment
	// show each one met.
	return fmt.Errorf("%w: refused, and no guard or op found that refused it", store.ErrBadVersion)
}

// refusedOp returns the sentinel of op's refusal, from its reads (taken
// with next, in writeTxn's order), or nil if its condition held.
func refusedOp(op store.Op, next func() []*mvccpb.KeyValue) error {
	kvs := next()
	if op.Type == store.OpCreate {
		var parent []*mvccpb.KeyValue
		if store.Parent(op.Path) != "/" {
			parent = next()
			if len(parent) == 0 {
				return store.ErrNoNode
			}
		}
		switch {
		case len(kvs) > 0:
			return store.ErrNodeExists
		case len(parent) > 0 && parent[0].Lease != 0:
			return store.ErrEphemeralParent
		}
		return nil
	}
	var below []*mvccpb.KeyValue
	if op.Type == store.OpDelete {
		below = next()
	}
	switch {
	case len(kvs) == 0:
		return store.ErrNoNode
	case op.Version != store.AnyVersion && kvs[0].Version-1 != op.Version:
		return store.ErrBadVersion
	case len(below) > 0:
		return store.ErrNotEmpty
	}
	return nil
}
