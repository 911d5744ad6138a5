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
// ctx ends first.
func (s *Store) CreateBatch(ctx context.Context, parent string, batch []store.BatchNode, mode store.Mode) ([]store.Node, error) {
	if err := store.ValidateBatch(parent, batch, mode); err != nil {
		return nil, err
	}
	if mode == store.Persistent {
		// etcd refuses a transaction that puts a key twice as malformed;
		// the store's answer is that the second node exists.
		seen := make(map[string]bool, len(batch))
		for _, b := range batch {
			if seen[b.Name] {
				return nil, fmt.Errorf("etcdstore: create %q: %w: %q twice in the batch", parent, store.ErrNodeExists, b.Name)
			}
			seen[b.Name] = true
		}
	}
	if err := s.enter(ctx); err != nil {
		return nil, fmt.Errorf("etcdstore: create %q: %w", parent, err)
	}
	cmps := make([]clientv3.Cmp, 0, len(batch)+2)
	puts := make([]clientv3.Op, len(batch))
	nodes := make([]store.Node, len(batch))
	for i, b := range batch {
		name := store.Join(parent, b.Name)
		if mode == store.Sequential {
			name = freshName(name)
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(name), "=", 0))
		puts[i] = clientv3.OpPut(name, string(b.Data))
		nodes[i] = store.Node{Path: name, Data: b.Data}
	}
	var els []clientv3.Op
	if parent != "/" {
		d := s.ops.dir(parent)
		cmps = append(cmps, d.exists, d.noLease)
		els = append(els, d.get)
	}
	for made := false; ; made = true {
		resp, err := s.txn1(ctx, cmps, puts, els)
		if err != nil {
			return nil, s.fail(ctx, "create", parent, err)
		}
		if serr := s.sessionErr(); serr != nil {
			return nil, fmt.Errorf("etcdstore: create %q: %w", parent, serr) // a reply after the deadline proves nothing
		}
		if resp.Succeeded {
			for i := range nodes {
				nodes[i].Seq = resp.Header.Revision
			}
			return nodes, nil
		}
		switch kvs := resp.Responses[0].GetResponseRange().Kvs; {
		case parent == "/" || len(kvs) > 0 && kvs[0].Lease == 0:
			return nil, fmt.Errorf("etcdstore: create %q: %w: a node of the batch", parent, store.ErrNodeExists)
		case len(kvs) > 0:
			return nil, fmt.Errorf("etcdstore: create %q: %w", parent, store.ErrEphemeralParent)
		case made:
			// Made, then deleted by someone else meanwhile: the
			// batch can wait no longer for it.
			return nil, fmt.Errorf("etcdstore: create %q: %w: parent deleted while made", parent, store.ErrNoNode)
		}
		if err := s.makeParents(ctx, store.Join(parent, batch[0].Name)); err != nil {
			return nil, s.fail(ctx, "create", parent, err)
		}
	}
}

// txn1 sends one transaction as one attempt, given up after the attempt
// timeout (ErrDisconnected: its outcome is unknown).
func (s *Store) txn1(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	return do(s, ctx, func(actx context.Context) (*clientv3.TxnResponse, error) {
		return s.txn(actx, cmps, then, els)
	})
}
