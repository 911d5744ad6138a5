package zkstore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/corral-go/corral/store"
	"github.com/go-zookeeper/zk"
)

// Watches: one-shot ZooKeeper watches, turned into store.Events that also
// carry the end of the caller's ctx or of the session.
//
// # One client watch per path and kind
//
// go-zookeeper cannot remove a watch (v1.0.4 sends no RemoveWatches): a
// watch whose caller has gone stays in its map, and in the server's watch
// table, until its node changes. The server keeps one watch per session,
// path and kind (data, exists, children) however often it is asked, but the
// client adds a channel at every request, so a wait given up again and
// again on a node that does not change (a Lock with a timeout behind a
// long holder, an inspect watcher that re-reads a quiet tree every round)
// would grow the client's map without bound.
//
// So the Store keeps, per path and kind, the client watch that has not
// fired yet (watchTable; a NodeW's watch set as a direct request is filed
// the same way, see directwatch.go), and a watch call that finds one reads
// without a watch and joins it instead of setting another: every Store
// watch is one subscriber of a client watch, and a caller that leaves only
// unsubscribes.
// The client then holds at most one watch per path and kind that has not
// fired, and the server the same: a watch on a node that exists (a data or
// children watch, which fires at the latest when the node goes), or on the
// creation of a path the caller waits for (an ExistsW that found nothing).
//
// No gap: a joiner looks the client watch up before its read, so the
// server set that watch before it answers the read, and any change after
// the read fires it. The watch may have fired before the read, though:
// then the joiner must not take that event for a change after its check.
// ZooKeeper sends a watch's event before the answer to any later read of
// the session, and go-zookeeper hands the event to the watch's channel
// before it hands the answer to the caller, so when the read returns,
// such an event is either recorded (fired) or waiting in the channel, from
// which the joiner takes it; the joiner then sets a watch of its own.

// watchKind is the kind under which the server and go-zookeeper file a
// watch: an exists request sets a data watch on a node that exists and an
// exists watch on one that does not; a getData request sets a data watch;
// a getChildren request a children watch.
type watchKind uint8

const (
	dataWatch watchKind = iota
	existWatch
	childWatch
)

type watchKey struct {
	path string
	kind watchKind
}

// watchTable holds the client watches of a Store that have not fired, at
// most one per path and kind. The zero value is ready to use.
type watchTable struct {
	mu sync.Mutex
	m  map[watchKey]*pending
	// served counts the client watches served, in the table or not (two
	// callers that found none may set one each).
	served int
}

// pending is one client watch and the Store watches it serves. Its fields
// are guarded by the table's mu.
type pending struct {
	key   watchKey
	zch   <-chan zk.Event // nil for a direct watch (see directwatch.go)
	subs  []*waiter       // the Store watches on it, in room while they fit
	room  [1]*waiter      // most client watches serve one Store watch
	fired bool            // its event has come, or can no longer come
	ev    zk.Event        // its event, once taken from zch
	// set: the server holds the watch. Only a direct watch whose read is
	// unanswered is not: no caller joins it (the no-gap argument above
	// needs the watch set before the joiner's read).
	set bool
	// A direct watch's link, and the Mzxid of its node when it was set.
	link  *link
	mzxid int64
}

// waiter is one Store watch: its channel and the stop of the AfterFunc
// that ends it with its ctx. Whoever removes it from its pending's subs
// delivers its one event.
type waiter struct {
	out  chan store.Event
	stop func() bool
}

func (w *waiter) send(ev store.Event) {
	w.out <- ev
	close(w.out)
}

// lookup returns the client watch of key that has not fired, if any.
func (t *watchTable) lookup(key watchKey) *pending {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.m[key]; p != nil && p.set {
		return p
	}
	return nil
}

// firedLocked reports whether p's event has come, taking it from its
// channel when it waits there. The caller holds t.mu.
func (t *watchTable) firedLocked(p *pending) bool {
	if !p.fired {
		select {
		case ev, ok := <-p.zch:
			if ok {
				p.ev = ev
			}
			// Closed: serve took the event and records it.
			p.fired = true
		default:
			return false
		}
	}
	if t.m[p.key] == p {
		delete(t.m, p.key)
	}
	return true
}

