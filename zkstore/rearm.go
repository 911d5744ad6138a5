package zkstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Re-armed watches: a guard against a data race in go-zookeeper v1.0.4.
//
// After a reconnection, go-zookeeper re-arms its watches with a SetWatches
// request built from the latest zxid it has seen (Conn.sendSetWatches reads
// Conn.lastZxid), on its connection goroutine, while its receive loop is
// already taking answers on the new connection and writes Conn.lastZxid for
// every answer that carries a zxid. Nothing orders the two (upstream:
// go-zookeeper/zk pull request 35, samuel/go-zookeeper issue 260; v1.0.4 is
// the newest release), and the Store's calls that waited for the
// reconnection go out at once, so their answers can reach the receive loop
// before the SetWatches request is built: `go test -race` then reports the
// race in the client (TestReconnectRearmsWatchesRaceFree provokes it).
//
// The Store makes that order certain from the connection it hands the
// client (a link):
//
//   - The client reads Conn.lastZxid only when it has watches to re-arm,
//     and then always writes a SetWatches request (opcode 101) once it has.
//     So that it always has one, the Store's first watch, set by Open before
//     anything else, is on a path no client can ever create (sentinelPath:
//     ZooKeeper refuses U+E000 in a node's name, go-zookeeper does not check
//     for it), and never fires while the session lives.
//   - A link dialled once that watch is known to be set (its answer has been
//     read) is gated: it delivers no answer that carries a zxid until the
//     client has written the SetWatches request on it. Other frames (the
//     answers to re-sent credentials, which the client awaits before it
//     sends anything else and which carry no zxid; pings; notifications)
//     pass. The client's receive loop thus writes Conn.lastZxid only after
//     the SetWatches request was built: read, then write, in one order.
//
// The server keeps that one watch per session (`wchs` counts it) until the
// session ends. Remove this file's mechanism once go-zookeeper orders the
// two itself.
const sentinelPath = "/\ue000"

// The opcodes the guard recognises (ZooKeeper's errors and the opcodes
// of writes are in quorum.go).
const (
	opExists     int32 = 3
	opSetAuth    int32 = 100
	opSetWatches int32 = 101
)

// rearm is the Store's side of the guard.
type rearm struct {
	xid   atomic.Int32 // of the latest sentinel request written; 0: none
	armed atomic.Bool  // the answer to it has been read: the client holds the watch
}

// armSentinel sets the session's never-firing watch, retrying across lost
// connections. Open calls it before the Store sets any other watch, so that
// the client holds no watch before it holds this one.
func (s *Store) armSentinel(left <-chan struct{}) error {
	return s.retry(left, func() error {
		// The watch's channel is never read: the client sends on it (it
		// has room for one event) only when the session ends, and closes
		// it. The path is absolute: not under the chroot.
		_, _, _, err := s.conn.zk.ExistsW(sentinelPath)
		return err
	})
}

// newGate returns the gate of a link being dialled: one that holds answers
// once the client holds the sentinel watch, since it then re-arms it on
// the link; nil before that, when it holds no watch at all and re-arms
// nothing. The client's watches change only as its receive loop reads
// answers, and no receive loop runs while it dials: what armed says now
// is what the client will find when it re-arms.
func (r *rearm) newGate() *gate {
	if !r.armed.Load() {
		return nil
	}
	return newGate()
}

func newGate() *gate {
	return &gate{opened: make(chan struct{}), hungUp: make(chan struct{}), owe: make(chan struct{}, 1)}
}

// resumes reports whether a, a connect response, resumes the session the
// Store was given first: the client then re-arms the watches it holds, and
// reads its latest zxid for them, whether or not the Store still counts
// the session.
func (s *Store) resumes(a ack) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return a.session != 0 && a.session == s.timedID
}

// request follows a request frame the client writes, given its head, and
// reports whether it re-arms watches.
func (r *rearm) request(head []byte) bool {
	if len(head) < 4+8 {
		return false
	}
	if xid, ok := sentinelRequest(head); ok {
		r.xid.Store(xid)
	}
	return int32(binary.BigEndian.Uint32(head[8:])) == opSetWatches
}

