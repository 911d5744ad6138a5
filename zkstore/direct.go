package zkstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/corral-go/corral/store"
	"github.com/go-zookeeper/zk"
)

// Direct requests: listings, plain deletes, creates and NodeW's reads with
// a watch (see directwatch.go), which the Store writes on the link itself and whose answers the link takes out of the
// stream before the client sees them.
//
// go-zookeeper has only blocking calls, so a request that its caller may
// give up (every call with a ctx that can end) runs on a goroutine of the
// Store (see call.go): three goroutine hand-offs more than the client's own
// request takes, each on the critical path of a lock's hand-off (the
// holder's delete, the waiter's listing after it) or of its acquisition
// (the create). Instead the Store writes the request frame on the link
// from the caller's goroutine, under an xid the client never uses, and the
// link's reader hands the answer to the caller directly, or drops it when
// the caller has left. The client sees neither: ZooKeeper answers a
// session's requests in the order it receives them, whatever their xids,
// and the link follows the frames of the stream (see tracker), so it knows
// where each answer begins and whose it is.
//
// A caller may simply stop waiting for a listing (it changes nothing) or a
// delete (one given up still happens, as through the client). A create
// needs more: CreateAndList's is protected, and what the client's path
// does when its answer is lost or its caller leaves (create, undoCreate)
// is done on a goroutine of the Store then, and only then (see
// createListDirect); CreateBatch's is neither sent again nor undone, on
// either path.
//
// The link still counts the answer as an acknowledgement and notes its zxid
// (see zxid.go), as for any other answer. A direct request is only sent
// on a link that carries the Store's session and has answered the
// session's credentials (the client re-sends them on each new connection
// before anything else); otherwise the call takes the client's path.

// ZooKeeper's opcodes of a listing with the directory's Stat, and of the
// request that adds credentials to a session (the others are in quorum.go).
const (
	opGetChildren2 int32 = 12
	opSetAuth      int32 = 100
)

// errLinkClosed fails the direct requests of a link that closed before
// their answers came: their outcome is that of a lost connection.
var errLinkClosed = fmt.Errorf("zkstore: connection closed: %w", zk.ErrConnectionClosed)

// A direct is one direct request: its xid, and what the link calls once,
// with the answer's body (its header included) or the reason none will
// come, on its reader's goroutine; answer must not block, nor keep body.
type direct struct {
	xid    int32
	answer func(body []byte, err error)
}

// ownXid returns the xid of a new direct request. The client numbers its
// requests upward from 1 and leaves the top bit clear; the Store's are far
// ahead of the client's latest: the client would have to send 2^29 requests
// while a direct request waits for its answer to reach one.
func (l *link) ownXid() int32 {
	n := l.s.ownXids.Add(1)
	return int32((uint32(l.lastXid.Load()) + 1<<30 + uint32(n)%(1<<29)) & math.MaxInt32)
}

// send writes frames, those of the direct requests out in their order, on
// l in one write, and files the requests for their answers. A request that
// cannot be sent is answered with the error at once: the link is closed,
// or the write fails before its answer came (the link is closed then:
// part of a frame may have left). The write is the client's own: it waits
// only while the connection's send buffer is full, which a server that
// stopped reading long ago can cause, and which ends the connection soon
// after (the client's read timeout).
func (l *link) send(frames []byte, out ...*direct) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.sendLocked(frames, out...)
}

// sendLocked is send with wmu held.
func (l *link) sendLocked(frames []byte, out ...*direct) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		for _, d := range out {
			d.answer(nil, errLinkClosed)
		}
		return
	}
	if l.own == nil {
		l.own = map[int32]*direct{}
	}
	for _, d := range out {
		l.own[d.xid] = d
	}
	l.mu.Unlock()
	_, err := l.writeLocked(frames)
	if err == nil {
		return
	}
	var failed []*direct
	l.mu.Lock()
	for _, d := range out {
		if l.own[d.xid] == d {
			delete(l.own, d.xid)
			failed = append(failed, d)
		}
	}
	l.mu.Unlock()
	l.Close()
	for _, d := range failed {
		d.answer(nil, err)
	}
}

// takeDirect removes and returns the direct request of xid, if there is one.
func (l *link) takeDirect(xid int32) *direct {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.own[xid]
	if d != nil {
		delete(l.own, xid)
	}
	return d
}

// failDirect ends the link's direct requests, which will have no answer,
// and has its direct watches set again (see directwatch.go).
func (l *link) failDirect() {
	l.mu.Lock()
	l.closed = true
	own, watches := l.own, l.watches
	l.own, l.watches = nil, nil
	l.mu.Unlock()
	for _, d := range own {
		d.answer(nil, errLinkClosed)
	}
	ps := make([]*pending, 0, len(watches))
	for p := range watches {
		ps = append(ps, p)
	}
	l.s.rearm(ps)
}