// subscribeLocked adds a Store watch on p, ended with ctx. The caller
// holds t.mu.
func (s *Store) subscribeLocked(ctx context.Context, p *pending) <-chan store.Event {
	t := &s.watches
	w := &waiter{out: make(chan store.Event, 1)}
	p.subs = append(p.subs, w)
	w.stop = context.AfterFunc(ctx, func() {
		t.mu.Lock()
		i := slices.Index(p.subs, w)
		mine := i >= 0
		if mine {
			last := len(p.subs) - 1
			p.subs[i], p.subs[last] = p.subs[last], nil
			p.subs = p.subs[:last]
		}
		t.mu.Unlock()
		if mine {
			w.send(store.Event{Path: p.key.path, Err: fmt.Errorf("zkstore: watch %s: %w", p.key.path, ctx.Err())})
		}
	})
	return w.out
}

// join subscribes a Store watch to p, a client watch looked up before the
// read the caller made, unless p fired before that read could tell (see
// the top of this file): then it returns nil, and the caller sets a watch
// of its own.
func (s *Store) join(ctx context.Context, p *pending) <-chan store.Event {
	t := &s.watches
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.firedLocked(p) {
		return nil
	}
	return s.subscribeLocked(ctx, p)
}

// add files zch, the client watch a request just set on key, serves it,
// and subscribes a Store watch ended with ctx to it.
func (s *Store) add(ctx context.Context, key watchKey, zch <-chan zk.Event) <-chan store.Event {
	return s.file(ctx, key, zch, true)
}

// file files zch as add does, with a Store watch on it only when sub is
// set.
func (s *Store) file(ctx context.Context, key watchKey, zch <-chan zk.Event, sub bool) <-chan store.Event {
	if err := s.begin(); err != nil {
		// The session is over: the client ends its watches itself.
		out := make(chan store.Event, 1)
		out <- store.Event{Path: key.path, Err: fmt.Errorf("zkstore: watch %s: %w", key.path, err)}
		close(out)
		return out
	}
	p := &pending{key: key, zch: zch, set: true}
	p.subs = p.room[:0]
	t := &s.watches
	t.mu.Lock()
	t.served++
	if old := t.m[key]; old == nil || t.firedLocked(old) {
		if t.m == nil {
			t.m = map[watchKey]*pending{}
		}
		t.m[key] = p
	}
	var out <-chan store.Event
	if sub {
		out = s.subscribeLocked(ctx, p)
	}
	t.mu.Unlock()
	go s.serve(p)
	return out
}

// adopt is the undo of a watch call whose caller left before its answer:
// the client watch it set is filed and served all the same, so that it is
// the one the next caller joins.
func (s *Store) adopt(key watchKey, zch <-chan zk.Event, err error) {
	if err == nil && zch != nil {
		s.file(context.Background(), key, zch, false)
	}
}

// serve waits for the event of p, or the session's end, and delivers it to
// every Store watch on p.
func (s *Store) serve(p *pending) {
	defer s.calls.Done()
	var (
		ev    zk.Event
		taken bool
	)
	select {
	case ev, taken = <-p.zch:
	case <-s.ctx.Done():
	}
	t := &s.watches
	t.mu.Lock()
	t.served--
	if taken {
		p.ev = ev
	}
	p.fired = true
	t.firedLocked(p) // drops p from the table
	subs := p.subs
	p.subs = nil
	ev = p.ev
	t.mu.Unlock()
	s.deliver(p.key.path, ev, subs)
}

