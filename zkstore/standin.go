package zkstore

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"
)

// ZooKeeper opcodes and error codes the stand-in uses.
const (
	opPing            = 11
	opClose           = -11
	errCodeExpired    = -112
	standInSessionID  = 1 // for a client that has no session to ask for
	standInPasswdSize = 16
)

// standIn is the connection the dialer hands the client once the session
// has ended, in place of a server. It completes the handshake and answers
// every request at once, with ZooKeeper's "session expired" error (a ping
// or a close request with success), and ends the stream after answering a
// close request.
//
// It exists to let the client shut down promptly. The client's Close
// queues a close request and waits up to a second for its answer; only a
// live connection's send loop takes requests from that queue, so with no
// connection the request is never answered and Close waits out the second.
// A connection that answers at once avoids that, without a server.
type standIn struct {
	ready chan struct{} // holds a token while out may have data or eof is set
	done  chan struct{} // closed by Close

	mu     sync.Mutex
	up     framer
	out    []byte
	eof    bool
	closed bool
}

func newStandIn() *standIn {
	return &standIn{ready: make(chan struct{}, 1), done: make(chan struct{})}
}

func (c *standIn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	c.up.feed(p, nil, nil, c.answer)
	select {
	case c.ready <- struct{}{}:
	default:
	}
	return len(p), nil
}

// answer queues the answer to one frame of the client. c.mu is held.
func (c *standIn) answer(index int, head []byte) {
	body := head[4:]
	if index == 0 {
		// Connect request: protocolVersion, lastZxidSeen, timeOut,
		// sessionId, passwd. Grant what it asks.
		timeout, id := uint32(30000), uint64(standInSessionID)
		if len(body) >= 24 {
			timeout = binary.BigEndian.Uint32(body[12:])
			if asked := binary.BigEndian.Uint64(body[16:]); asked != 0 {
				id = asked
			}
		}
		c.out = binary.BigEndian.AppendUint32(c.out, 4+4+8+4+standInPasswdSize)
		c.out = binary.BigEndian.AppendUint32(c.out, 0) // protocolVersion
		c.out = binary.BigEndian.AppendUint32(c.out, timeout)
		c.out = binary.BigEndian.AppendUint64(c.out, id)
		c.out = binary.BigEndian.AppendUint32(c.out, standInPasswdSize)
		c.out = append(c.out, make([]byte, standInPasswdSize)...)
		return
	}
	if len(body) < 8 {
		return
	}
	xid := binary.BigEndian.Uint32(body)
	op := int32(binary.BigEndian.Uint32(body[4:]))
	code := int32(errCodeExpired)
	if op == opPing || op == opClose {
		code = 0
	}
	c.out = binary.BigEndian.AppendUint32(c.out, 4+8+4)
	c.out = binary.BigEndian.AppendUint32(c.out, xid)
	c.out = binary.BigEndian.AppendUint64(c.out, 0) // zxid
	c.out = binary.BigEndian.AppendUint32(c.out, uint32(code))
	if op == opClose {
		c.eof = true
	}
}

func (c *standIn) Read(p []byte) (int, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, net.ErrClosed
		}
		if len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[n:]
			if len(c.out) > 0 || c.eof {
				select {
				case c.ready <- struct{}{}:
				default:
				}
			}
			c.mu.Unlock()
			return n, nil
		}
		if c.eof {
			c.mu.Unlock()
			return 0, io.EOF
		}
		c.mu.Unlock()
		select {
		case <-c.ready:
		case <-c.done:
		}
	}
}

func (c *standIn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	return nil
}

func (c *standIn) LocalAddr() net.Addr              { return standInAddr{} }
func (c *standIn) RemoteAddr() net.Addr             { return standInAddr{} }
func (c *standIn) SetDeadline(time.Time) error      { return nil }
func (c *standIn) SetReadDeadline(time.Time) error  { return nil }
func (c *standIn) SetWriteDeadline(time.Time) error { return nil }
func (standInAddr) Network() string                 { return "zkstore" }
func (standInAddr) String() string                  { return "session-ended" }

type standInAddr struct{}
