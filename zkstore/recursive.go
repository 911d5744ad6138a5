package zkstore

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"
)

// Persistent recursive watches (ZooKeeper 3.6+), the one watch of a
// follow of a tree (tree.go), and the guard they need on the servers
// before ZOOKEEPER-4466 (3.6.0 to 3.8.x at least; Debian's 3.8.0 here).
//
// A persistent recursive watch is set with addWatch, which go-zookeeper
// v1.0.4 cannot send: the Store sends it as a direct request (see
// direct.go) on the link it follows the tree on, and takes its
// notifications out of the stream where that link reads them (route), in
// their order among the answers to its direct requests. The client reads
// them too and, knowing no watch of theirs, does nothing with them but
// fire the Store's watches of the same path, as the server's one
// notification per connection and change means it should (see below). A
// watch belongs to its connection: a lost one takes it along, and the
// follows on it end (the server keeps no history to resume them from).
//
// # The guard
//
// Those servers keep one watch per connection and path in their table of
// data watches, with one mode, and every watch set on the path overwrites
// that mode. So a getData or exists with a watch on the root of a followed
// tree, from the same session, makes the recursive watch a one-shot one:
// the follow stops hearing of the nodes below at once, and of the root
// after its next change, silently. Their removeWatches cannot remove a
// recursive watch by its own type (it answers NoWatcher), and removes it
// by the type of data watches, along with any one-shot watch of the
// session on the path, which its waiter then waits for forever.
//
// A link therefore keeps, under rec:
//
//   - the recursive watches set on it (recur), by the server's path, with
//     the follows that use each;
//   - the paths on which, as far as it can tell, the server holds one-shot
//     data or exists watches for this connection (armed): a watch request
//     answered with a watch set, or in a SetWatches request, arms its
//     path; any notification of a node event on a path fires them all;
//   - the watch requests sent and not yet answered (inflight), by xid.
//
// Every frame goes through the link's write, the client's and the Store's
// alike, in the order the server reads them. There, under wmu, a getData
// or exists with a watch on a path that has a recursive watch goes out
// without the watch: the recursive watch is already there for it, and
// sends a notification of every change of the path, which fires the
// watch the client (or the Store, for a direct one) then registers on the
// answer, as the server's own would. Its answer still arms the path.
//
// A recursive watch is removed (removeWatches by both types, one after the
// other, in one write: by its own, which the fixed servers take, and by
// the type of data watches, which the others take and which then finds
// nothing else) only when no follow uses it, no one-shot watch is armed on
// its path and none is in flight there, decided in the same write, under
// wmu: so no watch of the session is ever removed with it. Until then it
// lingers, and it is removed once the notification that fires the last
// one-shot watch on its path comes (at most the path's next change).

// The opcodes of the requests that set and remove watches, and of the
// reads that may set one.
const (
	opExists       int32 = 3
	opRemoveWatch  int32 = 18
	opAddWatch     int32 = 106
	modeRecursive  int32 = 1 // AddWatchModes.persistentRecursive
	typeData       int32 = 2 // WatcherType.Data
	typeRecursive  int32 = 5 // WatcherType.PersistentRecursive
	errUnsupported int32 = -6
)

// ZooKeeper's types of node events, as notifications carry them.
const (
	evCreated     int32 = 1
	evDeleted     int32 = 2
	evDataChanged int32 = 3
)

// recState is what a link knows of its watches (see the top of this
// file). Guarded by rec.
type recState struct {
	rec      sync.Mutex
	recur    map[string]*recursive
	armed    map[string]struct{}
	inflight map[int32]watchReq
	gone     bool // the link closed: nothing more is set on it
}

// recursive is one recursive watch on a link: the follows that use it.
type recursive struct {
	trees []*tree
}

// watchReq is a watch request in flight.
type watchReq struct {
	path string
	op   int32
}