// fire delivers a node event to the Store watches of the client watches it
// fires, on the client's receive loop: it calls onEvent with each event
// before it hands the event to the watches' channels (v1.0.4's recvLoop),
// so a waiter wakes one goroutine hop sooner than through serve, which
// then finds its pending fired and has no one left to serve. A client
// watch filed after the event passed here gets it from its channel, by
// serve, as before. The kinds an event fires are go-zookeeper's
// (notifyWatches).
func (s *Store) fire(ev zk.Event) {
	var kinds []watchKind
	switch ev.Type {
	case zk.EventNodeCreated:
		kinds = []watchKind{existWatch}
	case zk.EventNodeDataChanged:
		kinds = []watchKind{existWatch, dataWatch}
	case zk.EventNodeChildrenChanged:
		kinds = []watchKind{childWatch}
	case zk.EventNodeDeleted:
		kinds = []watchKind{existWatch, dataWatch, childWatch}
	default:
		return
	}
	path := s.conn.rel(ev.Path)
	t := &s.watches
	for _, kind := range kinds {
		t.mu.Lock()
		p := t.m[watchKey{path, kind}]
		if p == nil || p.zch == nil && !p.set {
			// None; or a direct watch whose read is not answered yet,
			// so older than this event: a notification of a recursive
			// watch can come before the answer that sets the watch
			// (see recursive.go), and the answer tells what it says.
			t.mu.Unlock()
			continue
		}
		direct := p.zch == nil
		if !t.firedLocked(p) {
			// Its event is this one, on its way to p.zch (or, for a
			// direct watch, only here).
			p.ev, p.fired = ev, true
			t.firedLocked(p)
		} else {
			direct = false // fired before: ended by whoever fired it
		}
		var (
			subs []*waiter
			l    *link
		)
		if direct {
			subs, l = t.endLocked(p)
		} else {
			subs = p.subs
			p.subs = nil
		}
		fired := p.ev
		t.mu.Unlock()
		if l != nil {
			l.dropWatch(p)
		}
		s.deliver(path, fired, subs)
	}
}

// deliver hands a client watch's event to the Store watches subs, or the
// session's end if it has ended.
func (s *Store) deliver(path string, ev zk.Event, subs []*waiter) {
	for _, w := range subs {
		w.stop()
		if err := s.endErr(); err != nil {
			// The session ended, or the event came after its
			// deadline: the session is over, whatever the server
			// last said.
			w.send(store.Event{Path: path, Err: fmt.Errorf("zkstore: watch %s: %w", store.ShortPath(path), err)})
			continue
		}
		w.send(s.event(path, ev))
	}
}

// ExistsW reports whether path exists and sets a one-shot watch on its
// creation, deletion or data change; see [store.Store]. The watch survives
// reconnections: a change made while disconnected is delivered after the
// reconnection. Its event carries Err when ctx ends or the session ends.
//
// On a missing node the server keeps a watch on its creation until a node
// is made at path or the session ends (one per path: see the top of this
// file); to wait for a node to go, use NodeW, which sets none there.
func (s *Store) ExistsW(ctx context.Context, path string) (bool, store.Stat, <-chan store.Event, error) {
	if err := store.ValidatePath(path); err != nil {
		return false, store.Stat{}, nil, err
	}
	data, exist := s.watches.lookup(watchKey{path, dataWatch}), s.watches.lookup(watchKey{path, existWatch})
	if data != nil || exist != nil {
		type result struct {
			ok bool
			st *zk.Stat
		}
		r, err := call(s, ctx, func(*caller) (result, error) {
			ok, st, err := s.conn.Exists(path)
			return result{ok, st}, err
		}, nil)
		if err != nil {
			return false, store.Stat{}, nil, s.fail("exists", path, err)
		}
		p := exist
		if r.ok {
			p = data
		}
		if p != nil {
			if ch := s.join(ctx, p); ch != nil {
				return r.ok, stat(path, r.ok, r.st), ch, nil
			}
		}
	}
	type result struct {
		ok bool
		st *zk.Stat
		ch <-chan zk.Event
	}
	kind := func(ok bool) watchKey {
		if ok {
			return watchKey{path, dataWatch}
		}
		return watchKey{path, existWatch}
	}
	r, err := call(s, ctx, func(*caller) (result, error) {
		ok, st, ch, err := s.conn.ExistsW(path)
		return result{ok, st, ch}, err
	}, func(r result, err error) { s.adopt(kind(r.ok), r.ch, err) })
	if err != nil {
		return false, store.Stat{}, nil, s.fail("exists", path, err)
	}
	return r.ok, stat(path, r.ok, r.st), s.add(ctx, kind(r.ok), r.ch), nil
}

