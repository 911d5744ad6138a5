package zkstore

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-go/corral/store"
	"github.com/go-zookeeper/zk"
)

// A lock's first step is a create and then a listing of the directory, to
// find the contender just before the new node. The server answers a
// session's requests in the order it receives them, so the listing need
// not wait for the create's reply: once the create's request is on the
// wire, a listing sent next sees the new node. CreateAndList sends them
// back to back, one round trip where Create then Children take two.
//
// The client library has no asynchronous calls; the Store knows that the
// create is on the wire when its connection writes the frame that holds
// the create's unique name (a protected name's uuid), and only then sends
// the listing.

var _ store.CreateLister = (*Store)(nil)

// wires signals the writing of frames that hold a given string.
type wires struct {
	n       atomic.Int32 // len(waiting), read without mu
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

// expect returns a channel that is closed once a frame that holds tag is
// written, and a function that stops waiting for it.
func (w *wires) expect(tag string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == nil {
		w.waiting = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	w.waiting[tag] = ch
	w.n.Store(int32(len(w.waiting)))
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.waiting[tag] == ch {
			delete(w.waiting, tag)
			w.n.Store(int32(len(w.waiting)))
		}
	}
}

// wrote is told of every frame the client writes.
func (w *wires) wrote(p []byte) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for tag, ch := range w.waiting {
		if bytes.Contains(p, []byte(tag)) {
			close(ch)
			delete(w.waiting, tag)
		}
	}
	w.n.Store(int32(len(w.waiting)))
}

// CreateAndList creates a node as Create does and returns it with the
// children of its parent as Children lists them right after the create.
// For an ephemeral sequential node the listing is sent as soon as the
// create's request is written, without waiting for its reply: one round
// trip. If the listing does not show the node (the create was sent again
// after a lost connection, say), the children are listed once more.
func (s *Store) CreateAndList(ctx context.Context, path string, data []byte, mode store.Mode) (store.Node, []store.Child, error) {
	if mode != store.EphemeralSequential {
		n, err := s.Create(ctx, path, data, mode)
		if err != nil {
			return store.Node{}, nil, err
		}
		kids, czxid, err := s.children(ctx, store.Parent(n.Path))
		if err != nil {
			if mode&store.Ephemeral != 0 {
				s.undoLater(n)
			}
			return store.Node{}, nil, err
		}
		return fenced(n, kids, czxid), kids, nil
	}
	if err := store.ValidateCreate(path, data, mode); err != nil {
		return store.Node{}, nil, err
	}
	if err := s.admit(ctx); err != nil {
		return store.Node{}, nil, s.fail("create", path, err)
	}
	guid := newUUID()
	c := s.creating(path, data, mode, guid)
	dir := store.Parent(path)
	var (
		n     store.Node
		kids  []store.Child
		czxid int64
		kerr  error
		err   error
	)
	if l := s.directLink(); l != nil && s.dirs.get(dir) != dirRemoved {
		n, kids, czxid, kerr, err = s.createListDirect(ctx, l, c, dir, guid)
	} else {
		n, kids, czxid, kerr, err = s.createList(ctx, c, dir, guid)
	}
	if err != nil {
		return store.Node{}, nil, err
	}
	if kerr == nil && hasChild(kids, n.Name()) {
		return fenced(n, kids, czxid), kids, nil
	}
	// Listed before the create took effect, or not at all: list again,
	// across a lost connection while ctx and the session last.
	for attempt := 0; ; attempt++ {
		if kids, czxid, kerr = s.children(ctx, dir); kerr == nil || !errors.Is(kerr, store.ErrDisconnected) || ctx.Err() != nil {
			break
		}
		if err := s.pause(attempt); err != nil {
			kerr = err
			break
		}
	}
	if kerr != nil {
		s.undoLater(n)
		return store.Node{}, nil, kerr
	}
	return fenced(n, kids, czxid), kids, nil
}

// errUnlisted stands for a listing not made: CreateAndList lists then.
var errUnlisted = errors.New("zkstore: not listed")

// createList runs c, CreateAndList's create (admitted), on a goroutine of
// the Store and lists dir as soon as the create is on the wire; kerr is
// the listing's error. The node's protected name holds guid.
func (s *Store) createList(ctx context.Context, c creation, dir, guid string) (n store.Node, kids []store.Child, czxid int64, kerr, err error) {
	written, stop := s.wires.expect(guid)
	defer stop()
	j := start(s, c.do, c.undo)
	kerr = errUnlisted
	select {
	case <-written:
		kids, czxid, kerr = s.children(ctx, dir)
	case <-j.done: // answered before it was seen on the wire: list later
	}
	n, err = c.made(j.wait(ctx))
	return n, kids, czxid, kerr, err
}

