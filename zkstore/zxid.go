package zkstore

import (
	"encoding/binary"
	"sync"
)

// The zxid the client has seen: a guard against a data race in
// go-zookeeper v1.0.4.
//
// A ZooKeeper client remembers the latest zxid in its answers for two
// requests: the connect request (lastZxidSeen: a server that has seen less
// refuses the connection, so that the client never reads an older state
// than it has read) and, after a reconnection, the SetWatches request that
// re-arms its watches (relativeZxid: the server fires at once each watch
// whose node changed after it, since the client may have lost that
// notification with its connection). go-zookeeper keeps it in
// Conn.lastZxid, which its receive loop writes for every answer while,
// after a reconnection, its connection goroutine reads it to build the
// SetWatches request: nothing orders the two (upstream: go-zookeeper/zk
// pull request 35, samuel/go-zookeeper issue 260; v1.0.4 is the newest
// release), and `go test -race` reports the race in every program whose
// watches outlive a reconnection (TestReconnectRearmsWatchesRaceFree
// provokes it).
//
// The Store's links carry every byte between the two, so the Store keeps
// that zxid in the client's stead (zxids) and the client's copy is never
// written:
//
//   - A link zeroes the zxid in the header of each answer as it reads it
//     (the client writes Conn.lastZxid only from a positive one), after
//     noting it as seen. Nothing else in the client reads that field.
//   - A link writes the seen zxid into each connect request, and into each
//     SetWatches request the re-arm floor: the zxid seen when the first
//     reconnection whose watches the server has not yet confirmed began.
//     The client builds a SetWatches request for one connection and may
//     send it on a later one (when the first fails before the request
//     leaves), so the floor stays at the oldest such reconnection until an
//     answer to a SetWatches request comes. A lower zxid than the client's
//     own only fires a watch the server could have kept (the Store's
//     callers check again on any event); a higher one could lose an event,
//     and the floor is never higher than what the client would have sent
//     but in one corner: a SetWatches request built for connection N, still
//     unsent when another one is answered on N+1, and sent on N+2 with
//     N+2's floor (three connections lost within the moment it takes the
//     client to queue the request).
//
// Remove this file's mechanism once go-zookeeper orders the two itself.
type zxids struct {
	mu    sync.Mutex
	seen  int64 // of the latest answer the client has read on this session
	floor int64 // what SetWatches requests carry
	open  bool  // a reconnection's watches await the server's confirmation
}

// opSetWatches is the opcode of the request that re-arms watches.
const opSetWatches int32 = 101

// answered notes an answer's zxid, as the client would.
func (z *zxids) answered(zxid int64) {
	if zxid <= 0 {
		return
	}
	z.mu.Lock()
	z.seen = zxid
	z.mu.Unlock()
}

// lastSeen is what a connect request carries.
func (z *zxids) lastSeen() int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.seen
}

// connected follows a connect response: session is what it granted (0:
// the session expired, and the client forgets the zxids it saw, as it
// forgets its watches), resumed whether it is the session the request
// asked for, and asked the zxid the request carried.
func (z *zxids) connected(session int64, resumed bool, asked int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	switch {
	case session == 0:
		z.seen, z.open = 0, false
	case resumed && !z.open:
		z.floor, z.open = asked, true
	}
}

// rearming is what a SetWatches request carries.
func (z *zxids) rearming() int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.floor
}

// rearmed follows the answer to a SetWatches request: the server holds
// the client's watches again.
func (z *zxids) rearmed() {
	z.mu.Lock()
	z.open = false
	z.mu.Unlock()
}

// putField writes v, big-endian, into the part of an 8-byte field at body
// offset at that b holds, b starting at body offset off.
func putField(b []byte, off, at int, v int64) {
	for i := range b {
		if k := off + i - at; k >= 0 && k < 8 {
			b[i] = byte(uint64(v) >> (8 * (7 - k)))
		}
	}
}

// editUp writes the Store's zxids into the client's requests: the
// lastZxidSeen of a connect request (body offset 4) and the relativeZxid
// of a SetWatches request (body offset 8, after its xid and opcode).
func (t *tracker) editUp(index int, head []byte, off int, b []byte) {
	body := head[4:]
	switch {
	case index == 0:
		if off == 0 {
			t.asked = t.z.lastSeen()
		}
		putField(b, off, 4, t.asked)
	case len(body) > 8 && int32(binary.BigEndian.Uint32(body[4:])) == opSetWatches:
		if off <= 8 {
			t.rel = t.z.rearming()
		}
		putField(b, off, 8, t.rel)
	}
}

// editDown zeroes the zxid (body offset 4, after the xid) of each answer
// from which the client would take it: any frame but the connect response,
// notifications and pings.
func (t *tracker) editDown(index int, head []byte, off int, b []byte) {
	body := head[4:]
	if index == 0 || len(body) <= 4 || int32(binary.BigEndian.Uint32(body)) < 0 {
		return
	}
	putField(b, off, 4, 0)
}
