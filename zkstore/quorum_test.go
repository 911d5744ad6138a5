package zkstore

import (
	"testing"
	"time"
)

// TestQuorumAnchor feeds answers to a Store's clock and checks that only
// answers through the leader move the deadline, and then only to a
// request answered at least quorumLag before the one that passed through
// the leader was sent (see quorum.go).
func TestQuorumAnchor(t *testing.T) {
	const timeout = 3 * time.Second // quorumLag 1 s
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	s := &Store{base: base, noTimer: true}
	deadline := func() time.Time { return s.base.Add(time.Duration(s.deadline.Load())) }
	want := func(step string, ms int) {
		t.Helper()
		if got, w := deadline(), at(ms).Add(timeout); !got.Equal(w) {
			t.Errorf("%s: deadline +%v; want +%v", step, got.Sub(base), w.Sub(base))
		}
	}
	answer := func(sentMs, answeredMs int, leader bool) {
		s.proveLocked(ack{sent: at(sentMs), leader: leader}, at(answeredMs))
	}

	s.timedID = 1
	if !s.connectAcked(ack{sent: at(0), connect: true, session: 1, timeout: timeout}) {
		t.Fatal("connect response not accepted")
	}
	want("connect", 0)
	answer(990, 1000, false) // a ping
	answer(1990, 2000, false)
	want("pings alone", 0)
	answer(2100, 2110, true) // a sync: proves the ping answered at +1000
	want("sync", 990)
	answer(2200, 2210, true) // a write: still nothing newer 1 s before it
	want("write", 990)
	answer(3100, 3110, true) // proves the ping answered at +2000
	want("later sync", 1990)

	// A new connection: what the old one proved is forgotten, the connect
	// response anchors.
	if !s.connectAcked(ack{sent: at(4000), connect: true, session: 1, timeout: timeout}) {
		t.Fatal("reconnection not accepted")
	}
	want("reconnection", 4000)
	answer(4500, 4510, true) // less than quorumLag after the connect
	want("sync just after the reconnection", 4000)
	answer(5100, 5110, true)
	want("sync after quorumLag", 4000) // the connect request is the latest proved
	answer(6200, 6210, true)
	want("next sync", 5100)
}

// TestQuorumProofsBounded checks that the proofs kept stay bounded
// however many answers arrive without one through the leader.
func TestQuorumProofsBounded(t *testing.T) {
	const timeout = 2400 * time.Millisecond // grain 100 ms
	base := time.Now()
	s := &Store{base: base, noTimer: true, timedID: 1}
	s.connectAcked(ack{sent: base, connect: true, session: 1, timeout: timeout})
	for i := range 10000 {
		at := base.Add(time.Duration(i) * 7 * time.Millisecond)
		s.proveLocked(ack{sent: at}, at)
	}
	if len(s.proofs) > maxProofs {
		t.Errorf("%d proofs kept; want at most %d", len(s.proofs), maxProofs)
	}
	// The latest proof moves until it is a grain past the one before it.
	for i := 2; i < len(s.proofs); i++ {
		if d := s.proofs[i].answered.Sub(s.proofs[i-2].answered); d < proofGrain(timeout) {
			t.Errorf("proofs %d and %d %v apart; want at least a grain (%v)", i-2, i, d, proofGrain(timeout))
		}
	}
}