// stat is the Stat ExistsW reports.
func stat(path string, ok bool, st *zk.Stat) store.Stat {
	if !ok {
		return store.Stat{}
	}
	return node(path, nil, st).Stat()
}

// NodeW returns the Stat of the node at path and sets a one-shot watch on
// its data change or deletion; see [store.NodeWatcher]. It asks with
// getData, which the server answers with NoNode, and no watch, when the
// node is missing, where an exists request would leave a watch on the
// node's creation: a watch on a sequential node's name, never made again,
// stays in the server's watch table and in go-zookeeper's map until the
// session ends. The node's data comes back with the answer, unused. A
// watch set anew goes as a direct request (see directwatch.go), which the
// Store sets again itself after a reconnection.
func (s *Store) NodeW(ctx context.Context, path string) (store.Stat, <-chan store.Event, error) {
	if err := store.ValidatePath(path); err != nil {
		return store.Stat{}, nil, err
	}
	key := watchKey{path, dataWatch}
	if l := s.directLink(); l != nil && s.watches.lookup(key) == nil {
		if st, ch, ok, err := s.nodeWDirect(ctx, l, key); ok {
			return st, ch, err
		}
	}
	if p := s.watches.lookup(key); p != nil {
		st, err := call(s, ctx, func(*caller) (*zk.Stat, error) {
			ok, st, err := s.conn.Exists(path)
			if err == nil && !ok {
				err = zk.ErrNoNode
			}
			return st, err
		}, nil)
		if err != nil {
			return store.Stat{}, nil, s.fail("watch", path, err)
		}
		if ch := s.join(ctx, p); ch != nil {
			return node(path, nil, st).Stat(), ch, nil
		}
	}
	type result struct {
		st *zk.Stat
		ch <-chan zk.Event
	}
	r, err := call(s, ctx, func(*caller) (result, error) {
		_, st, ch, err := s.conn.GetW(path)
		return result{st, ch}, err
	}, func(r result, err error) { s.adopt(key, r.ch, err) })
	if err != nil {
		return store.Stat{}, nil, s.fail("watch", path, err)
	}
	return node(path, nil, r.st).Stat(), s.add(ctx, key, r.ch), nil
}

// ChildrenW returns the children of path as Children does and sets a
// one-shot watch on a change to them or the deletion of path; see
// [store.ChildrenWatcher] and ExistsW.
func (s *Store) ChildrenW(ctx context.Context, path string) ([]store.Child, <-chan store.Event, error) {
	if err := store.ValidatePath(path); err != nil {
		return nil, nil, err
	}
	key := watchKey{path, childWatch}
	if p := s.watches.lookup(key); p != nil {
		names, err := call(s, ctx, func(*caller) ([]string, error) {
			names, _, err := s.conn.Children(path)
			return names, err
		}, nil)
		if err != nil {
			return nil, nil, s.fail("children", path, err)
		}
		if ch := s.join(ctx, p); ch != nil {
			return children(names), ch, nil
		}
	}
	type result struct {
		names []string
		ch    <-chan zk.Event
	}
	r, err := call(s, ctx, func(*caller) (result, error) {
		names, _, ch, err := s.conn.ChildrenW(path)
		return result{names, ch}, err
	}, func(r result, err error) { s.adopt(key, r.ch, err) })
	if err != nil {
		return nil, nil, s.fail("children", path, err)
	}
	return children(r.names), s.add(ctx, key, r.ch), nil
}

func (s *Store) event(path string, ev zk.Event) store.Event {
	switch ev.Type {
	case zk.EventNodeCreated:
		return store.Event{Type: store.EventCreated, Path: path}
	case zk.EventNodeDeleted:
		return store.Event{Type: store.EventDeleted, Path: path}
	case zk.EventNodeDataChanged:
		return store.Event{Type: store.EventDataChanged, Path: path}
	case zk.EventNodeChildrenChanged:
		return store.Event{Type: store.EventChildrenChanged, Path: path}
	}
	err := ev.Err
	if err == nil {
		err = fmt.Errorf("unexpected event %v", ev.Type)
	}
	return store.Event{Path: path, Err: s.fail("watch", path, err)}
}
