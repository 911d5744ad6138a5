package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

var _ store.BatchCreator = (*Store)(nil)

// CreateBatch creates the nodes of batch under parent in one transaction,
// which the server applies all or none; see [store.BatchCreator]. It
// checks that no node exists and that the parent exists with no lease, and
// puts every node; a missing parent is made first, as Create makes it. A
// sequential node's name gets 16 random hexadecimal digits, as Create's
// does, and every node of the batch has the transaction's revision as its
// Seq. The transaction is one attempt: one whose reply is lost or late is
// not sent again (ErrDisconnected, its outcome unknown), nor undone when
// ctx ends first. A parent it made, when it fails, is taken back if it is
// still empty (leftEmpty).
func (s *Store) CreateBatch(ctx context.Context, parent string, batch []store.BatchNode, mode store.Mode) (_ []store.Node, err error) {
	if err := store.ValidateBatch(parent, batch, mode); err != nil {
		return nil, err
	}
	if mode == store.Persistent {
		// etcd refuses a transaction that puts a key twice as malformed;
		// the store's answer is that the second node exists.
		seen := make(map[string]bool, len(batch))
		for _, b := range batch {
			if seen[b.Name] {
				return nil, fmt.Errorf("etcdstore: create %q: %w: %q twice in the batch", store.ShortPath(parent), store.ErrNodeExists, b.Name)
			}
			seen[b.Name] = true
		}
	}
	if err := s.enter(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(parent), err)
	}
	cmps := make([]clientv3.Cmp, 0, len(batch)+2)
	puts := make([]clientv3.Op, len(batch), len(batch)+1)
	nodes := make([]store.Node, len(batch))
	for i, b := range batch {
		var name string
		if mode == store.Sequential {
			name = freshChild(parent, b.Name)
		} else {
			name = store.Join(parent, b.Name)
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(name), "=", 0))
		puts[i] = clientv3.OpPut(name, string(b.Data))
		nodes[i] = store.Node{Path: name, Data: b.Data}
	}
	made := false
	defer func() {
		if err != nil && made {
			s.leftEmpty(parent)
		}
	}()
	for {
		// The parent's compares, and its read while its CreateRevision
		// is unknown (see parentCmps), as of this try.
		cmps, puts = cmps[:len(batch)], puts[:len(batch)]
		var rev int64
		if parent != "/" {
			if cmps, rev = s.parentCmps(cmps, parent); rev == 0 {
				puts = append(puts, s.ops.dir(parent).get)
			}
		}
		resp, err := s.txn1(ctx, cmps, puts, nil)
		if err != nil {
			return nil, s.fail(ctx, "create", parent, err)
		}
		if serr := s.sessionErr(); serr != nil {
			return nil, fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(parent), serr) // a reply after the session's end proves nothing
		}
		if resp.Succeeded && len(puts) > len(batch) {
			s.ops.learnParent(parent, resp.Responses[len(batch)].GetResponseRange().Kvs)
		}
		if resp.Succeeded {
			for i := range nodes {
				nodes[i].Seq = resp.Header.Revision
			}
			return nodes, nil
		}
		// Refused: what tells why is read apart, as after a refused
		// create (see createReq), so that a batch that is made, nearly
		// every one, carries no read it does not use.
		why, err := s.batchRefused(ctx, parent, nodes)
		if err != nil {
			return nil, s.fail(ctx, "create", parent, err)
		}
		switch {
		case why == refusedParentLease:
			return nil, fmt.Errorf("etcdstore: create %q: %w", store.ShortPath(parent), store.ErrEphemeralParent)
		case why == refusedNodeExists:
			return nil, fmt.Errorf("etcdstore: create %q: %w: a node of the batch", store.ShortPath(parent), store.ErrNodeExists)
		case why == refusedNothing:
			continue // what refused it changed in between: send it again
		case made:
			// Made, then deleted by someone else meanwhile: the
			// batch can wait no longer for it.
			return nil, fmt.Errorf("etcdstore: create %q: %w: parent deleted while made", store.ShortPath(parent), store.ErrNoNode)
		}
		made = true
		err = s.makeParents(ctx, store.Join(parent, batch[0].Name))
		if s.madeParentsHook != nil {
			s.madeParentsHook()
		}
		if err != nil {
			return nil, s.fail(ctx, "create", parent, err)
		}
	}
}

// Why a batch's transaction was refused, as read after it.
const (
	refusedNothing     = iota // nothing refuses it any more
	refusedNoParent           // the parent is missing
	refusedParentLease        // the parent is attached to a lease
	refusedNodeExists         // a node of the batch exists
)

// batchRefused reads, in one attempt of a call made with ctx, why a batch
// of nodes under parent was refused: what it finds held at a moment within
// the call, when the batch would have been refused too.
func (s *Store) batchRefused(ctx context.Context, parent string, nodes []store.Node) (int, error) {
	reads := make([]clientv3.Op, 0, len(nodes)+1)
	if parent != "/" {
		reads = append(reads, s.ops.dir(parent).get)
	}
	for _, n := range nodes {
		reads = append(reads, clientv3.OpGet(n.Path, clientv3.WithCountOnly()))
	}
	resp, err := s.txn1(ctx, nil, reads, nil)
	if err != nil {
		return 0, err
	}
	rs := resp.Responses
	if parent != "/" {
		kvs := rs[0].GetResponseRange().Kvs
		s.ops.learnParent(parent, kvs)
		switch {
		case len(kvs) == 0:
			return refusedNoParent, nil
		case kvs[0].Lease != 0:
			return refusedParentLease, nil
		}
		rs = rs[1:]
	}
	for _, r := range rs {
		if r.GetResponseRange().Count > 0 {
			return refusedNodeExists, nil
		}
	}
	return refusedNothing, nil
}

// txn1 sends one transaction as one attempt, given up after the attempt
// timeout (ErrDisconnected: its outcome is unknown).
func (s *Store) txn1(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	return do(s, ctx, func(actx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(actx, cmps, then, els)
	})
}
