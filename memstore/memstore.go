// Package memstore is an in-memory store.Store: one shared tree (a
// [Server]) and any number of sessions ([Store]) on it, with hooks that let
// tests expire a session, freeze its process, cut and restore its
// connection, and lose the reply of a create. It is what corral's own unit
// and property tests run on, and what programs using corral can use in
// theirs.
//
// Every call is served at once under one lock: nothing is retried, and a
// session has no background goroutine. Beside the contract a
// Store implements the optional store.CreateLister, store.GetDeleter,
// store.ChildCounter, store.ChildrenFollower and store.TreeFollower (and
// more: see Store); a follow's changes are recorded as part of the change
// itself, so its Sync has nothing to wait for. A follow of a tree ends
// when its session's connection is cut, as ZooKeeper's does. A disconnected session
// fails its calls with store.ErrDisconnected until Reconnect; it stays alive
// until Expire or Close: only a frozen session is expired by a clock.
//
// Sessions end in the order real stores keep. [Store.Expire] ends the
// session's Context first, and with it every hold derived from it, and
// frees its ephemeral nodes for other sessions a margin later
// ([WithExpiryMargin]), so that "the old holder stopped before the new one
// started" holds on memstore as on ZooKeeper and etcd. [Store.Freeze]
// pauses a session's process (its calls block, it sees nothing) until
// [Store.Thaw]; the server expires a frozen session after its timeout
// ([WithSessionTimeout]) and grants what it held to others, and the
// session learns of the end only when it is thawed, as a process stopped
// with SIGSTOP does.
package memstore

import (
	"context"
	"fmt"
	"slices"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/store"
)

// Server is one shared tree. The zero value is not usable; call NewServer.
// A Server is safe for concurrent use.
type Server struct {
	mu       gosync.Mutex
	root     *node
	seq      int64 // the last Seq handed out, store-wide like etcd's revision
	sessions map[int64]*Store
	lastID   int64
	existsW  map[string]map[*watch]struct{}
	childW   map[string]map[*watch]struct{}
	follows  map[string]map[*follow]struct{} // by followed path
	opts     options
	trees    map[string]map[*tree]struct{} // by followed path (see tree.go)
}

type node struct {
	name     string
	data     []byte
	seq      int64
	version  int64
	owner    int64
	created  time.Time
	parent   *node
	children map[string]*node
	changes  int64 // creations and deletions of children, as ZooKeeper's cversion
	front    int64 // the Seq of the last child deleted with DeleteFront
	implicit bool  // made by Create as a missing parent: reclaimed once empty
}

