package zkstore

import (
	"time"
)

// An answer is not a quorum. A follower cut off from its leader goes on
// answering its clients (pings, reads) for syncLimit × tickTime, while the
// leader, which alone expires sessions, may already have expired theirs
// and granted their locks to others. So the session's clock anchors only
// on what proves that the leader has counted the session as live:
//
//   - A connect response that accepts the session: a follower asks the
//     leader to create or revalidate it, and the leader touches it.
//   - An answer to a request that must pass through the leader (a write,
//     a multi, a sync) on the same connection. The leader learns of a
//     session's activity on a follower only from the follower's replies to
//     its pings (every tickTime/2), and those travel on the stream the
//     follower forwards requests on, in order. So once such a request sent
//     at T is answered, the leader has read every ping reply the follower
//     sent before forwarding it, and with them every request the follower
//     had received half a tick earlier. A request answered before
//     T - quorumLag (quorumLag = timeout/3, more than tickTime/2 for any
//     timeout of at least 1.5 ticks; ZooKeeper grants at least 2 by
//     default) was therefore counted by the leader: its send time is a
//     sound anchor, and the latest one is taken.
//
// The Store keeps the send and answer times of its recent answers on the
// current connection (proofs), one per proofGrain at most, to find that
// request; a new connection starts them afresh, since another server's
// ping replies carry nothing of the old one's requests.
//
// To keep the anchor fresh on an idle session, the Store sends a sync
// whenever no request that passed through the leader has been sent and
// answered for syncEvery (a connected session's pacer, see pace). On a
// working connection the deadline then stays at least
// timeout × (1 - 1/3 - 2/8), over a third of a timeout, ahead of the
// latest answer, less two round trips, and the session's end, a guard
// earlier, over a quarter of a timeout on an idle machine (guard
// timeout/8) and a sixth with the guard at its limit (timeout/4). That
// costs 8 syncs per session timeout on an idle session, none on one that
// writes more often.

// ZooKeeper's opcodes of the requests the Store may send (the client's
// own are unexported), and opUnknown for a frame whose head is not known.
const (
	opUnknown         int32 = 0
	opCreate          int32 = 1
	opDelete          int32 = 2
	opSetData         int32 = 5
	opSetACL          int32 = 7
	opSync            int32 = 9
	opCheck           int32 = 13
	opMulti           int32 = 14
	opCreate2         int32 = 15
	opReconfig        int32 = 16
	opCreateContainer int32 = 19
	opDeleteContainer int32 = 20
	opCreateTTL       int32 = 21
	opCloseSession    int32 = -11
)

// ZooKeeper's error codes that the leader gives a write it has processed.
const (
	errOK            int32 = 0
	errNoNode        int32 = -101
	errBadVersion    int32 = -103
	errNoChildrenEph int32 = -108
	errNodeExists    int32 = -110
	errNotEmpty      int32 = -111
)

// passedLeader reports whether an answer with error code errCode to a
// request with opcode op proves that the request passed through the
// leader. A follower forwards every write and sync to the leader, and
// answers it only once the leader has decided it; an error a server can
// give without the leader (a throttled request, a refused ACL) proves
// nothing, so only success and the errors of a decided write count.
func passedLeader(op, errCode int32) bool {
	switch op {
	case opCreate, opDelete, opSetData, opSetACL, opSync, opCheck, opMulti, opCreate2,
		opReconfig, opCreateContainer, opDeleteContainer, opCreateTTL, opCloseSession:
	default:
		return false
	}
	switch errCode {
	case errOK, errNoNode, errBadVersion, errNoChildrenEph, errNodeExists, errNotEmpty:
		return true
	}
	return false
}

// quorumLag is how long before a request that passed through the leader
// another request must have been answered for the leader to have counted
// it (see above): more than half a tick.
func quorumLag(timeout time.Duration) time.Duration { return timeout / 3 }

// syncEvery is how long the pacer lets a session go without a request
// that passed through the leader before it sends a sync.
func syncEvery(timeout time.Duration) time.Duration { return timeout / 8 }

// proofGrain is the least time between two kept proofs: finer does not
// move the anchor by much, and bounds how many are kept.
func proofGrain(timeout time.Duration) time.Duration { return timeout / 24 }

// maxProofs bounds the proofs kept: those of the last quorumLag +
// syncEvery + proofGrain (12 grains), at most two per grain, fit within it.
const maxProofs = 32

// proof is an answer the server sent on the current connection.
type proof struct {
	sent, answered time.Time
}

// resetProofsLocked starts the proofs of a new connection with its
// connect request's. s.mu is held.
func (s *Store) resetProofsLocked(sent, answered time.Time) {
	s.proofs = append(s.proofs[:0], proof{sent, answered})
}

// proveLocked records the answer a, which arrived at answered, and moves
// the deadline if a passed through the leader. s.mu is held.
func (s *Store) proveLocked(a ack, answered time.Time) {
	s.keepProofLocked(proof{a.sent, answered})
	if !a.leader {
		return
	}
	if a.sent.After(s.leaderSent) {
		s.leaderSent = a.sent
	}
	cutoff := a.sent.Add(-quorumLag(s.negotiated))
	i := len(s.proofs) - 1
	for i >= 0 && s.proofs[i].answered.After(cutoff) {
		i--
	}
	if i < 0 {
		return // nothing old enough yet: the connect response holds the deadline
	}
	s.ackLocked(s.proofs[i].sent)
	// Later answers through the leader have later cutoffs: what is older
	// than this proof will never be the latest one before them.
	s.proofs = append(s.proofs[:0], s.proofs[i:]...)
}

// keepProofLocked adds p to the proofs, or, when the one before the
// latest is less than a grain older, puts p in the latest's place: the
// latest answer is always kept, and at most two per grain.
func (s *Store) keepProofLocked(p proof) {
	n := len(s.proofs)
	switch {
	case n >= 2 && p.answered.Sub(s.proofs[n-2].answered) < proofGrain(s.negotiated):
		s.proofs[n-1] = p
	case n == maxProofs:
		s.proofs = append(s.proofs[:0], s.proofs[1:]...)
		fallthrough
	default:
		s.proofs = append(s.proofs, p)
	}
}

// syncDue returns how long until the pacer must send a sync: 0 when it is
// due now.
func (s *Store) syncDue() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(0, time.Until(s.leaderSent.Add(syncEvery(s.negotiated))))
}

// pace keeps the session's anchor fresh (see above): it sends a sync
// whenever no request that passed through the leader has been sent and
// answered for syncEvery, while the session lives. It runs on a goroutine
// the Store owns, counted in s.calls; a sync in flight returns when the
// client closes, which Close waits for.
func (s *Store) pace() {
	defer s.calls.Done()
	t := time.NewTimer(s.syncDue())
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return
		}
		if s.syncDue() > 0 {
			t.Reset(s.syncDue())
			continue
		}
		if err := s.waitConnected(); err != nil {
			return
		}
		sent := time.Now()
		if err := s.conn.Sync("/"); err != nil {
			s.log.Debug("zkstore: sync failed", "err", err)
		}
		s.syncs.Add(1)
		// A sync that failed is not tried again at once: the next
		// connection's response anchors the session anew.
		t.Reset(max(s.syncDue(), syncEvery(s.SessionTimeout())-time.Since(sent)))
	}
}
