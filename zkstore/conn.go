package zkstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// link is one connection of the client to a server, as the Store's dialer
// hands it out. It follows the ZooKeeper framing both ways (see tracker) to
// tell the Store when the server last acknowledged hearing from it, and
// bounds the handshake. Closing the Store closes its links, which unblocks
// the client wherever it waits on one.
type link struct {
	net.Conn
	s *Store

	wmu sync.Mutex // serialises writes, so frames are timed in the order they are sent
	out []byte     // what Write sends: p, with the Store's zxids in it (guarded by wmu)

	// The read buffer: the client reads on one goroutine at a time.
	rbuf       []byte
	rpos, rend int   // rbuf[rpos:rend] is read and not yet handed over
	rerr       error // the read's error, once what came with it is handed over

	// left is what the client is still to read of the frame it reads now,
	// once the session is up (0: the next byte begins a frame, whose head
	// the link reads first, to tell a direct answer; see direct.go).
	left int
	// lastXid is the xid of the client's latest request: direct requests
	// take theirs far from it (see ownXid).
	lastXid atomic.Int32

	mu          sync.Mutex
	t           tracker
	handshook   bool      // the connect response has been read
	session     bool      // and it accepted the Store's session
	auths       int       // the session's credentials the server has answered on this link
	handshakeBy time.Time // read deadline of the handshake
	own         map[int32]*direct
	watches     map[*pending]struct{} // the direct watches set on this link that have not fired
	closed      bool                  // no direct request may go on this link any more

	rec recState // its recursive watches, and what guards them (see recursive.go)
}

// Write writes frames of the client.
func (l *link) Write(p []byte) (int, error) {
	if len(p) >= 8 {
		// One frame per write (the client's, after the connect request,
		// are requests: their length, then their xid).
		if xid := int32(binary.BigEndian.Uint32(p[4:])); xid > 0 {
			l.lastXid.Store(xid)
		}
	}
	return l.write(p)
}

// write writes p, frames of the client's or direct requests.
func (l *link) write(p []byte) (int, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.writeLocked(p)
}

// writeLocked is write with wmu held.
func (l *link) writeLocked(p []byte) (int, error) {
	// The caller's p must not change: the tracker and the guard of
	// recursive watches (see recursive.go) edit a copy.
	l.out = append(l.out[:0], p...)
	l.mu.Lock()
	connect := l.t.up.index == 0 && l.t.up.pos == 0
	l.mu.Unlock()
	l.guardWrite(l.out, connect)
	l.mu.Lock()
	l.t.wrote(l.out, time.Now())
	l.mu.Unlock()
	n, err := l.Conn.Write(l.out)
	if cap(l.out) > 64<<10 {
		l.out = nil // a large value's copy is not kept for the link's life
	}
	if err == nil {
		l.s.wires.wrote(p)
	}
	return n, err
}

// readBuf is the size of a link's read buffer. The client reads each
// frame in two calls, its length and then its body; through the buffer one
// read from the connection serves both, and every frame that arrived with
// them. A longer read than this goes straight to the connection. An answer
// to a direct request up to this size is gathered in the buffer (see
// take): 64 kB holds a listing of about a thousand contenders' names.
const readBuf = 64 << 10

// Read serves the client from the link's buffer, refilled by one read from
// the connection when empty, and follows what it hands over: the client
// has read what the tracker has (see zxid.go). Once the session is up it
// serves one frame at a time and takes the answers to direct requests out
// of the stream (see route).
func (l *link) Read(p []byte) (int, error) {
	if l.left == 0 && l.routing() {
		if err := l.route(); err != nil {
			return 0, err
		}
	}
	if l.left > 0 && len(p) > l.left {
		p = p[:l.left]
	}
	n, err := l.read(p)
	if l.left > 0 {
		l.left -= n
	}
	return n, err
}

// routing reports whether the link reads frame by frame: the session is
// up, and the client has read whole frames so far.
func (l *link) routing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.session && l.t.down.pos == 0
}

