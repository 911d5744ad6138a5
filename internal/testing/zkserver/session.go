package zkserver

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"
)

// Opcodes of ZooKeeper requests that create, delete or read a node.
const (
	OpCreate          = 1
	OpDelete          = 2
	OpGetData         = 4
	OpCreate2         = 15
	OpCreateContainer = 19
	OpCreateTTL       = 21
	opMulti           = 14
	opClose           = -11
)

// RequestHeader returns the xid and opcode of a client request, framing
// (the 4-byte length) included. The first message of a connection is the
// connect request, which has no header: do not pass it.
func RequestHeader(msg []byte) (xid, opcode int32, ok bool) {
	if len(msg) < 12 {
		return 0, 0, false
	}
	return int32(binary.BigEndian.Uint32(msg[4:])), int32(binary.BigEndian.Uint32(msg[8:])), true
}

// IsCreate reports whether a client request (framing included, not the
// connect request) creates a node: a create, or a multi that begins with
// one (a batch of creates; not a guarded create, which begins with a
// check).
func IsCreate(msg []byte) bool {
	_, op, ok := RequestHeader(msg)
	if ok && op == opMulti && len(msg) >= 16 {
		// The first operation's header (type, done, err) follows.
		op = int32(binary.BigEndian.Uint32(msg[12:]))
	}
	return ok && (op == OpCreate || op == OpCreate2 || op == OpCreateContainer || op == OpCreateTTL)
}

// ParseConnectResponse parses the server's answer to a connect request, the
// first message a server sends on a connection (framing included), and
// returns the session's id and password. A session id of 0 means the server
// refused the session as expired.
func ParseConnectResponse(msg []byte) (id int64, passwd []byte, ok bool) {
	// length, protocolVersion, timeOut, sessionId, passwd length.
	if len(msg) < 4+4+4+8+4 {
		return 0, nil, false
	}
	id = int64(binary.BigEndian.Uint64(msg[12:]))
	n := int(int32(binary.BigEndian.Uint32(msg[20:])))
	if n < 0 || len(msg) < 24+n {
		return 0, nil, false
	}
	return id, append([]byte(nil), msg[24:24+n]...), true
}

// CloseSession expires the session id on the server (or ensemble) at addr:
// it takes the session over with its password on a connection of its own,
// which makes the server drop the client's connection, and closes it. The
// session's ephemeral nodes are gone when it returns; the client learns it
// when it reconnects. A session that has already ended is not an error.
func CloseSession(addr string, id int64, passwd []byte, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))

	req := binary.BigEndian.AppendUint32(nil, uint32(4+8+4+8+4+len(passwd)))
	req = binary.BigEndian.AppendUint32(req, 0)          // protocolVersion
	req = binary.BigEndian.AppendUint64(req, 0)          // lastZxidSeen
	req = binary.BigEndian.AppendUint32(req, 30000)      // timeOut
	req = binary.BigEndian.AppendUint64(req, uint64(id)) // sessionId
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	if _, err := c.Write(req); err != nil {
		return err
	}
	resp, err := readMsg(c)
	if err != nil {
		return fmt.Errorf("zkserver: close session %#x: %w", id, err)
	}
	got, _, ok := ParseConnectResponse(resp)
	if !ok {
		return fmt.Errorf("zkserver: close session %#x: bad connect response", id)
	}
	if got == 0 {
		return nil // already expired
	}
	closeReq := binary.BigEndian.AppendUint32(nil, 8)
	closeReq = binary.BigEndian.AppendUint32(closeReq, 1)
	op := int32(opClose)
	closeReq = binary.BigEndian.AppendUint32(closeReq, uint32(op))
	if _, err := c.Write(closeReq); err != nil {
		return err
	}
	if _, err := readMsg(c); err != nil && err != io.EOF {
		return fmt.Errorf("zkserver: close session %#x: %w", id, err)
	}
	return nil
}

func readMsg(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("message of %d bytes", n)
	}
	msg := make([]byte, 4+n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}
