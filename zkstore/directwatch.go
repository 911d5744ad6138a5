package zkstore

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/corral-go/corral/store"
	"github.com/go-zookeeper/zk"
)

// Direct node watches: NodeW's read and watch as a direct request (see
// direct.go), a lock waiter's watch on the node in front of it.
//
// go-zookeeper keeps the watches it set in a map, and sets them again on
// each new connection (ZooKeeper's watches belong to a connection, not to
// the session); it knows nothing of a watch set by a direct request. Its
// event still passes through the client's receive loop, which hands every
// event to the Store (fire) before it looks in its map: that is how a
// direct watch fires. What the client would do after a reconnection, the
// Store does itself: when a link closes, the direct watches set on it that
// have not fired are read again, with a watch, on the client's path (which
// go-zookeeper then keeps), and the read says what the server would have:
// the node is gone (deleted), its data changed since the watch was set
// (changed), or neither, and the watch goes on as a client watch (see
// rearm). A watch whose own answer never came (its link closed first) has
// nothing to compare with: its waiters get a lost connection's error, and
// watch again.

// opGetData is ZooKeeper's opcode of a node's read.
const opGetData int32 = 4

// nodeWDirect is NodeW, for a node with no watch of the Store on it yet, as
// a direct request on l. It reports false, having done nothing, when the
// call must take the client's path: a watch was set meanwhile, or l closed.
func (s *Store) nodeWDirect(ctx context.Context, l *link, key watchKey) (store.Stat, <-chan store.Event, bool, error) {
	if err := s.admit(ctx); err != nil {
		return store.Stat{}, nil, true, s.fail("watch", key.path, err)
	}
	defer s.calls.Done()
	p := &pending{key: key, link: l}
	p.subs = p.room[:0]
	t := &s.watches
	t.mu.Lock()
	if old := t.m[key]; old != nil && !t.firedLocked(old) {
		t.mu.Unlock()
		return store.Stat{}, nil, false, nil
	}
	if t.m == nil {
		t.m = map[watchKey]*pending{}
	}
	// Filed before the request goes out: its event may come right
	// behind its answer, and finds it here.
	t.m[key] = p
	t.served++
	out := s.subscribeLocked(ctx, p)
	t.mu.Unlock()
	if !l.addWatch(p) {
		s.retire(p, zk.Event{Type: zk.EventNotWatching, Err: zk.ErrConnectionClosed})
		return store.Stat{}, nil, false, nil
	}
	d, read := prepare(l, func(body []byte) (*zk.Stat, error) { return s.watchSet(p, body) })
	abs := s.conn.abs(key.path)
	b := appendString(beginFrame(make([]byte, 0, frameHead+4+len(abs)+1), d.xid, opGetData), abs)
	l.send(endFrame(append(b, 1), 0), d) // with a watch
	st, err := wait(ctx, read)
	if err != nil {
		return store.Stat{}, nil, true, s.fail("watch", key.path, err)
	}
	if _, err := settle(s, st, nil); err != nil {
		return store.Stat{}, nil, true, s.fail("watch", key.path, err)
	}
	return node(key.path, nil, st).Stat(), out, true, nil
}

// watchSet takes the answer to p's read, on the link's reader: the node's
// Stat, which the watch is compared with if its link closes before it
// fires; or the read's error, which ends p (the server set no watch).
func (s *Store) watchSet(p *pending, body []byte) (*zk.Stat, error) {
	st, err := decodeGetData(body)
	if err != nil {
		ev := zk.Event{Type: zk.EventNotWatching, Err: err}
		if errors.Is(err, zk.ErrNoNode) {
			ev = zk.Event{Type: zk.EventNodeDeleted}
		}
		s.retire(p, ev)
		return nil, err
	}
	t := &s.watches
	t.mu.Lock()
	p.set, p.mzxid = true, st.Mzxid
	t.mu.Unlock()
	return st, nil
}

// decodeGetData parses a read's answer: the header, the data (skipped),
// then the node's Stat.
func decodeGetData(b []byte) (*zk.Stat, error) {
	if err := answerErr(b); err != nil {
		return nil, err
	}
	b = b[replyHeader:]
	if len(b) < 4 {
		return nil, errMalformed
	}
	n := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if n > 0 {
		if int(n) > len(b) {
			return nil, errMalformed
		}
		b = b[n:]
	}
	return decodeStat(b)
}

