package etcdstore

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

// Directories made implicitly, and taken back.
//
// A parent that Create makes (makeParents) is a key like any other, plus a
// marker key of the adapter's own (dirKey) that says the library made it.
// A delete that empties such a directory deletes it in the same
// transaction, with its marker and its front record (see DeleteFront): a
// nested transaction that checks that the marker is there and that no key
// but the deleted one lies below the directory. Every check is in the
// server's transaction, so a create racing with it either lands first (and
// the directory stays) or finds the directory gone and makes it again. A
// directory above one so removed is removed in turn, by one transaction of
// the same checks each, best effort: one left behind is removed by the
// next one out of it. A node the user created has no marker and is never
// removed.
//
// A directory emptied by a session's end (its lease's keys expire) is not
// removed then: no client sees it happen. It is removed by the next one
// out of it, when a contender comes back to the same name; the number of
// such directories is bounded by the holds live when sessions died, not by
// time.

// dirKey is the marker of the directory p, made implicitly.
func (s *Store) dirKey(p string) string { return s.ownKeys + "dir" + p }

// frontOf is the key of the front record of the directory dir.
func (s *Store) frontOf(dir string) string { return s.ownKeys + "front" + dir }

// makeDir is the operation that makes the missing directory a, with its
// marker.
func (s *Store) makeDir(a string) clientv3.Op {
	return clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(a), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(a, ""), clientv3.OpPut(s.dirKey(a), "")}, nil)
}

// reclaimOp returns the nested transaction that removes p's parent when it
// was made implicitly and p, deleted in the same transaction, was the last
// key below it; otherwise it runs els. ok is false for a child of the root,
// which is never removed: the caller runs els itself.
func (s *Store) reclaimOp(p string, els ...clientv3.Op) (op clientv3.Op, ok bool) {
	dir := store.Parent(p)
	if dir == "/" {
		return clientv3.Op{}, false
	}
	end := clientv3.GetPrefixRangeEnd(dir + "/")
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(s.dirKey(dir)), ">", 0),
		clientv3.Compare(clientv3.CreateRevision(dir+"/"), "=", 0).WithRange(p),
		clientv3.Compare(clientv3.CreateRevision(p+"\x00"), "=", 0).WithRange(end),
	}
	then := []clientv3.Op{clientv3.OpDelete(dir), clientv3.OpDelete(s.dirKey(dir)), clientv3.OpDelete(s.frontOf(dir))}
	return clientv3.OpTxn(cmps, then, els), true
}

// reclaimed reports whether the reply r of a reclaimOp removed the
// directory.
func reclaimed(r *pb.TxnResponse) bool { return r != nil && r.Succeeded }

// reclaimAbove removes dir's implicit ancestors that are left empty, from
// the innermost, after dir itself was removed; each check and delete is
// one transaction, as in reclaimOp. It stops at the first that stays, or
// on any error: one left behind is removed by the next one out of it.
func (s *Store) reclaimAbove(ctx context.Context, dir string) {
	for p := store.Parent(dir); p != "/"; p = store.Parent(p) {
		actx, cancel := context.WithTimeout(ctx, s.attempt)
		resp, err := s.kv.Txn(actx).If(
			clientv3.Compare(clientv3.CreateRevision(s.dirKey(p)), ">", 0),
			clientv3.Compare(clientv3.CreateRevision(p+"/"), "=", 0).WithPrefix(),
		).Then(clientv3.OpDelete(p), clientv3.OpDelete(s.dirKey(p)), clientv3.OpDelete(s.frontOf(p))).Commit()
		cancel()
		if err != nil || !resp.Succeeded {
			return
		}
	}
}
