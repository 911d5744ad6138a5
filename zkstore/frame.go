package zkstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// headLen is how much of each frame's body a framer keeps: enough for a
// connect request (protocolVersion, lastZxidSeen, timeOut, sessionId), a
// connect response (protocolVersion, timeOut, sessionId) and the header of
// any other frame (a request's xid and opcode; a reply's xid, zxid, err).
const headLen = 24

// framer splits one direction of a ZooKeeper connection into its frames:
// each is a 4-byte big-endian length, then that many bytes of body. It
// takes the stream in chunks of any size and keeps of each frame only its
// length and the first headLen bytes of its body.
type framer struct {
	pos   int // bytes of the current frame consumed, length prefix included
	size  int // body length of the current frame, once pos >= 4
	head  [4 + headLen]byte
	index int // frames completed so far

	// edit, when set, may rewrite the first headLen bytes of each frame's
	// body as they pass (see zxid.go): it is called with the frame's index,
	// its head so far (the length prefix, and the body up to b's end, as
	// it arrived), b's offset in the body, and b, part of the stream fed,
	// which it may change in place.
	edit func(index int, head []byte, off int, b []byte)
}

// feed consumes p. It calls start when the first byte of a frame is
// consumed, check once the frame's body length is known (an error stops
// the feed and is returned), and done when the frame's last byte is
// consumed, with the frame's head: its length prefix and up to headLen
// bytes of its body. Any of them may be nil.
func (f *framer) feed(p []byte, start func(), check func(index, size int) error, done func(index int, head []byte)) error {
	for len(p) > 0 {
		if f.pos == 0 && start != nil {
			start()
		}
		if f.pos < 4 {
			n := copy(f.head[f.pos:4], p)
			f.pos += n
			p = p[n:]
			if f.pos < 4 {
				return nil
			}
			f.size = int(binary.BigEndian.Uint32(f.head[:4]))
			if check != nil {
				if err := check(f.index, f.size); err != nil {
					return err
				}
			}
		}
		got := f.pos - 4
		n := min(f.size-got, len(p))
		if got < headLen {
			k := copy(f.head[f.pos:4+headLen], p[:n])
			if f.edit != nil {
				f.edit(f.index, f.head[:f.pos+k], got, p[:k])
			}
		}
		f.pos += n
		p = p[n:]
		if f.pos-4 == f.size {
			if done != nil {
				done(f.index, f.head[:4+min(f.size, headLen)])
			}
			f.index++
			f.pos = 0
		}
	}
	return nil
}

// ack is what the server's reading of our frames proves: it received the
// request sent at sent. A connect response also says which session the
// server accepted, with the timeout it granted.
type ack struct {
	sent    time.Time
	op      int32 // of the request answered
	connect bool
	leader  bool          // the request passed through the leader (see quorum.go)
	session int64         // of a connect response; 0: the session is refused as expired
	timeout time.Duration // of a connect response: the negotiated session timeout
	xid     int32         // of any other answer
	code    int32         // its error code
}

// maxConnectResponse bounds the first frame a server sends. A connect
// response is about 40 bytes; anything much longer comes from a peer that
// is not a ZooKeeper server, and the client would allocate whatever length
// it announces.
const maxConnectResponse = 1 << 10

var errNotZooKeeper = errors.New("zkstore: the peer does not answer as a ZooKeeper server")

// tracker follows both directions of one connection to learn which of our
// requests the server has received. Every frame we send after the connect
// request is a request (pings included), and the server answers each with
// exactly one frame; its other frames are watch notifications (xid -1).
// TCP keeps order, so once the server's k-th answer has arrived it has
// received at least our first k frames, and has heard from us no earlier
// than the moment we began to send the k-th. The connect response answers
// the connect request, our first frame.
//
// A tracker is not safe for concurrent use.
type tracker struct {
	up, down framer
	sent     []outgoing // each frame not yet answered, oldest first

	// z, when set, is the Store's record of the zxids the client has seen,
	// which the tracker keeps and writes into the client's requests in its
	// stead (see zxid.go).
	z       *zxids
	asked   int64 // the lastZxidSeen the connect request carried
	session int64 // the session the connect request asked to resume; 0: a new one
	rel     int64 // the relativeZxid of the SetWatches request being written

	// rounds, when set, counts the round trips the Store's calls wait
	// for: the requests written when no other call was unanswered (pings
	// and the pacer's syncs aside).
	rounds *atomic.Int64
}