// retire ends the direct watch p, unless it fired: it leaves the table and
// its link, and its Store watches get ev.
func (s *Store) retire(p *pending, ev zk.Event) {
	t := &s.watches
	t.mu.Lock()
	if p.fired {
		t.mu.Unlock()
		return
	}
	p.ev, p.fired = ev, true
	t.firedLocked(p)
	subs, l := t.endLocked(p)
	t.mu.Unlock()
	if l != nil {
		l.dropWatch(p)
	}
	s.deliver(p.key.path, ev, subs)
}

// endLocked takes the Store watches of p, which fired, and ends its count
// and its link if it is a direct watch (a client watch's serve does that).
// The caller holds t.mu, and tells the link it returns.
func (t *watchTable) endLocked(p *pending) ([]*waiter, *link) {
	subs := p.subs
	p.subs = nil
	if p.zch != nil {
		return subs, nil
	}
	t.served--
	l := p.link
	p.link = nil
	return subs, l
}

// addWatch notes p, a direct watch, as set on l, unless l is closed.
func (l *link) addWatch(p *pending) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if l.watches == nil {
		l.watches = map[*pending]struct{}{}
	}
	l.watches[p] = struct{}{}
	return true
}

// dropWatch forgets p, a direct watch that fired or ended.
func (l *link) dropWatch(p *pending) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.watches, p)
}

// rearm sets again, on the client's path, the direct watches ps of a link
// that closed before they fired (see the top of this file), on a goroutine
// of the Store, one after the other, as soon as the connection allows;
// when the session ends first, their waiters get its end.
func (s *Store) rearm(ps []*pending) {
	if len(ps) == 0 {
		return
	}
	if s.begin() != nil {
		for _, p := range ps {
			s.retire(p, zk.Event{Type: zk.EventNotWatching, Err: zk.ErrSessionExpired})
		}
		return
	}
	s.goRun(fn(func() {
		defer s.calls.Done()
		for _, p := range ps {
			s.rearmOne(p)
		}
	}))
}

// rearmOne sets the direct watch p again, as rearm does.
func (s *Store) rearmOne(p *pending) {
	t := &s.watches
	path := p.key.path
	for attempt := 0; ; attempt++ {
		if (attempt > 0 && s.pause(attempt-1) != nil) || s.waitConnected() != nil {
			s.retire(p, zk.Event{Type: zk.EventNotWatching, Err: zk.ErrSessionExpired})
			return
		}
		t.mu.Lock()
		fired, set, mzxid := p.fired, p.set, p.mzxid
		t.mu.Unlock()
		if fired {
			return
		}
		_, st, ch, err := s.conn.GetW(path)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			s.retire(p, zk.Event{Type: zk.EventNodeDeleted, Path: s.conn.abs(path)})
			return
		case isConnErr(err) && !errors.Is(err, zk.ErrClosing):
			continue
		case err != nil:
			s.retire(p, zk.Event{Type: zk.EventNotWatching, Err: err})
			return
		}
		// ch is a client watch on the node now: p's, if nothing
		// changed since p was set; else p fires, and ch is filed for
		// the next caller. A client watch is served (serve) while the
		// session lives.
		live := s.begin() == nil
		t.mu.Lock()
		same := live && !p.fired && set && st.Mzxid == mzxid
		if same {
			p.zch, p.link = ch, nil
		}
		t.mu.Unlock()
		if same {
			go s.serve(p)
			return
		}
		if live {
			s.calls.Done()
		}
		switch {
		case !live:
			s.retire(p, zk.Event{Type: zk.EventNotWatching, Err: zk.ErrSessionExpired})
		case !set: // its read was never answered: watch again
			s.retire(p, zk.Event{Type: zk.EventNotWatching, Err: zk.ErrConnectionClosed})
			s.adopt(p.key, ch, nil)
		default:
			s.retire(p, zk.Event{Type: zk.EventNodeDataChanged, Path: s.conn.abs(path)})
			s.adopt(p.key, ch, nil)
		}
		return
	}
}