// replied follows an answer the client is about to read.
func (r *rearm) replied(h replyHeader) {
	if h.xid != 0 && h.xid == r.xid.Load() && h.err == errNoNode {
		r.armed.Store(true)
	}
}

// sentinelRequest reports whether head, a request frame's head, is the
// sentinel's exists request, and returns its xid.
func sentinelRequest(head []byte) (int32, bool) {
	body := head[4:]
	want := 12 + len(sentinelPath) + 1 // xid, opcode, path (length and bytes), watch flag
	if len(body) < want || int(binary.BigEndian.Uint32(head[:4])) != want {
		return 0, false
	}
	if int32(binary.BigEndian.Uint32(body[4:])) != opExists ||
		int(binary.BigEndian.Uint32(body[8:])) != len(sentinelPath) ||
		string(body[12:12+len(sentinelPath)]) != sentinelPath {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(body)), true
}

// replyHeader is the header of an answer: the xid of the request it
// answers (negative for pings, notifications and other frames the client
// sends no request for), the zxid the server had reached, and an error code.
type replyHeader struct {
	xid  int32
	zxid int64
	err  int32
}

func parseReply(body []byte) (replyHeader, bool) {
	if len(body) < 16 {
		return replyHeader{}, false
	}
	return replyHeader{
		xid:  int32(binary.BigEndian.Uint32(body)),
		zxid: int64(binary.BigEndian.Uint64(body[4:])),
		err:  int32(binary.BigEndian.Uint32(body[12:])),
	}, true
}

// gate holds back, on a reconnected link, the answers that would make the
// client write its latest zxid, until the client has written its
// SetWatches request on that link. While closed it reads the connection a
// frame at a time, peeking at each frame's header before delivering it.
//
// Until then it also hides the link's failure from the client: a write
// that fails is reported done (and nothing more is written), a read that
// fails is held back. Otherwise the client, on seeing the failure, could
// stop this link's send loop before it wrote the SetWatches request, which
// would then go out on the next link and open that link's gate before the
// client read the zxid for it. Once the link has failed, an answer the
// client awaits before its send loop starts (to the credentials it sends
// again on every connection) is supplied as a success: the link is dead,
// so nothing is ever done on it with or without them, and the next
// connection sends them again.
type gate struct {
	openOnce, hangUpOnce sync.Once
	opened               chan struct{} // closed once the SetWatches request is written
	hungUp               chan struct{} // closed when the link is closed

	owe chan struct{} // has a value when credentials became owed since the reader last looked

	mu       sync.Mutex
	failed   error   // the link's first failure, hidden until the gate opens
	authOwed []int32 // xids of credentials sent on the link and not yet answered

	// The reader's state; only the client's receive loop reads a link.
	passing bool   // the gate is open and no peeked frame is left: read straight through
	pending []byte // peeked or supplied bytes not yet delivered
	left    int    // bytes of the current frame not yet read from the connection
}

// open lets every answer through from now on, and the link's failure.
func (g *gate) open() { g.openOnce.Do(func() { close(g.opened) }) }

// hangUp ends a wait: the link is closed.
func (g *gate) hangUp() { g.hangUpOnce.Do(func() { close(g.hungUp) }) }

func (g *gate) isOpen() bool {
	select {
	case <-g.opened:
		return true
	default:
		return false
	}
}

// request follows a request the client writes while the gate is closed,
// given its head.
func (g *gate) request(head []byte) {
	if len(head) >= 4+8 && int32(binary.BigEndian.Uint32(head[8:])) == opSetAuth {
		g.mu.Lock()
		g.authOwed = append(g.authOwed, int32(binary.BigEndian.Uint32(head[4:])))
		g.mu.Unlock()
		select {
		case g.owe <- struct{}{}:
		default:
		}
	}
}

