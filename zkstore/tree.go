package zkstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/internal/backlog"
	"github.com/corral-go/corral/store"
)

var _ store.TreeFollower = (*Store)(nil)

// A follow of a tree is one persistent recursive watch on its root (see
// recursive.go) and the reads its notifications call for. A notification
// says only which node changed and how, so each is followed by a read of
// the node (getData, no watch), and the change delivered is what the read
// found: a read may see later changes too, and the next read of the node
// then finds nothing new (see store.TreeFollow).
//
// Everything goes through one queue, in the order of the stream the link
// reads: the answer to addWatch, the reads of the first read of the
// subtree (each node's getData, and a listing of those above the depth
// that have children), the notifications, each with its read, and Sync's
// barriers. The follow's goroutine sends the reads in the queue's order, as
// direct requests; the server answers them in that order, so a node's
// reads find its states in order, and the queue hands out the head while
// it is answered. A notification that comes before the answer to a read it
// is older than finds its read queued behind that one: the read sees the
// change, and so does every later one.
//
// The first read is over once every read it queued is answered; a
// notification answered before then only corrects it. Sync sends a sync
// and, when its answer comes, queues a barrier behind every notification
// the server sent before it: the server sends a change's notification
// before the answer to any request it handles after the change.
//
// The watch belongs to the connection: when the link closes, the follow
// ends with ErrDisconnected, and its caller reads anew. A server older than
// 3.6 answers addWatch with UNIMPLEMENTED: FollowTree then fails with
// errors.ErrUnsupported, and store.FollowTree follows with one-shot
// watches instead.

// FollowTree reads the nodes of the subtree at p down to depth and follows
// their changes; see [store.TreeFollower]. It needs a connection, and
// fails with ErrDisconnected without one (or when it is lost meanwhile);
// ctx bounds the read. The follow ends when the connection is lost (with
// ErrDisconnected), the session ends, or Stop is called, which removes the
// watch from the server (see recursive.go for when that waits). On a
// server older than 3.6 it fails with an error wrapping
// errors.ErrUnsupported.
func (s *Store) FollowTree(ctx context.Context, p string, depth, limit int) (store.TreeFollow, []store.Node, error) {
	if err := store.ValidateTree(p, depth, limit); err != nil {
		return nil, nil, err
	}
	if err := s.admit(ctx); err != nil {
		return nil, nil, s.fail("follow", p, err)
	}
	l := s.directLink()
	if l == nil {
		s.calls.Done()
		return nil, nil, fmt.Errorf("zkstore: follow %q: %w: no connection", p, store.ErrDisconnected)
	}
	f := &tree{s: s, l: l, path: p, abs: s.conn.abs(p), depth: depth, limit: limit,
		nodes: map[string]store.Node{}, listing: true,
		wake: make(chan struct{}, 1), quit: make(chan struct{}),
		listed: make(chan struct{}), exited: make(chan struct{})}
	added := &entry{kind: entryAdded}
	f.queue = append(f.queue, added)
	// The root's read is queued before addWatch goes out, so that the
	// first read is under way (f.left) when its answer comes; run sends
	// it, after addWatch.
	f.push(&entry{kind: entryRead, path: p, first: true})
	if !l.addRecursive(f.abs, f, f.direct(added)) {
		s.calls.Done()
		return nil, nil, fmt.Errorf("zkstore: follow %q: %w: connection lost", p, store.ErrDisconnected)
	}
	go f.run() // owns the call's admission
	select {
	case <-f.listed:
	case <-f.quit:
		f.Stop()
		return nil, nil, f.ended()
	case <-ctx.Done():
		f.Stop()
		return nil, nil, s.fail("follow", p, ctx.Err())
	}
	f.mu.Lock()
	nodes := f.first
	f.first = nil
	f.mu.Unlock()
	slices.SortFunc(nodes, func(a, b store.Node) int { return strings.Compare(a.Path, b.Path) })
	return f, nodes, nil
}