// directLink returns the link direct requests may go on now, or nil.
func (s *Store) directLink() *link { return s.live.Load() }

// Reply headers: xid, zxid, err.
const replyHeader = 16

// maxDirectAnswer bounds the answers a link reads whole for a direct
// request: far above what a server sends (its jute.maxbuffer, 1 MiB by
// default), far below what would exhaust memory on a corrupt length.
const maxDirectAnswer = 256 << 20

// callDirect runs a call with direct, as a direct request, when a link can
// take one now, and else with f, as call does (with no undo: neither kind
// of direct request needs one).
func callDirect[T any](s *Store, ctx context.Context, direct func(*link) (T, error), f func(*caller) (T, error)) (T, error) {
	if err := s.admit(ctx); err != nil {
		var zero T
		return zero, err
	}
	if l := s.directLink(); l != nil {
		v, err := direct(l)
		s.calls.Done()
		return settle(s, v, err)
	}
	return admitted(s, ctx, f, nil)
}

// beginFrame appends to b the head of the frame of a request of opcode op
// under xid; endFrame writes its length once its body follows.
func beginFrame(b []byte, xid, op int32) []byte {
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(xid))
	return binary.BigEndian.AppendUint32(b, uint32(op))
}

// endFrame writes the length of the frame that begins at b[start:].
func endFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// frameHead is the size of a request frame's head: length, xid, opcode.
const frameHead = 12

// appendString appends v as ZooKeeper's strings go: its length, then its
// bytes.
func appendString(b []byte, v string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// appendBytes appends v as ZooKeeper's buffers go, a nil v as length -1
// (no data), as the client sends it.
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(b, math.MaxUint32)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// A result is what a direct request gives, as its caller receives it.
type result[T any] struct {
	v   T
	err error
}

// prepare returns a direct request under a new xid of l, and the channel
// its result comes on, once: answered turns the answer into the result on
// the link's reader (it must not block), whether or not anyone is still
// there for it. The result reaches the caller through the channel only: a
// caller that left shares nothing with the reader that answers later.
func prepare[T any](l *link, answered func(body []byte) (T, error)) (*direct, <-chan result[T]) {
	done := make(chan result[T], 1)
	return &direct{xid: l.ownXid(), answer: func(body []byte, err error) {
		var r result[T]
		if r.err = err; err == nil {
			r.v, r.err = answered(body)
		}
		done <- r
	}}, done
}

// wait waits for the result of a direct request, or for ctx to end: the
// answer, when it comes, then goes to a channel nobody reads.
func wait[T any](ctx context.Context, answer <-chan result[T]) (T, error) {
	select {
	case r := <-answer:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// listing is a listing's names and the directory's Stat.
type listing struct {
	names []string
	st    *zk.Stat
}

// askList sends the listing of path, as list makes it, as a direct
// request on l, and returns the channel of its result.
func (s *Store) askList(l *link, path string) <-chan result[listing] {
	o, listed := prepare(l, decodeListing)
	l.send(s.appendList(nil, o.xid, path), o)
	return listed
}

func decodeListing(body []byte) (listing, error) {
	names, st, err := decodeChildren2(body)
	return listing{names, st}, err
}

// appendList appends to b the frame of a listing of path under xid.
func (s *Store) appendList(b []byte, xid int32, path string) []byte {
	abs := s.conn.abs(path)
	b = slices.Grow(b, frameHead+4+len(abs)+1)
	start := len(b)
	b = appendString(beginFrame(b, xid, opGetChildren2), abs)
	return endFrame(append(b, 0), start) // no watch
}

// askCreate sends the create of path, with data and flags and the Store's
// ACL, as a direct request on l, and returns the channel of its result:
// the path made (see created).
func (s *Store) askCreate(l *link, path string, data []byte, flags int32) <-chan result[string] {
	o, made := prepare(l, s.created)
	l.send(s.appendCreate(nil, o.xid, path, data, flags), o)
	return made
}

// created is the path a create's answer says was made, as the Store names
// it.
func (s *Store) created(body []byte) (string, error) {
	made, err := decodeCreated(body)
	if err != nil {
		return "", err
	}
	return s.conn.rel(made), nil
}

// askCreateMany sends the creates of paths, with data and flags and the
// Store's ACL, in one multi request, as a direct request on l, and returns
// the channel of its result: the paths made, as the Store names them. A
// multi request is all or none: its error is that of the create that
// failed.
func (s *Store) askCreateMany(l *link, paths []string, data [][]byte, flags int32) <-chan result[[]string] {
	o, made := prepare(l, func(body []byte) ([]string, error) {
		made, err := decodeMulti(body)
		for i := range made {
			made[i] = s.conn.rel(made[i])
		}
		return made, err
	})
	n := frameHead + multiHeader
	for i, p := range paths {
		n += multiHeader + s.createSize(p, data[i])
	}
	b := make([]byte, 0, n)
	b = beginFrame(b, o.xid, opMulti)
	for i, p := range paths {
		b = appendMultiHeader(b, opCreate, false)
		b = s.appendCreateBody(b, p, data[i], flags)
	}
	l.send(endFrame(appendMultiHeader(b, -1, true), 0), o)
	return made
}

// createSize is the size of the body of a create of path with data.
func (s *Store) createSize(path string, data []byte) int {
	n := 4 + len(s.conn.abs(path)) + 4 + len(data) + 4 + 4
	for _, a := range s.acl {
		n += 4 + 4 + len(a.Scheme) + 4 + len(a.ID)
	}
	return n
}

// appendCreate appends to b the frame of a create of path under xid, with
// data, flags and the Store's ACL.
func (s *Store) appendCreate(b []byte, xid int32, path string, data []byte, flags int32) []byte {
	b = slices.Grow(b, frameHead+s.createSize(path, data))
	start := len(b)
	return endFrame(s.appendCreateBody(beginFrame(b, xid, opCreate), path, data, flags), start)
}

// appendCreateBody appends the body of a create of path, with data, flags
// and the Store's ACL.
func (s *Store) appendCreateBody(b []byte, path string, data []byte, flags int32) []byte {
	b = appendString(b, s.conn.abs(path))
	b = appendBytes(b, data)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.acl)))
	for _, a := range s.acl {
		b = binary.BigEndian.AppendUint32(b, uint32(a.Perms))
		b = appendString(b, a.Scheme)
		b = appendString(b, a.ID)
	}
	return binary.BigEndian.AppendUint32(b, uint32(flags))
}

