package zkstore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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

	mu          sync.Mutex
	t           tracker
	handshook   bool      // the connect response has been read
	session     bool      // and it accepted the Store's session
	handshakeBy time.Time // read deadline of the handshake
}

func (l *link) Write(p []byte) (int, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	// The caller's p must not change: the tracker edits a copy.
	l.out = append(l.out[:0], p...)
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
// them. A longer read than this goes straight to the connection.
const readBuf = 16 << 10

// Read serves the client from the link's buffer, refilled by one read from
// the connection when empty, and follows what it hands over: the client
// has read what the tracker has (see zxid.go).
func (l *link) Read(p []byte) (int, error) {
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
			if l.s.tls == nil && errors.Is(err, io.EOF) {
				hint = " (the server hung up: is it a TLS port?)"
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

// acked passes an acknowledgement on to the Store. l.mu is held.
func (l *link) acked(a ack) {
	if a.connect {
		l.handshook = true
		l.session = l.s.connectAcked(a)
		return
	}
	if l.session {
		l.s.heard(a)
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
	return l.Conn.Close()
}