// tree is a store.TreeFollow on ZooKeeper.
type tree struct {
	s            *Store
	l            *link // the link its watch is on
	path, abs    string
	depth, limit int
	exited       chan struct{} // closed when run has returned
	stop         sync.Once

	mu      sync.Mutex
	queue   []*entry          // oldest first
	toSend  []*entry          // queued, not sent yet, in the queue's order
	unsent  map[string]*entry // the reads of toSend, by path
	flying  int               // reads sent and not answered
	listing bool              // the first read is under way
	left    int               // reads of the first read not answered yet
	nodes   map[string]store.Node
	first   []store.Node                      // the first read, until FollowTree takes it
	listed  chan struct{}                     // closed when the first read is over
	changes backlog.Backlog[store.TreeChange] // Err: why the follow ended
	quit    chan struct{}                     // closed when the follow ends
	wake    chan struct{}                     // tells run that toSend grew
}

// The kinds of entries of a follow's queue.
const (
	entryAdded   = iota // the answer to addWatch
	entryRead           // a node's read
	entryList           // a listing of a node's children, in the first read
	entryBarrier        // Sync's barrier
)

// entry is one element of a follow's queue.
type entry struct {
	kind    int
	path    string // the Store's
	first   bool   // part of the first read
	ev      int32  // the notification that queued a read
	done    bool   // answered
	node    *store.Node
	names   []string
	kids    int32 // numChildren of the node read
	err     error
	barrier chan error
}

// direct returns the direct request that answers e.
func (f *tree) direct(e *entry) *direct {
	return &direct{xid: f.l.ownXid(), answer: func(body []byte, err error) { f.answered(e, body, err) }}
}

// push queues e, and has it sent if it is a request. A read of a node
// whose read is queued and not sent yet is that read: it will see what
// the new one would. f.mu is held.
func (f *tree) push(e *entry) {
	if f.changes.Err() != nil {
		return
	}
	if e.kind == entryRead {
		if u := f.unsent[e.path]; u != nil {
			if e.ev == evCreated {
				u.ev = evCreated
			}
			if e.first && !u.first {
				u.first = true
				f.left++
			}
			return
		}
		if f.unsent == nil {
			f.unsent = map[string]*entry{}
		}
		f.unsent[e.path] = e
	}
	if len(f.queue)+f.changes.Len() >= store.MaxTreeBacklog {
		f.endLocked(fmt.Errorf("zkstore: follow %q: %w: more than %d changes not taken", f.path, store.ErrDisconnected, store.MaxTreeBacklog))
		return
	}
	f.queue = append(f.queue, e)
	if e.first {
		f.left++
	}
	if e.kind == entryRead || e.kind == entryList {
		f.toSend = append(f.toSend, e)
		f.wakeLocked()
	}
}

// wakeLocked tells run that there may be reads to send. f.mu is held.
func (f *tree) wakeLocked() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// notified queues the read of the node at path (the server's) after a
// notification of type t, if the tree holds it. It runs where the link
// reads (see recursive.go).
func (f *tree) notified(t int32, path string) {
	p := f.s.conn.rel(path)
	if d, ok := store.Depth(f.path, p); !ok || d > f.depth || store.ValidatePath(p) != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.push(&entry{kind: entryRead, path: p, ev: t})
}