// multiHeader is the size of the header of each operation of a multi
// request, and of each result in its answer: type, done, err.
const multiHeader = 4 + 1 + 4

// appendMultiHeader appends the header of an operation of a multi request,
// or, done, of its end.
func appendMultiHeader(b []byte, op int32, done bool) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	if done {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return binary.BigEndian.AppendUint32(b, math.MaxUint32) // err: -1
}

// decodeCreated parses a create's answer: the header, then the path made.
func decodeCreated(b []byte) (string, error) {
	if err := answerErr(b); err != nil {
		return "", err
	}
	made, _, err := readString(b[replyHeader:])
	return made, err
}

// readString reads a string as ZooKeeper writes one (its length, then its
// bytes) from the head of b, and returns it with the rest of b.
func readString(b []byte) (string, []byte, error) {
	v, rest, err := readBytes(b)
	return string(v), rest, err
}

// readBytes reads a length-prefixed run of bytes at the head of b, and
// returns it and the rest of b.
func readBytes(b []byte) ([]byte, []byte, error) {
	if len(b) < 4 {
		return nil, nil, errMalformed
	}
	k := int32(binary.BigEndian.Uint32(b))
	if k < 0 || int(k) > len(b)-4 {
		return nil, nil, errMalformed
	}
	return b[4 : 4+k], b[4+k:], nil
}

// deleteDirect deletes path, of any version, as deleteNode does when it
// does not reclaim the directory at once, as a direct request on l: it
// tells the Store's reclaimer (see reclaim.go) that dir was emptied, which
// must not block.
func (s *Store) deleteDirect(ctx context.Context, l *link, path string) error {
	o, deleted := prepare(l, func(body []byte) (struct{}, error) {
		if err := answerErr(body); err != nil {
			return struct{}{}, err
		}
		if dir := store.Parent(path); dir != "/" {
			s.later.Emptied(dir)
		}
		return struct{}{}, nil
	})
	abs := s.conn.abs(path)
	b := appendString(beginFrame(make([]byte, 0, frameHead+4+len(abs)+4), o.xid, opDelete), abs)
	b = binary.BigEndian.AppendUint32(b, math.MaxUint32) // version -1: any
	l.send(endFrame(b, 0), o)
	_, err := wait(ctx, deleted)
	return err
}

