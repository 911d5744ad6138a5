package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// fenceRev returns the fence's ModRevision as the session last saw it,
// which a create transaction requires (see above).
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
	cmps, then, els := s.undoTxn(r, made, unknown)
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

// undoTxn returns the transaction of undo: delete the node r made, with
// CreateRevision made when that is known, or, when an attempt's outcome
// is unknown, the node at r's name if it is there as r would have made it
// (sequential or ephemeral nodes only: a fixed persistent name may be
// someone else's); and move the fence when unknown, whatever the delete's
// compares find.
func (s *Store) undoTxn(r *createReq, made int64, unknown bool) (cmps []clientv3.Cmp, then, els []clientv3.Op) {
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
	return cmps, then, els
}