// createListDirect is createList with the create and the listing written
// on l in one write as direct requests: no goroutine of the Store takes
// part while the create succeeds and its caller waits for it. Otherwise a
// goroutine of the Store finishes the create as the client's path would
// (finishCreate) and CreateAndList lists after it: when the create failed
// or its answer was lost, and when the caller leaves before the answer,
// whose node is then deleted as any abandoned create's.
func (s *Store) createListDirect(ctx context.Context, l *link, c creation, dir, guid string) (n store.Node, kids []store.Child, czxid int64, kerr, err error) {
	s.later.Keep(dir)
	dc, made := prepare(l, s.created)
	dl, listed := prepare(l, decodeListing)
	frames := make([]byte, 0, 2*frameHead+s.createSize(c.target, c.data)+4+len(s.conn.abs(dir))+1)
	l.send(s.appendList(s.appendCreate(frames, dc.xid, c.target, c.data, c.flags), dl.xid, dir), dc, dl)
	var j *job[string]
	select {
	case r := <-made:
		if r.err == nil {
			s.calls.Done()
			if n, err = c.made(settle(s, r.v, nil)); err != nil {
				return store.Node{}, nil, 0, nil, err
			}
			select {
			case r := <-listed:
				kids, czxid, kerr = s.listed(dir, r)
			case <-ctx.Done():
				kerr = ctx.Err()
			}
			return n, kids, czxid, kerr, nil
		}
		j = start(s, func(left *caller) (string, error) { return s.finishCreate(left, c, guid, r.err) }, c.undo)
	case <-ctx.Done():
		j = start(s, func(left *caller) (string, error) {
			select {
			case r := <-made:
				if r.err == nil {
					return r.v, nil
				}
				return s.finishCreate(left, c, guid, r.err)
			case <-s.ctx.Done():
				return "", s.endErr()
			}
		}, c.undo)
	}
	n, err = c.made(j.wait(ctx))
	return n, nil, 0, errUnlisted, err
}

// finishCreate finishes the protected create c, sent as a direct request,
// which failed with err, as the client's path (create) would: a node whose
// answer was lost is looked for by its guid, and the create is made again
// (on the client's path) when it is not found, or when the server answered
// that the directory is missing, unless the caller has left.
func (s *Store) finishCreate(left *caller, c creation, guid string, err error) (string, error) {
	var answered *answeredErr
	dir, madeDir := store.Parent(c.target), false
	switch {
	case errors.Is(err, zk.ErrNoNode):
		if left.gone() {
			return "", errAbandoned // nothing made, nor to make
		}
		// The directory is missing: made here, as create would after its
		// own create failed, rather than after one more. An error is
		// create's to meet again, and report.
		_, madeDir = s.makeParents(dir), true
	case errors.As(err, &answered):
		return "", err // not made
	default:
		found, err := s.findProtected(dir, guid)
		if err != nil || found != "" {
			return found, err
		}
	}
	if left.gone() {
		return s.abandoned(dir, madeDir)
	}
	return c.do(left)
}

// fenced returns n with its fencing token (store.Node.Token), given a
// listing kids of its directory, whose creation zxid is czxid. A
// directory's sequence starts again at 0 when it is made again (see
// reclaim), so the Seq alone would go backwards; czxid+Seq does not: the
// node with Seq s is the s+1-th child change of its directory, each a
// write with a zxid of its own after czxid, so every czxid+s of a
// directory is below the zxid that deleted it, and so below the czxid of
// the next. (Only a client that creates several children of one directory
// in one multi request could break that; no recipe does.) The listing
// must hold n: it is of n's own directory then.
func fenced(n store.Node, kids []store.Child, czxid int64) store.Node {
	if czxid > 0 && hasChild(kids, n.Name()) {
		n.Token = czxid + n.Seq
	}
	return n
}

// undoLater deletes n, made by a create whose caller never learns of it, as
// an abandoned create is undone: as soon as the connection allows, while
// the session lives. The caller waits for that, as for any abandoned create,
// at most UndoWait, so that on a working connection the node is gone when
// the call returns.
func (s *Store) undoLater(n store.Node) {
	if s.begin() != nil {
		return // the session is over, and its ephemeral nodes with it
	}
	undone := make(chan struct{})
	s.goRun(fn(func() {
		defer s.calls.Done()
		defer close(undone)
		s.undoCreate(n.Path, store.EphemeralSequential, n.Path, nil)
	}))
	t := time.NewTimer(UndoWait)
	defer t.Stop()
	select {
	case <-undone:
	case <-t.C:
	}
}

func hasChild(kids []store.Child, name string) bool {
	for _, k := range kids {
		if k.Name == name {
			return true
		}
	}
	return false
}