// NewServer returns an empty tree holding only the root, configured by
// opts (WithExpiryMargin, WithSessionTimeout).
func NewServer(opts ...Option) *Server {
	o := options{margin: DefaultExpiryMargin, timeout: DefaultSessionTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return &Server{
		opts:     o,
		root:     &node{children: map[string]*node{}},
		sessions: map[int64]*Store{},
		existsW:  map[string]map[*watch]struct{}{},
		childW:   map[string]map[*watch]struct{}{},
		follows:  map[string]map[*follow]struct{}{},
	}
}

// New returns a session on a new, private Server: the shortest way to a
// store in a unit test. Use NewServer and Open for several sessions on one
// tree. opts configure the Server, as NewServer's do.
func New(opts ...Option) *Store { return NewServer(opts...).Open() }

// Open starts a new session on s.
func (s *Server) Open() *Store {
	ctx, cancel := context.WithCancelCause(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastID++
	st := &Store{
		srv:        s,
		id:         s.lastID,
		ctx:        ctx,
		cancel:     cancel,
		disc:       make(chan struct{}),
		watches:    map[*watch]struct{}{},
		follows:    map[*follow]struct{}{},
		ephemerals: map[string]struct{}{},
		freed:      make(chan struct{}),
	}
	s.sessions[st.id] = st
	return st
}

// lookup returns the node at a valid path, or nil.
func (s *Server) lookup(p string) *node {
	n := s.root
	if p == "/" {
		return n
	}
	for i := 1; n != nil; {
		j := i
		for j < len(p) && p[j] != '/' {
			j++
		}
		n = n.children[p[i:j]]
		if j == len(p) {
			return n
		}
		i = j + 1
	}
	return nil
}

func (n *node) public(p string) store.Node {
	return store.Node{Path: p, Data: slices.Clone(n.data), Seq: n.seq, Version: n.version, Owner: n.owner, Created: n.created}
}

// create adds the node, making missing parents, and fires the watches.
func (s *Server) create(p string, data []byte, mode store.Mode, owner int64) (store.Node, error) {
	parentPath := store.Parent(p)
	parent, err := s.mkdirs(parentPath)
	if err != nil {
		return store.Node{}, err
	}
	if parent.owner != 0 {
		return store.Node{}, fmt.Errorf("%w: parent %q of %q", store.ErrEphemeralParent, store.ShortPath(parentPath), store.ShortPath(p))
	}
	s.seq++
	name := store.Base(p)
	if mode&store.Sequential != 0 {
		name += store.FormatSeq(s.seq)
	}
	if _, ok := parent.children[name]; ok {
		return store.Node{}, fmt.Errorf("%w: %q", store.ErrNodeExists, store.ShortPath(p))
	}
	n := &node{name: name, data: slices.Clone(data), seq: s.seq, created: time.Now(), parent: parent, children: map[string]*node{}}
	if mode&store.Ephemeral != 0 {
		n.owner = owner
	}
	parent.children[name] = n
	parent.changes++
	full := store.Join(parentPath, name)
	if n.owner != 0 {
		s.sessions[owner].ephemerals[full] = struct{}{}
	}
	s.fire(s.existsW, full, store.EventCreated)
	s.fire(s.childW, parentPath, store.EventChildrenChanged)
	s.tell(parentPath, store.ChildChange{Type: store.EventCreated, Name: name, Seq: n.seq})
	s.tellTrees(full, store.EventCreated, n)
	return n.public(full), nil
}

// mkdirs returns the node at p, creating it and its parents as persistent
// nodes where missing.
func (s *Server) mkdirs(p string) (*node, error) {
	if n := s.lookup(p); n != nil {
		return n, nil
	}
	if _, err := s.create(p, nil, store.Persistent, 0); err != nil {
		return nil, err
	}
	n := s.lookup(p)
	n.implicit = true
	return n, nil
}

// delete removes the node at p and then reclaims its parent (see reclaim).
func (s *Server) delete(p string) error {
	if err := s.remove(p); err != nil {
		return err
	}
	s.reclaim(store.Parent(p))
	return nil
}

// reclaim removes the implicit directory at p, and each implicit ancestor
// in turn, while it is empty: the last one out of a directory the library
// made takes it along, in the same step (see Parents in store's doc).
func (s *Server) reclaim(p string) {
	for p != "/" {
		n := s.lookup(p)
		if n == nil || !n.implicit || len(n.children) > 0 {
			return
		}
		_ = s.remove(p) // an empty node: it cannot fail
		p = store.Parent(p)
	}
}

// remove removes the empty node at p and fires the watches.
func (s *Server) remove(p string) error {
	n := s.lookup(p)
	if n == nil {
		return fmt.Errorf("%w: %q", store.ErrNoNode, store.ShortPath(p))
	}
	if len(n.children) > 0 {
		return fmt.Errorf("%w: %q", store.ErrNotEmpty, store.ShortPath(p))
	}
	delete(n.parent.children, n.name)
	n.parent.changes++
	if n.owner != 0 {
		if o := s.sessions[n.owner]; o != nil {
			delete(o.ephemerals, p)
		}
	}
	s.fire(s.existsW, p, store.EventDeleted)
	s.fire(s.childW, p, store.EventDeleted)
	s.fire(s.childW, store.Parent(p), store.EventChildrenChanged)
	s.tell(store.Parent(p), store.ChildChange{Type: store.EventDeleted, Name: n.name})
	s.tellTrees(p, store.EventDeleted, nil)
	return nil
}

// end ends a session for cause at once, both halves in one step (see
// lifecycle.go), a frozen one too: its ephemeral nodes go, its watches
// report cause, its context is cancelled.
func (s *Server) end(st *Store, cause error) {
	s.thaw(st)
	s.endServer(st)
	s.endClient(st, cause)
}

// watch is one registered one-shot watch.
type watch struct {
	ch    chan store.Event
	owner *Store
	set   map[string]map[*watch]struct{}
	path  string
	stop  func() bool
	done  bool
}

func (s *Server) addWatch(ctx context.Context, st *Store, set map[string]map[*watch]struct{}, p string) <-chan store.Event {
	w := &watch{ch: make(chan store.Event, 1), owner: st, set: set, path: p}
	if set[p] == nil {
		set[p] = map[*watch]struct{}{}
	}
	set[p][w] = struct{}{}
	st.watches[w] = struct{}{}
	w.stop = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.deliver(w, store.Event{Path: p, Err: fmt.Errorf("memstore: watch on %q: %w", store.ShortPath(p), ctx.Err())})
	})
	return w.ch
}

func (s *Server) fire(set map[string]map[*watch]struct{}, p string, t store.EventType) {
	for w := range set[p] {
		s.deliver(w, store.Event{Type: t, Path: p})
	}
}

// deliver sends the one event of w and forgets it; later calls do nothing.
func (s *Server) deliver(w *watch, ev store.Event) {
	if w.done {
		return
	}
	w.done = true
	if w.owner.frozen {
		w.owner.held = append(w.owner.held, heldEvent{w, ev}) // see Thaw
	} else {
		w.ch <- ev
		close(w.ch)
	}
	delete(w.set[w.path], w)
	if len(w.set[w.path]) == 0 {
		delete(w.set, w.path)
	}
	delete(w.owner.watches, w)
	w.stop()
}