// write is the link's Write while the gate is closed: it writes p with w
// unless the link has failed, and hides a failure. It reports whether p
// went out.
func (g *gate) write(p []byte, w func([]byte) (int, error)) bool {
	if g.failure() != nil {
		return false
	}
	if _, err := w(p); err != nil {
		g.fail(err)
		return false
	}
	return true
}

func (g *gate) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed == nil {
		g.failed = err
	}
}

func (g *gate) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

// read is the link's Read while the gate has not passed its last peeked
// frame. fill reads from the connection and follows what it read (the
// link's Read without the gate).
func (g *gate) read(p []byte, fill func([]byte) (int, error)) (int, error) {
	if len(g.pending) == 0 && g.left == 0 {
		if err := g.next(fill); err != nil {
			return 0, err
		}
		if g.passing {
			return fill(p)
		}
	}
	if len(g.pending) > 0 {
		n := copy(p, g.pending)
		g.pending = g.pending[n:]
		return n, nil
	}
	n, err := fill(p[:min(len(p), g.left)])
	g.left -= n
	if err != nil {
		g.fail(err)
		return n, g.hold()
	}
	return n, nil
}

// next decides, at a frame's start, what the client reads next: straight
// through once the gate is open, else the next frame (peeked, and held
// while it carries a zxid), or, once the link has failed, a supplied
// answer to credentials or the failure when the gate opens.
func (g *gate) next(fill func([]byte) (int, error)) error {
	for {
		if g.isOpen() {
			if err := g.failure(); err != nil {
				return err
			}
			g.passing = true
			return nil
		}
		if g.failure() != nil {
			if xid, ok := g.owed(); ok {
				g.pending = authAnswer(xid)
				return nil
			}
			// The client may yet send credentials and wait for their
			// answer before it re-arms.
			select {
			case <-g.opened:
			case <-g.owe:
			case <-g.hungUp:
				return io.ErrClosedPipe
			}
			continue
		}
		head := make([]byte, 4+16) // every frame a server sends after the handshake is at least this long
		if _, err := io.ReadFull(readerFunc(fill), head); err != nil {
			g.fail(err)
			continue
		}
		size := int(binary.BigEndian.Uint32(head))
		if size < 16 {
			g.fail(fmt.Errorf("zkstore: a %d-byte frame from the server: %w", size, errNotZooKeeper))
			continue
		}
		g.pending, g.left = head, size-16
		h, _ := parseReply(head[4:])
		if g.answersAuth(h.xid) || h.xid < 0 || h.zxid <= 0 {
			return nil // the client writes no zxid for it
		}
		select {
		case <-g.opened:
			return nil
		case <-g.hungUp:
			return io.ErrClosedPipe
		}
	}
}

// owed takes the oldest credentials still unanswered.
func (g *gate) owed() (int32, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.authOwed) == 0 {
		return 0, false
	}
	xid := g.authOwed[0]
	g.authOwed = g.authOwed[1:]
	return xid, true
}

// answersAuth reports whether xid answers the oldest unanswered
// credentials, and takes them if so.
func (g *gate) answersAuth(xid int32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.authOwed) == 0 || g.authOwed[0] != xid {
		return false
	}
	g.authOwed = g.authOwed[1:]
	return true
}

// hold waits until the gate opens, then returns the link's failure; or
// until the link is closed. The reader holds a failure this way in the
// middle of a frame, which is never an answer to credentials (they come
// whole in a frame's first bytes, which next peeks at).
func (g *gate) hold() error {
	select {
	case <-g.opened:
		if err := g.failure(); err != nil {
			return err
		}
		return io.ErrClosedPipe
	case <-g.hungUp:
		return io.ErrClosedPipe
	}
}

// authAnswer is a server's answer of success to the credentials sent with
// xid: a reply header with no zxid.
func authAnswer(xid int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, 16)
	b = binary.BigEndian.AppendUint32(b, uint32(xid))
	return append(b, make([]byte, 12)...) // zxid 0, err 0
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