// outgoing is a frame we sent: when it began to be sent, and the opcode of
// the request it carries, once its head has been written (opUnknown
// until then, and for the connect request).
type outgoing struct {
	at time.Time
	op int32
}

// wrote records p, which is about to be written at time at.
// With z set, it first writes the Store's zxids into p (see zxid.go).
func (t *tracker) wrote(p []byte, at time.Time) {
	t.hook()
	t.up.feed(p, func() { t.sent = append(t.sent, outgoing{at: at, op: opUnknown}) }, nil, t.wroteFrame)
}

// wroteFrame learns the opcode of the frame just written, which is the
// last one sent: it cannot have been answered before its last byte left.
func (t *tracker) wroteFrame(index int, head []byte) {
	if index == 0 {
		if len(head) >= 28 {
			t.session = int64(binary.BigEndian.Uint64(head[20:]))
		}
		return
	}
	if len(head) < 12 || len(t.sent) == 0 {
		return // too short to be a request
	}
	op := int32(binary.BigEndian.Uint32(head[8:]))
	t.sent[len(t.sent)-1].op = op
	if t.rounds != nil && calls(op) && !slices.ContainsFunc(t.sent[:len(t.sent)-1], func(o outgoing) bool { return calls(o.op) }) {
		t.rounds.Add(1)
	}
}

// calls reports whether a request of opcode op is one of the Store's
// calls, not a ping or the pacer's sync (see tracker.rounds).
func calls(op int32) bool { return op != opPing && op != opSync }

// hook sets the framers' edits once z is set.
func (t *tracker) hook() {
	if t.z != nil && t.up.edit == nil {
		t.up.edit, t.down.edit = t.editUp, t.editDown
	}
}

// read follows p, just read, and calls acked for every answer it
// completes. With z set, it zeroes in p the zxids the client would take
// (see zxid.go). It fails when the peer is not a ZooKeeper server.
func (t *tracker) read(p []byte, acked func(ack)) error {
	t.hook()
	return t.down.feed(p, nil, checkDown, func(index int, head []byte) {
		body := head[4:]
		var a ack
		switch {
		case index == 0:
			if len(body) < 16 {
				return // malformed: prove nothing
			}
			a.connect = true
			a.timeout = time.Duration(int32(binary.BigEndian.Uint32(body[4:]))) * time.Millisecond
			a.session = int64(binary.BigEndian.Uint64(body[8:]))
		case len(body) < 4:
			return // malformed: prove nothing
		case int32(binary.BigEndian.Uint32(body)) == -1:
			return // a watch notification answers nothing
		}
		if t.z != nil {
			switch {
			case a.connect:
				t.z.connected(a.session, t.session != 0 && a.session == t.session, t.asked)
			case len(body) >= 12 && int32(binary.BigEndian.Uint32(body)) >= 0:
				t.z.answered(int64(binary.BigEndian.Uint64(body[4:])))
			}
		}
		if len(t.sent) == 0 {
			return // an answer to nothing we sent: prove nothing
		}
		if t.z != nil && t.sent[0].op == opSetWatches {
			t.z.rearmed()
		}
		a.sent, a.op = t.sent[0].at, t.sent[0].op
		if !a.connect && len(body) >= 16 {
			a.xid, a.code = int32(binary.BigEndian.Uint32(body)), int32(binary.BigEndian.Uint32(body[12:]))
			a.leader = passedLeader(t.sent[0].op, a.code)
		}
		// Shifted down, not resliced: the slice keeps its room, where
		// t.sent[1:] would leave wrote to allocate anew every few frames.
		t.sent = t.sent[:copy(t.sent, t.sent[1:])]
		acked(a)
	})
}

func checkDown(index, size int) error {
	if index == 0 && (size < 16 || size > maxConnectResponse) {
		return fmt.Errorf("%w: its first message is %d bytes long", errNotZooKeeper, size)
	}
	return nil
}
