package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/internal/reclaim"
	"github.com/corral-go/corral/store"
)

// Directories made implicitly, and taken back.
//
// A parent that Create makes is a key like any other, plus a marker key of
// the adapter's own (dirKey) that says the library made it. A delete that
// empties such a directory deletes it in the same transaction, with its
// marker and its front record (see DeleteFront): a nested transaction that
// checks that the marker is there and that no key but the deleted one lies
// below the directory. Nested in that one, a transaction of the same
// checks does the same for the directory above, and so on up to the first
// node made explicitly: the whole chain goes in the delete's one round
// trip. etcd evaluates every compare of a transaction, nested ones
// included, against the state before any of its operations (the server's
// compareToPath), so each level's emptiness check leaves out the subtree
// being removed below it. Every check is in the server's transaction, so a
// create racing with it either lands first (and the directory stays) or
// finds the directory gone and makes it again. Past maxNest levels (etcd
// bounds a request's operations and size), the directories further up are
// removed by one transaction each; one whose request fails for a cause
// that may pass (a connection lost) is tried again, a second or more
// later, while the session lasts (reclaimFailed). A node the user created
// has no marker and is never removed.
//
// Create makes missing ancestors in its own transaction (see createReq), so
// a name used again after its directories went costs one round trip, as it
// did when they stayed; makeParents makes them, in a transaction of its
// own, only for the deepest paths.
//
// Not at once, by default: each directory's and marker's put and delete is
// server work, and a name locked and unlocked over and over would pay for
// its directories every cycle (measured: 0.5× etcd's concurrency.Mutex,
// against 0.7–0.9× when they stayed). So the delete leaves the directory,
// and the Store removes it once [WithReclaimDelay] has passed without this
// Store creating in it again (internal/reclaim), by a transaction of the
// same checks (reclaimAll); with a delay of 0, in the delete's own
// transaction, as described above.
//
// A directory emptied by a session's end (its lease's keys expire) is not
// removed then: no client sees it happen. It is removed by the next one
// out of it, when a contender comes back to the same name; the number of
// such directories is bounded by the holds live when sessions died, not by
// time.

// maxNest bounds a delete's nested reclaiming: etcd refuses a transaction
// with more than --max-txn-ops (128 by default) operations or compares at
// any level, nested levels counting against their parent's budget (four
// each here), and requests over --max-request-bytes (1.5 MiB by default),
// where each level names its directory about ten times: 16 levels of
// paths of MaxPathSize take about 640 KiB.
const maxNest = 16

// DefaultReclaimDelay is how long, by default, a Store keeps a directory
// Create made after it deleted the last key below it (see
// [WithReclaimDelay]).
const DefaultReclaimDelay = reclaim.DefaultDelay

// WithReclaimDelay sets how long a Store keeps a directory Create made
// (see Parents in package store) after it deleted the last key below it: a
// Store that creates in it again within d keeps it, at no cost, and one
// that does not removes it then (one transaction); Close removes those
// still due. 0 removes it in the delete's own transaction, at no extra
// request but with the server work of its keys every cycle for a name used
// over and over; a negative d is invalid ([store.ErrInvalidArgument]).
func WithReclaimDelay(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.invalid = fmt.Sprintf("negative reclaim delay %v", d)
			return
		}
		o.delay = d
	}
}

// maxFlush bounds how long Close spends removing the directories still
// due; a directory left is removed by the next one out of it.
const maxFlush = time.Second

// reclaimNow is reclaimOp(p, els) with no reclaim delay, and no operation
// (ok false) with one: the directory is removed later (see deleted).
func (s *Store) reclaimNow(p string, els ...clientv3.Op) (op clientv3.Op, dirs []string, ok bool) {
	if s.later.Delay > 0 {
		return clientv3.Op{}, nil, false
	}
	return s.reclaimOp(p, els...)
}

// deleted finishes the delete of p, whose transaction resp succeeded:
// the removal of the directories it emptied is finished (ok, with no
// delay: reclaimOp was in it) or left for later.
func (s *Store) deleted(ctx context.Context, p string, resp *clientv3.TxnResponse, ok bool, dirs []string) {
	switch {
	case ok:
		// reclaimOp's transaction is the delete's last operation.
		s.reclaimed(ctx, resp.Responses[len(resp.Responses)-1].GetResponseTxn(), dirs)
	case s.later.Delay > 0 && store.Parent(p) != "/":
		s.later.Emptied(store.Parent(p))
	}
}

// reclaimAll removes each of dirs that is empty and made implicitly, and
// each directory above it that this empties, by one transaction each (and
// more past maxNest levels); a few at a time, in goroutines Close waits
// for, none after the session ended.
func (s *Store) reclaimAll(dirs []string) {
	done := make(chan struct{})
	if !s.goWatch(func() {
		defer close(done)
		reclaim.Each(dirs, s.reclaimDir)
	}) {
		return
	}
	<-done
}

// reclaimDir removes dir if it was made implicitly and holds nothing, and
// each directory above it that this empties (see reclaimOp).
func (s *Store) reclaimDir(dir string) {
	// dir+"/" stands for a key deleted below dir: reclaimOp's check that
	// dir holds nothing but it and its subtree then covers all of dir.
	op, dirs, ok := s.reclaimOp(dir + "/")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.attempt)
	defer cancel()
	resp, err := s.kv.Txn(ctx).Then(op).Commit()
	if err != nil {
		s.reclaimFailed(dir, err)
		return
	}
	if len(resp.Responses) == 0 {
		return
	}
	s.reclaimed(s.ctx, resp.Responses[0].GetResponseTxn(), dirs)
}