// route reads the head of each frame that comes next: it takes the answers
// to direct requests out of the stream, and stops at the first frame of
// the client's, which it leaves for the client to read (left).
func (l *link) route() error {
	for {
		if err := l.buffer(8); err != nil {
			return err
		}
		size := int(binary.BigEndian.Uint32(l.rbuf[l.rpos:]))
		xid := int32(binary.BigEndian.Uint32(l.rbuf[l.rpos+4:]))
		var d *direct
		if xid > 0 {
			d = l.takeDirect(xid)
		}
		if d == nil {
			if xid == -1 {
				l.notification(size)
			}
			l.left = 4 + size
			return nil
		}
		if size > maxDirectAnswer {
			err := fmt.Errorf("%w: an answer of %d bytes", errNotZooKeeper, size)
			l.Conn.Close()
			d.answer(nil, err)
			return err
		}
		frame, err := l.take(4 + size)
		if err != nil {
			d.answer(nil, err)
			return err
		}
		if _, err := l.deliver(frame, nil); err != nil {
			d.answer(nil, err)
			return err
		}
		d.answer(frame[4:], nil)
	}
}

// buffer reads until the buffer holds n bytes not yet handed over.
func (l *link) buffer(n int) error {
	if l.rbuf == nil {
		l.rbuf = make([]byte, readBuf)
	}
	if l.rpos+n > len(l.rbuf) {
		l.rend = copy(l.rbuf, l.rbuf[l.rpos:l.rend])
		l.rpos = 0
	}
	for l.rend-l.rpos < n {
		if l.rerr != nil {
			err := l.rerr
			l.rerr = nil
			return err
		}
		k, err := l.fill(l.rbuf[l.rend:])
		l.rend += k
		if err != nil && l.rend-l.rpos < n {
			return err
		}
		l.rerr = err
	}
	return nil
}

// take returns the next n bytes of the stream, from the buffer and then
// the connection; the result is valid until the next read. Bytes that fit
// the buffer are gathered there: an answer that arrives in pieces then
// costs a move within the buffer, not a slice of its own (at N=128 a lock's
// listings are two answers of about 8 kB per acquisition, each taken in
// pieces more often than not).
func (l *link) take(n int) ([]byte, error) {
	if n <= readBuf {
		if err := l.buffer(n); err != nil {
			return nil, err
		}
		b := l.rbuf[l.rpos : l.rpos+n]
		l.rpos += n
		return b, nil
	}
	b := make([]byte, n)
	k := copy(b, l.rbuf[l.rpos:l.rend])
	l.rpos, l.rend = 0, 0
	if l.rerr != nil {
		err := l.rerr
		l.rerr = nil
		return nil, err
	}
	for k < n {
		m, err := l.fill(b[k:])
		k += m
		if err != nil && k < n {
			return nil, err
		}
	}
	return b, nil
}

// read serves p from the buffer, refilled when empty.
func (l *link) read(p []byte) (int, error) {
	if l.rpos == l.rend {
		if l.rerr != nil {
			err := l.rerr
			l.rerr = nil
			return 0, err
		}
		if len(p) >= readBuf {
			n, err := l.fill(p)
			return l.deliver(p[:n], err)
		}
		if l.rbuf == nil {
			l.rbuf = make([]byte, readBuf)
		}
		n, err := l.fill(l.rbuf)
		l.rpos, l.rend = 0, n
		if n == 0 {
			return 0, err
		}
		l.rerr = err // after what came with it
	}
	n := copy(p, l.rbuf[l.rpos:l.rend])
	l.rpos += n
	return l.deliver(p[:n], nil)
}

// fill reads from the connection into p.
func (l *link) fill(p []byte) (int, error) {
	n, err := l.Conn.Read(p)
	if err != nil {
		l.mu.Lock()
		handshook := l.handshook
		l.mu.Unlock()
		if !handshook {
			// Why the server would not talk: a refused client
			// certificate arrives here under TLS 1.3.
			hint := ""
			if l.s.tls == nil && errors.Is(err, io.EOF) && l.s.id.Load() == 0 {
				hint = l.s.hungUp(l.RemoteAddr().String(), l.handshakeBy)
			}
			l.s.noteConnErr(fmt.Errorf("zkstore: session handshake with %s: %w%s", l.RemoteAddr(), err, hint))
		}
	}
	return n, err
}