// answered records the answer to e (or why none will come) and hands out
// what the queue's head holds. It runs where the link reads, or where a
// write of the link failed.
func (f *tree) answered(e *entry, body []byte, err error) {
	if err == nil {
		switch e.kind {
		case entryAdded:
			if answerCode(body) == errUnsupported {
				err = fmt.Errorf("%w: the server has no persistent recursive watches (ZooKeeper 3.6+)", errors.ErrUnsupported)
			} else {
				err = answerErr(body)
			}
		case entryRead:
			var data []byte
			var st *zk.Stat
			if data, st, err = decodeData(body); err == nil {
				n := node(e.path, bytes.Clone(data), st)
				e.node, e.kids = &n, st.NumChildren
			}
		case entryList:
			e.names, _, err = decodeChildren2(body)
		}
	}
	if errors.Is(err, zk.ErrNoNode) {
		err = nil // a missing node, or one whose children went with it
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e.err, e.done = err, true
	if e.kind == entryRead || e.kind == entryList {
		// A full window is sent again in halves: a burst goes out in
		// large writes, not one frame per answer.
		if f.flying--; f.flying <= maxFlying/2 {
			f.wakeLocked()
		}
	}
	f.advance()
}

// advance hands out the answered entries at the queue's head. f.mu is
// held.
func (f *tree) advance() {
	for len(f.queue) > 0 && f.queue[0].done && f.changes.Err() == nil {
		e := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		if e.err != nil {
			if e.kind == entryAdded && errors.Is(e.err, errors.ErrUnsupported) {
				f.endLocked(fmt.Errorf("zkstore: follow %q: %w", f.path, e.err))
			} else {
				f.endLocked(f.s.fail("follow", f.path, e.err))
			}
			return
		}
		f.apply(e)
		if e.first {
			f.left--
		}
		if f.listing && f.left == 0 && f.changes.Err() == nil {
			f.listing = false
			f.first = make([]store.Node, 0, len(f.nodes))
			for _, n := range f.nodes {
				f.first = append(f.first, n)
			}
			f.nodes = nil
			close(f.listed)
		}
	}
}

// apply takes in the answered entry e. f.mu is held.
func (f *tree) apply(e *entry) {
	switch e.kind {
	case entryBarrier:
		e.barrier <- nil
	case entryList:
		for _, name := range e.names {
			f.push(&entry{kind: entryRead, path: store.Join(e.path, name), first: true})
		}
	case entryRead:
		if f.listing {
			f.list(e)
			return
		}
		c := store.TreeChange{Type: store.EventDeleted, Node: store.Node{Path: e.path}}
		if e.node != nil {
			c.Type, c.Node = store.EventDataChanged, *e.node
			if e.ev == evCreated {
				c.Type = store.EventCreated
			}
		}
		f.changes.Add(c)
	}
}

// list takes the read e into the first read. f.mu is held.
func (f *tree) list(e *entry) {
	if e.node == nil {
		delete(f.nodes, e.path)
		return
	}
	f.nodes[e.path] = *e.node
	if len(f.nodes) > f.limit {
		f.endLocked(fmt.Errorf("zkstore: follow %q: %w: more than %d nodes", f.path, store.ErrTooLarge, f.limit))
		return
	}
	if d, _ := store.Depth(f.path, e.path); e.first && d < f.depth && e.kids > 0 {
		f.push(&entry{kind: entryList, path: e.path, first: true})
	}
}

// decodeData parses a read's answer: the header, the data, then the
// node's Stat.
func decodeData(b []byte) ([]byte, *zk.Stat, error) {
	if err := answerErr(b); err != nil {
		return nil, nil, err
	}
	b = b[replyHeader:]
	if len(b) < 4 {
		return nil, nil, errMalformed
	}
	var data []byte
	if n := int32(binary.BigEndian.Uint32(b)); n >= 0 {
		var err error
		if data, b, err = readBytes(b); err != nil {
			return nil, nil, err
		}
	} else {
		b = b[4:]
	}
	st, err := decodeStat(b)
	return data, st, err
}

// maxFlying bounds the reads a follow has sent and not had answered. The
// server answers a session's requests in order: a follow far behind a
// burst of changes keeps its backlog here, and the session's other
// requests (the pacer's syncs, which keep the session's clock, and every
// call) wait behind maxFlying reads at most. The reads of a node queued
// while none is sent merge into one (push).
const maxFlying = 256

// run sends the reads of the queue, in its order, until the follow ends.
// It owns the admission of FollowTree's call (see admit).
func (f *tree) run() {
	defer close(f.exited)
	defer f.s.calls.Done()
	var b []byte
	for {
		select {
		case <-f.wake:
		case <-f.quit:
			return
		case <-f.s.ctx.Done():
			f.mu.Lock()
			f.endLocked(f.s.fail("follow", f.path, f.s.endErr()))
			f.mu.Unlock()
			return
		}
		f.mu.Lock()
		k := min(len(f.toSend), maxFlying-f.flying)
		if k <= 0 {
			f.mu.Unlock()
			continue
		}
		es := slices.Clone(f.toSend[:k])
		n := copy(f.toSend, f.toSend[k:])
		clear(f.toSend[n:]) // drop the references
		f.toSend = f.toSend[:n]
		for _, e := range es {
			if f.unsent[e.path] == e {
				delete(f.unsent, e.path)
			}
		}
		f.flying += k
		f.mu.Unlock()
		b = b[:0]
		ds := make([]*direct, len(es))
		for i, e := range es {
			ds[i] = f.direct(e)
			abs := f.s.conn.abs(e.path)
			if e.kind == entryList {
				b = f.s.appendList(b, ds[i].xid, e.path)
				continue
			}
			start := len(b)
			b = appendString(beginFrame(b, ds[i].xid, opGetData), abs)
			b = endFrame(append(b, 0), start) // no watch
		}
		f.l.send(b, ds...)
	}
}

// lost ends the follow when its link closed: its watch went with the
// connection.
func (f *tree) lost() {
	err := fmt.Errorf("zkstore: follow %q: %w: connection lost", f.path, store.ErrDisconnected)
	if serr := f.s.endErr(); serr != nil {
		err = fmt.Errorf("zkstore: follow %q: %w", f.path, serr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endLocked(err)
}

// endLocked ends the follow with err, unless it has ended. f.mu is held.
func (f *tree) endLocked(err error) {
	if !f.changes.End(err) {
		return
	}
	close(f.quit)
	f.queue, f.toSend, f.nodes = nil, nil, nil
}

// ended returns why the follow ended, or nil.
func (f *tree) ended() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes.Err()
}

func (f *tree) Changes() ([]store.TreeChange, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes.Take()
}

// Sync sends a sync on the follow's link and waits until the follow has
// handed out every notification the server sent before its answer (see
// the top of this file): one small request.
func (f *tree) Sync(ctx context.Context) error {
	if err := f.ended(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return f.s.fail("sync", f.path, err)
	}
	barrier := make(chan error, 1)
	d := &direct{xid: f.l.ownXid(), answer: func(body []byte, err error) {
		if err == nil {
			err = answerErr(body)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if err != nil {
			f.endLocked(f.s.fail("sync", f.path, err))
			return
		}
		f.push(&entry{kind: entryBarrier, done: true, barrier: barrier})
		f.advance()
	}}
	root := f.s.conn.abs("/")
	b := appendString(beginFrame(make([]byte, 0, frameHead+4+len(root)), d.xid, opSync), root)
	f.l.send(endFrame(b, 0), d)
	select {
	case err := <-barrier:
		return err
	case <-f.quit:
		return f.ended()
	case <-ctx.Done():
		return f.s.fail("sync", f.path, ctx.Err())
	}
}

// Stop ends the follow, waits for its goroutine and gives up its use of
// the link's recursive watch, which goes from the server once nothing of
// the session needs it (see recursive.go).
func (f *tree) Stop() {
	f.stop.Do(func() {
		f.mu.Lock()
		f.endLocked(fmt.Errorf("zkstore: follow %q stopped: %w", f.path, store.ErrClosed))
		f.mu.Unlock()
		<-f.exited
		f.l.dropRecursive(f.abs, f)
	})
	<-f.exited
}