// reclaimFailed hands dir back to the reclaimer when err, the error of
// its removal's request, may pass (a connection lost, an attempt timed
// out): etcd has no reaper, so a directory whose removal was cut short
// would otherwise stay until someone used it again (see
// reclaim.Later.Again). A refusal, an error of no connection's, or the
// session's end is not tried again.
func (s *Store) reclaimFailed(dir string, err error) {
	if s.ctx.Err() == nil && errors.Is(classify(s.ctx, err), store.ErrDisconnected) {
		s.later.Again(dir)
	}
}

// dirs is what a Store knows to exist of the directories it created in,
// so that its next create there carries no branch that makes them (a
// larger transaction for the server to decode, log and check every time):
// a directory removed by someone else meanwhile costs that create one
// transaction more (errNoParent, then makeParents). It forgets a directory
// it removes, and forgets all once it knows maxDirs.
type dirs struct {
	mu sync.Mutex
	m  map[string]struct{}
}

// maxDirs bounds what dirs remembers.
const maxDirs = 4096

func (d *dirs) has(p string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.m[p]
	return ok
}

func (d *dirs) add(p string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || len(d.m) >= maxDirs {
		d.m = make(map[string]struct{})
	}
	d.m[p] = struct{}{}
}

func (d *dirs) drop(p string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, p)
}

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
// key below it, and, nested in it, each directory above that this leaves
// empty, up to the bounds above; when the parent stays, it runs els
// instead. dirs are the directories it may remove, innermost first. ok is
// false for a child of the root, which is never removed: the caller runs
// els itself.
func (s *Store) reclaimOp(p string, els ...clientv3.Op) (op clientv3.Op, dirs []string, ok bool) {
	for d := store.Parent(p); d != "/" && len(dirs) < maxNest; d = store.Parent(d) {
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 {
		return clientv3.Op{}, nil, false
	}
	var inner []clientv3.Op
	for i := len(dirs) - 1; i >= 0; i-- {
		below := p
		if i > 0 {
			below = dirs[i-1]
		}
		var e []clientv3.Op
		if i == 0 {
			e = els
		}
		inner = []clientv3.Op{clientv3.OpTxn(s.emptyBut(dirs[i], below), append(s.dropDir(dirs[i]), inner...), e)}
	}
	return inner[0], dirs, true
}

// emptyBut is the check that dir was made implicitly and holds nothing
// but below (its child) and below's subtree: the keys of dir's subtree
// before below, between below and its subtree ("below-x" and the like)
// and after below's subtree. The marker comes first: etcd stops at the
// first compare that fails, so a directory made explicitly costs one
// point read, whatever it holds.
func (s *Store) emptyBut(dir, below string) []clientv3.Cmp {
	none := func(from, to string) clientv3.Cmp {
		return clientv3.Compare(clientv3.CreateRevision(from), "=", 0).WithRange(to)
	}
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(s.dirKey(dir)), ">", 0),
		none(dir+"/", below),
		none(below+"\x00", below+"/"),
		none(below+"0", clientv3.GetPrefixRangeEnd(dir+"/")),
	}
}

// dropDir deletes the directory dir with its marker and front record.
func (s *Store) dropDir(dir string) []clientv3.Op {
	return []clientv3.Op{clientv3.OpDelete(dir), clientv3.OpDelete(s.dirKey(dir)), clientv3.OpDelete(s.frontOf(dir))}
}

// reclaimedTo returns the outermost of dirs that the reply r of a
// reclaimOp removed, or "" if it removed none.
func reclaimedTo(r *pb.TxnResponse, dirs []string) string {
	last := ""
	for _, d := range dirs {
		if r == nil || !r.Succeeded {
			break
		}
		last = d
		// The transaction of the level above follows dropDir's deletes.
		if len(r.Responses) <= 3 {
			break
		}
		r = r.Responses[3].GetResponseTxn()
	}
	return last
}

// reclaimed finishes what the reply r of reclaimOp(p) began: when it
// removed the outermost directory it may remove, those above it that are
// left empty are removed in turn.
func (s *Store) reclaimed(ctx context.Context, r *pb.TxnResponse, dirs []string) {
	for _, d := range dirs {
		s.dirs.drop(d) // maybe removed: the next create may make it
	}
	if top := reclaimedTo(r, dirs); top != "" && top == dirs[len(dirs)-1] {
		s.reclaimAbove(ctx, top)
	}
}

// reclaimAbove removes dir's implicit ancestors that are left empty, from
// the innermost, after dir itself was removed; each check and delete is
// one transaction. It stops at the first that stays, or on any error: one
// whose request failed is tried again later (reclaimFailed).
func (s *Store) reclaimAbove(ctx context.Context, dir string) {
	for p := store.Parent(dir); p != "/"; p = store.Parent(p) {
		s.dirs.drop(p)
		resp, err := do(s, ctx, func(actx context.Context) (*clientv3.TxnResponse, error) {
			return s.kv.Txn(actx).If(
				clientv3.Compare(clientv3.CreateRevision(s.dirKey(p)), ">", 0),
				clientv3.Compare(clientv3.CreateRevision(p+"/"), "=", 0).WithPrefix(),
			).Then(s.dropDir(p)...).Commit()
		})
		if err != nil {
			s.reclaimFailed(p, err)
			return
		}
		if !resp.Succeeded {
			return
		}
	}
}