// deliver follows p, about to be handed to the client with err.
func (l *link) deliver(p []byte, err error) (int, error) {
	if len(p) > 0 {
		l.mu.Lock()
		perr := l.t.read(p, l.acked)
		l.mu.Unlock()
		if perr != nil {
			l.Conn.Close()
			l.s.noteConnErr(fmt.Errorf("%s: %w", l.RemoteAddr(), perr))
			l.rpos, l.rend, l.rerr = 0, 0, perr
			return 0, perr
		}
	}
	return len(p), err
}

// acked passes an acknowledgement on to the Store, and makes the link the
// one for direct requests once it has answered the session's credentials.
// l.mu is held.
func (l *link) acked(a ack) {
	if a.connect {
		l.handshook = true
		l.session = l.s.connectAcked(a)
		l.offerLocked()
		return
	}
	if !a.connect && a.xid > 0 {
		l.replied(a.xid, a.code)
	}
	if l.session {
		l.s.heard(a)
		if a.op == opSetAuth {
			l.auths++
			l.offerLocked()
		}
	}
}

// offerLocked makes l the link for direct requests once it may be. l.mu is
// held.
func (l *link) offerLocked() {
	if l.session && !l.closed && l.auths >= l.s.nauth {
		l.s.live.Store(l)
	}
}

// SetReadDeadline bounds the handshake: until the connect response has
// been read, no read waits past handshakeBy (the client itself allows ten
// times two thirds of the session timeout, and none at all once the
// response has begun to arrive).
func (l *link) SetReadDeadline(t time.Time) error {
	l.mu.Lock()
	if !l.handshook && (t.IsZero() || t.After(l.handshakeBy)) {
		t = l.handshakeBy
	}
	l.mu.Unlock()
	return l.Conn.SetReadDeadline(t)
}

func (l *link) SetDeadline(t time.Time) error {
	if err := l.SetReadDeadline(t); err != nil {
		return err
	}
	return l.Conn.SetWriteDeadline(t)
}

func (l *link) Close() error {
	l.s.dropLink(l)
	l.s.live.CompareAndSwap(l, nil)
	l.failDirect()
	l.closeRecursive()
	return l.Conn.Close()
}

// probeTimeout bounds hungUp's question to a server.
const probeTimeout = time.Second

// hungUp says why the server at addr hung up on a session handshake over a
// plain connection, before the session was established, for the error of
// Open. It asks the server with the four-letter command srvr, which every
// ZooKeeper server answers whatever its 4lw.commands.whitelist: one that
// has lost its quorum (or not formed one yet) is "not currently serving
// requests" and closes every session handshake; a read-only one
// (readonlymode.enabled) refuses read-write sessions. A port that answers
// neither the handshake nor srvr is, most likely, a TLS port. The question
// is done by the time by at the latest, and within probeTimeout.
func (s *Store) hungUp(addr string, by time.Time) string {
	ctx, cancel := context.WithDeadline(s.ctx, minTime(by, time.Now().Add(probeTimeout)))
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return " (the server hung up, and then refused a connection)"
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	var answer []byte
	if _, err := c.Write([]byte("srvr")); err == nil {
		// The end of the question: a TLS server, which waits for a whole
		// record header (5 bytes), hangs up at once.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		answer, _ = io.ReadAll(io.LimitReader(c, 4<<10))
	}
	switch a := string(answer); {
	case strings.Contains(a, "not currently serving requests"):
		return " (the server is not serving requests: it has no quorum, or is still starting; try another server of the ensemble)"
	case strings.Contains(a, "Mode: read-only"):
		return " (the server is read-only: it has lost its quorum, and refuses the read-write session zkstore asks for)"
	case len(a) > 0:
		return " (the server hung up on the session handshake although it serves: see its log)"
	}
	return " (the server hung up, and does not answer ZooKeeper's srvr either: is it a TLS port?)"
}