// guardWrite follows the frames of b, one write of the link under wmu,
// and edits them in place: it notes the watch requests, and takes the
// watch off those on a path that has a recursive watch. connect says
// whether b begins with the connect request, which has another layout.
func (l *link) guardWrite(b []byte, connect bool) {
	r := &l.rec
	for first := true; len(b) >= frameHead; first = false {
		size := int(binary.BigEndian.Uint32(b))
		if size < 8 || 4+size > len(b) {
			return // not whole frames: nothing the Store or the client writes
		}
		frame := b[4 : 4+size]
		b = b[4+size:]
		if first && connect {
			continue
		}
		xid, op := int32(binary.BigEndian.Uint32(frame)), int32(binary.BigEndian.Uint32(frame[4:]))
		switch op {
		case opGetData, opExists:
			if frame[len(frame)-1] == 0 {
				continue // no watch: the common read, with no allocation
			}
			path, rest, err := readBytes(frame[8:])
			if err != nil || len(rest) != 1 {
				continue
			}
			r.rec.Lock()
			if r.inflight == nil {
				r.inflight = map[int32]watchReq{}
			}
			r.inflight[xid] = watchReq{string(path), op}
			if r.recur[string(path)] != nil {
				rest[0] = 0 // the recursive watch serves it
			}
			r.rec.Unlock()
		case opSetWatches:
			l.armSetWatches(frame[8:])
		}
	}
}

// armSetWatches arms the paths of the data and exists watches of a
// SetWatches request's body: relativeZxid, then the lists of data, exists
// and children watches.
func (l *link) armSetWatches(b []byte) {
	if len(b) < 8 {
		return
	}
	b = b[8:]
	r := &l.rec
	r.rec.Lock()
	defer r.rec.Unlock()
	for range 2 {
		if len(b) < 4 {
			return
		}
		n := int32(binary.BigEndian.Uint32(b))
		b = b[4:]
		for ; n > 0; n-- {
			path, rest, err := readString(b)
			if err != nil {
				return
			}
			r.arm(path)
			b = rest
		}
	}
}

// arm notes that the server holds a one-shot data or exists watch on path.
// r.rec is held.
func (r *recState) arm(path string) {
	if r.armed == nil {
		r.armed = map[string]struct{}{}
	}
	r.armed[path] = struct{}{}
}

// replied follows the answer with error code code to the request xid.
// l.mu is held (see acked).
func (l *link) replied(xid, code int32) {
	r := &l.rec
	r.rec.Lock()
	w, ok := r.inflight[xid]
	if !ok {
		r.rec.Unlock()
		return
	}
	delete(r.inflight, xid)
	if code == errOK || code == errNoNode && w.op == opExists {
		r.arm(w.path) // the client registers its watch on this answer
	}
	due := r.dueLocked(w.path)
	r.rec.Unlock()
	if due {
		l.removeLater(w.path)
	}
}

// notified follows a notification of a node event of type t on path (the
// server's), which fires every one-shot data and exists watch of the
// connection on path, and hands it to the follows whose tree holds path.
// It runs where the link reads the stream, in its order among the answers.
func (l *link) notified(t int32, path string) {
	if t != evCreated && t != evDeleted && t != evDataChanged {
		return
	}
	r := &l.rec
	r.rec.Lock()
	delete(r.armed, path)
	due := r.dueLocked(path)
	var trees []*tree
	for a := path; ; a = parentAbs(a) {
		if rw := r.recur[a]; rw != nil {
			trees = append(trees, rw.trees...)
		}
		if a == "/" {
			break
		}
	}
	r.rec.Unlock()
	for _, f := range trees {
		f.notified(t, path)
	}
	if due {
		l.removeLater(path)
	}
}

// parentAbs is store.Parent for the server's paths.
func parentAbs(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}

// dueLocked reports whether the recursive watch on path is to be removed
// now: no follow uses it, and no one-shot watch is armed or in flight on
// path. r.rec is held.
func (r *recState) dueLocked(path string) bool {
	rw := r.recur[path]
	if rw == nil || len(rw.trees) > 0 || r.gone {
		return false
	}
	if _, ok := r.armed[path]; ok {
		return false
	}
	for _, w := range r.inflight {
		if w.path == path {
			return false
		}
	}
	return true
}