// decodeMulti parses a multi request's answer: the header, then each
// operation's result (a create's path made, or an error) up to the end's
// header. Its error is that of the operation that failed the request: the
// first whose error is not a runtime inconsistency, the error the server
// gives the others.
func decodeMulti(b []byte) ([]string, error) {
	if err := answerErr(b); err != nil {
		return nil, err
	}
	b = b[replyHeader:]
	var (
		made []string
		code int32
	)
	for {
		if len(b) < multiHeader {
			return nil, errMalformed
		}
		op, done := int32(binary.BigEndian.Uint32(b)), b[4] != 0
		b = b[multiHeader:]
		if done {
			break
		}
		switch op {
		case opCreate:
			p, rest, err := readString(b)
			if err != nil {
				return nil, err
			}
			made, b = append(made, p), rest
		case -1: // an error
			if len(b) < 4 {
				return nil, errMalformed
			}
			if c := int32(binary.BigEndian.Uint32(b)); code == 0 || code == errRuntimeInconsistency {
				code = c
			}
			b = b[4:]
		default:
			return nil, errMalformed
		}
	}
	if code != 0 {
		return nil, codeErr(code)
	}
	return made, nil
}

// errRuntimeInconsistency is the error of the operations of a failed multi
// request that did not fail it.
const errRuntimeInconsistency = -2

// answerErr is the error an answer's header carries.
func answerErr(b []byte) error {
	if len(b) < replyHeader {
		return errMalformed
	}
	if code := int32(binary.BigEndian.Uint32(b[12:])); code != 0 {
		return codeErr(code)
	}
	return nil
}

// errMalformed is a direct answer that does not parse.
var errMalformed = errors.New("zkstore: malformed answer from the server")

// decodeChildren2 parses a getChildren2 answer: the header, then the
// children's names and the directory's Stat. The names are cut from one
// string, one allocation for them all: a listing is read at every check of
// a recipe's directory.
func decodeChildren2(b []byte) ([]string, *zk.Stat, error) {
	if err := answerErr(b); err != nil {
		return nil, nil, err
	}
	b = b[replyHeader:]
	if len(b) < 4 {
		return nil, nil, errMalformed
	}
	n := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if n < 0 || int(n) > len(b)/4 {
		return nil, nil, errMalformed
	}
	rest := b // past the names, each a length and its bytes
	for range n {
		var err error
		if _, rest, err = readBytes(rest); err != nil {
			return nil, nil, err
		}
	}
	st, err := decodeStat(rest)
	if err != nil {
		return nil, nil, err
	}
	all, names := string(b[:len(b)-len(rest)]), make([]string, n)
	for i, off := 0, 0; i < len(names); i++ {
		k := int(binary.BigEndian.Uint32(b[off:]))
		names[i] = all[off+4 : off+4+k]
		off += 4 + k
	}
	return names, st, nil
}

// decodeStat parses a node's Stat at the head of b.
func decodeStat(b []byte) (*zk.Stat, error) {
	const statLen = 8*4 + 4*3 + 8 + 4*2 + 8
	if len(b) < statLen {
		return nil, errMalformed
	}
	u64 := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[i:])) }
	u32 := func(i int) int32 { return int32(binary.BigEndian.Uint32(b[i:])) }
	return &zk.Stat{
		Czxid: u64(0), Mzxid: u64(8), Ctime: u64(16), Mtime: u64(24),
		Version: u32(32), Cversion: u32(36), Aversion: u32(40),
		EphemeralOwner: u64(44), DataLength: u32(52), NumChildren: u32(56), Pzxid: u64(60),
	}, nil
}

// codeErrs are the client's errors of ZooKeeper's error codes, as the
// client maps them (fail maps them onto the store's sentinels).
var codeErrs = map[int32]error{
	-8:   zk.ErrBadArguments,
	-100: zk.ErrAPIError,
	-101: zk.ErrNoNode,
	-102: zk.ErrNoAuth,
	-103: zk.ErrBadVersion,
	-108: zk.ErrNoChildrenForEphemerals,
	-110: zk.ErrNodeExists,
	-111: zk.ErrNotEmpty,
	-112: zk.ErrSessionExpired,
	-114: zk.ErrInvalidACL,
	-115: zk.ErrAuthFailed,
	-116: zk.ErrClosing,
	-117: zk.ErrNothing,
	-118: zk.ErrSessionMoved,
	-123: zk.ErrReconfigDisabled,
}

func codeErr(code int32) error {
	err, ok := codeErrs[code]
	if !ok {
		err = fmt.Errorf("zkstore: the server answered with error code %d", code)
	}
	return &answeredErr{err}
}

// An answeredErr is an error a server answered a direct request with: the
// request's outcome is known (it failed), unlike that of a request whose
// answer was lost.
type answeredErr struct{ err error }

func (e *answeredErr) Error() string { return e.err.Error() }
func (e *answeredErr) Unwrap() error { return e.err }