// addRecursive sets a recursive watch on path (the server's) for f, and
// sends the request of it with the direct request d that answers it. It
// reports false when the link is closed. The registration and the frame
// go under wmu, so that every later frame of the link is guarded.
func (l *link) addRecursive(path string, f *tree, d *direct) bool {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	r := &l.rec
	r.rec.Lock()
	if r.gone {
		r.rec.Unlock()
		return false
	}
	if r.recur == nil {
		r.recur = map[string]*recursive{}
	}
	rw := r.recur[path]
	if rw == nil {
		rw = &recursive{}
		r.recur[path] = rw
	}
	rw.trees = append(rw.trees, f)
	r.rec.Unlock()
	// Sent even when the watch is there already: a follow never depends
	// on another's request, and the server takes it as the same watch.
	b := appendString(beginFrame(make([]byte, 0, frameHead+4+len(path)+4), d.xid, opAddWatch), path)
	b = binary.BigEndian.AppendUint32(b, uint32(modeRecursive))
	l.sendLocked(endFrame(b, 0), d)
	return true
}

// dropRecursive ends f's use of the recursive watch on path, and removes
// the watch when it is due.
func (l *link) dropRecursive(path string, f *tree) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	r := &l.rec
	r.rec.Lock()
	if rw := r.recur[path]; rw != nil {
		rw.trees = slices.DeleteFunc(rw.trees, func(t *tree) bool { return t == f })
	}
	due := r.dueLocked(path)
	if due {
		delete(r.recur, path)
	}
	r.rec.Unlock()
	if due {
		l.sendRemoval(path)
	}
}

// removeLater removes the recursive watch on path, if it is still due, on
// a goroutine of the Store: it is called where the link reads, which must
// not wait on a write.
func (l *link) removeLater(path string) {
	if l.s.begin() != nil {
		return // the session is over, and its watches with it
	}
	l.s.goRun(fn(func() {
		defer l.s.calls.Done()
		l.wmu.Lock()
		defer l.wmu.Unlock()
		r := &l.rec
		r.rec.Lock()
		due := r.dueLocked(path)
		if due {
			delete(r.recur, path)
		}
		r.rec.Unlock()
		if due {
			l.sendRemoval(path)
		}
	}))
}

// sendRemoval sends the removal of the recursive watch on path: by its
// own type, then by that of data watches (see the top of this file); one
// of them answers NoWatcher, and no one waits for either. wmu is held.
func (l *link) sendRemoval(path string) {
	var b []byte
	ds := make([]*direct, 2)
	for i, typ := range []int32{typeRecursive, typeData} {
		ds[i] = &direct{xid: l.ownXid(), answer: func([]byte, error) {}}
		start := len(b)
		b = appendString(beginFrame(b, ds[i].xid, opRemoveWatch), path)
		b = binary.BigEndian.AppendUint32(b, uint32(typ))
		b = endFrame(b, start)
	}
	l.sendLocked(b, ds...)
}

// closeRecursive ends the follows of the link's recursive watches, which
// went with its connection, and forgets what it knew of its watches.
func (l *link) closeRecursive() {
	r := &l.rec
	r.rec.Lock()
	r.gone = true
	var trees []*tree
	for _, rw := range r.recur {
		trees = append(trees, rw.trees...)
	}
	r.recur, r.armed, r.inflight = nil, nil, nil
	r.rec.Unlock()
	for _, f := range trees {
		f.lost()
	}
}

// parseNotification returns the type and path of the notification whose
// body (after the reply header) is b.
func parseNotification(b []byte) (int32, string, bool) {
	if len(b) < 8 {
		return 0, "", false
	}
	t := int32(binary.BigEndian.Uint32(b))
	path, _, err := readString(b[8:])
	return t, path, err == nil
}

// answerCode returns the error code in an answer's header, or
// math.MinInt32 for a malformed one.
func answerCode(b []byte) int32 {
	if len(b) < replyHeader {
		return math.MinInt32
	}
	return int32(binary.BigEndian.Uint32(b[12:]))
}

// notification follows the notification of size bytes (after its length)
// that comes next on the link, without taking it from the stream: the
// client reads it next. A path is far shorter than the read buffer; a
// notification that does not fit it (none does) ends the follows on the
// link, which cannot tell what it said.
func (l *link) notification(size int) {
	if 4+size > readBuf {
		l.closeRecursive()
		return
	}
	if err := l.buffer(4 + size); err != nil {
		l.rerr = err // the client meets it on its read
		return
	}
	t, path, ok := parseNotification(l.rbuf[l.rpos+4+replyHeader : l.rpos+4+size])
	if ok {
		l.notified(t, path)
	}
}
