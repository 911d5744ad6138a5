package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-go/corral/store"
)

// Store is one session on a Server. It implements store.Store,
// store.ChildrenWatcher, store.NodeWatcher, store.CreateLister, store.WindowLister,
// store.SeqDeleter, store.FrontDeleter, store.GetDeleter,
// store.ChildrenFollower, store.ChildCounter, store.GuardedCreator,
// store.BatchCreator, store.GuardedWriter and store.TreeFollower (see
// FollowTree), and is safe for concurrent use. The zero value is not
// usable; get one from Server.Open or New.
type Store struct {
	srv    *Server
	id     int64
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Guarded by srv.mu.
	ended        error // ErrClosed or ErrSessionExpired once the session is over
	disconnected bool
	disc         chan struct{} // closed on disconnection and at the end
	loseReply    bool
	watches      map[*watch]struct{}
	follows      map[*follow]struct{}
	trees        map[*tree]struct{}
	ephemerals   map[string]struct{}
	// freed is closed once the session's ephemeral nodes are gone (the
	// server half of its end, see lifecycle.go), and then nil.
	freed chan struct{}
	// frozen says that the session's process is paused (Freeze) until
	// thawed is closed; held are the events of its watches meanwhile.
	// expiry is the server's timer of a frozen session; expiredAtServer
	// says that it fired (or Expire came): the session learns on Thaw.
	frozen          bool
	thawed          chan struct{}
	held            []heldEvent
	expiry          *time.Timer
	expiredAtServer bool
}

var (
	_ store.Store            = (*Store)(nil)
	_ store.ChildrenWatcher  = (*Store)(nil)
	_ store.NodeWatcher      = (*Store)(nil)
	_ store.CreateLister     = (*Store)(nil)
	_ store.WindowLister     = (*Store)(nil)
	_ store.SeqDeleter       = (*Store)(nil)
	_ store.FrontDeleter     = (*Store)(nil)
	_ store.GetDeleter       = (*Store)(nil)
	_ store.ChildrenFollower = (*Store)(nil)
	_ store.ChildCounter     = (*Store)(nil)
	_ store.GuardedCreator   = (*Store)(nil)
	_ store.BatchCreator     = (*Store)(nil)
)

// begin checks ctx and the path, locks the server and checks the session.
// On success the caller holds srv.mu and must defer srv.mu.Unlock. On every
// other path, a panic included (a nil ctx), begin unlocks: one session's
// misuse must never wedge the tree every other session shares.
func (st *Store) begin(ctx context.Context, op, p string) (err error) {
	if err := store.ValidatePath(p); err != nil {
		return err
	}
	st.srv.mu.Lock()
	held := false
	defer func() {
		if !held {
			st.srv.mu.Unlock()
		}
	}()
	if st.ended != nil {
		// The session's end wins over ctx's: it is for good.
		return fmt.Errorf("memstore: %s %q: %w", op, store.ShortPath(p), st.ended)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %s %q: %w", op, store.ShortPath(p), err)
	}
	if err := st.awaitThaw(ctx, op, p); err != nil {
		return err
	}
	if err := st.liveErr(); err != nil {
		return fmt.Errorf("memstore: %s %q: %w", op, store.ShortPath(p), err)
	}
	held = true
	return nil
}

func (st *Store) liveErr() error {
	if st.ended != nil {
		return st.ended
	}
	if st.disconnected {
		return store.ErrDisconnected
	}
	return nil
}

// Create implements store.Store. When LoseNextCreateReply was called, the
// node is created but the reply is lost, as on a broken connection: an
// ephemeral sequential create still returns its one node (a real client
// finds it again), any other create fails with store.ErrDisconnected.
func (st *Store) Create(ctx context.Context, p string, data []byte, mode store.Mode) (store.Node, error) {
	n, _, err := st.create(ctx, p, data, mode, false)
	return n, err
}

// CreateAndList implements store.CreateLister.
func (st *Store) CreateAndList(ctx context.Context, p string, data []byte, mode store.Mode) (store.Node, []store.Child, error) {
	return st.create(ctx, p, data, mode, true)
}

func (st *Store) create(ctx context.Context, p string, data []byte, mode store.Mode, list bool) (store.Node, []store.Child, error) {
	if err := store.ValidateCreate(p, data, mode); err != nil {
		return store.Node{}, nil, err
	}
	if err := st.begin(ctx, "create", p); err != nil {
		return store.Node{}, nil, err
	}
	defer st.srv.mu.Unlock()
	n, err := st.srv.create(p, data, mode, st.id)
	if err != nil {
		return store.Node{}, nil, fmt.Errorf("memstore: create: %w", err)
	}
	if st.loseReply {
		st.loseReply = false
		st.blip()
		if mode != store.EphemeralSequential {
			return store.Node{}, nil, fmt.Errorf("memstore: create %q: reply lost: %w", store.ShortPath(p), store.ErrDisconnected)
		}
	}
	var kids []store.Child
	if list {
		kids = children(st.srv.lookup(store.Parent(n.Path)))
	}
	return n, kids, nil
}

// Get implements store.Store.
func (st *Store) Get(ctx context.Context, p string) (store.Node, error) {
	if err := st.begin(ctx, "get", p); err != nil {
		return store.Node{}, err
	}
	defer st.srv.mu.Unlock()
	n := st.srv.lookup(p)
	if n == nil {
		return store.Node{}, fmt.Errorf("memstore: get: %w: %q", store.ErrNoNode, store.ShortPath(p))
	}
	return n.public(p), nil
}

// Set implements store.Store.
func (st *Store) Set(ctx context.Context, p string, data []byte, version int64) (store.Node, error) {
	// The path, the data, then the version: the order every adapter
	// checks them in, so bad input gets the same sentinel everywhere.
	if err := store.ValidatePath(p); err != nil {
		return store.Node{}, err
	}
	if p == "/" {
		return store.Node{}, fmt.Errorf("memstore: set %q: %w: the root holds no data", store.ShortPath(p), store.ErrInvalidPath)
	}
	if err := store.ValidateData(data); err != nil {
		return store.Node{}, err
	}
	if version < store.AnyVersion {
		return store.Node{}, fmt.Errorf("memstore: set %q: %w: version %d", store.ShortPath(p), store.ErrInvalidArgument, version)
	}
	if err := st.begin(ctx, "set", p); err != nil {
		return store.Node{}, err
	}
	defer st.srv.mu.Unlock()
	n := st.srv.lookup(p)
	if n == nil {
		return store.Node{}, fmt.Errorf("memstore: set: %w: %q", store.ErrNoNode, store.ShortPath(p))
	}
	if version != store.AnyVersion && version != n.version {
		return store.Node{}, fmt.Errorf("memstore: set %q: %w: have %d, want %d", store.ShortPath(p), store.ErrBadVersion, n.version, version)
	}
	n.data = append([]byte(nil), data...)
	n.version++
	st.srv.fire(st.srv.existsW, p, store.EventDataChanged)
	st.srv.tellTrees(p, store.EventDataChanged, n)
	return n.public(p), nil
}

// Children implements store.Store.
func (st *Store) Children(ctx context.Context, p string) ([]store.Child, error) {
	if err := st.begin(ctx, "children", p); err != nil {
		return nil, err
	}
	defer st.srv.mu.Unlock()
	n := st.srv.lookup(p)
	if n == nil {
		return nil, fmt.Errorf("memstore: children: %w: %q", store.ErrNoNode, store.ShortPath(p))
	}
	return children(n), nil
}

func children(n *node) []store.Child {
	kids := make([]store.Child, 0, len(n.children))
	for _, c := range n.children {
		kids = append(kids, store.Child{Name: c.name, Seq: c.seq})
	}
	store.SortChildren(kids)
	return kids
}

// ExistsW implements store.Store.
func (st *Store) ExistsW(ctx context.Context, p string) (bool, store.Stat, <-chan store.Event, error) {
	if err := st.begin(ctx, "exists", p); err != nil {
		return false, store.Stat{}, nil, err
	}
	defer st.srv.mu.Unlock()
	var stat store.Stat
	n := st.srv.lookup(p)
	if n != nil {
		stat = n.public(p).Stat()
	}
	return n != nil, stat, st.srv.addWatch(ctx, st, st.srv.existsW, p), nil
}

// NodeW implements store.NodeWatcher: ErrNoNode, and no watch, when p
// does not exist.
func (st *Store) NodeW(ctx context.Context, p string) (store.Stat, <-chan store.Event, error) {
	if err := st.begin(ctx, "watch", p); err != nil {
		return store.Stat{}, nil, err
	}
	defer st.srv.mu.Unlock()
	n := st.srv.lookup(p)
	if n == nil {
		return store.Stat{}, nil, fmt.Errorf("memstore: watch: %w: %q", store.ErrNoNode, store.ShortPath(p))
	}
	// The node exists, so an exists-watch can only see it change or go.
	return n.public(p).Stat(), st.srv.addWatch(ctx, st, st.srv.existsW, p), nil
}

// ChildrenW implements store.ChildrenWatcher.
func (st *Store) ChildrenW(ctx context.Context, p string) ([]store.Child, <-chan store.Event, error) {
	if err := st.begin(ctx, "children", p); err != nil {
		return nil, nil, err
	}
	defer st.srv.mu.Unlock()
	n := st.srv.lookup(p)
	if n == nil {
		return nil, nil, fmt.Errorf("memstore: children: %w: %q", store.ErrNoNode, store.ShortPath(p))
	}
	return children(n), st.srv.addWatch(ctx, st, st.srv.childW, p), nil
}

// Delete implements store.Store.
func (st *Store) Delete(ctx context.Context, p string) error {
	if p == "/" {
		return fmt.Errorf("%w %q: the root cannot be deleted", store.ErrInvalidPath, store.ShortPath(p))
	}
	if err := st.begin(ctx, "delete", p); err != nil {
		return err
	}
	defer st.srv.mu.Unlock()
	if err := st.srv.delete(p); err != nil {
		return fmt.Errorf("memstore: delete: %w", err)
	}
	return nil
}

// ChildrenUpTo implements store.WindowLister.
func (st *Store) ChildrenUpTo(ctx context.Context, p string, seq int64, n int) ([]store.Child, bool, error) {
	if n < 1 {
		return nil, false, fmt.Errorf("memstore: children %q: %w: window of %d", store.ShortPath(p), store.ErrInvalidArgument, n)
	}
	if err := st.begin(ctx, "children", p); err != nil {
		return nil, false, err
	}
	defer st.srv.mu.Unlock()
	nd := st.srv.lookup(p)
	if nd == nil {
		return nil, true, nil
	}
	kids, complete := store.Window(children(nd), seq, n)
	return kids, complete, nil
}

// CreateAndWindow implements store.WindowLister.
func (st *Store) CreateAndWindow(ctx context.Context, p string, data []byte, mode store.Mode, n int) (store.Node, []store.Child, bool, error) {
	if n < 1 {
		return store.Node{}, nil, false, fmt.Errorf("memstore: create %q: %w: window of %d", store.ShortPath(p), store.ErrInvalidArgument, n)
	}
	node, kids, err := st.create(ctx, p, data, mode, true)
	if err != nil {
		return store.Node{}, nil, false, err
	}
	kids, complete := store.Window(kids, node.Seq, n)
	return node, kids, complete, nil
}

// DeleteSeq implements store.SeqDeleter.
func (st *Store) DeleteSeq(ctx context.Context, p string, seq int64) error {
	return st.deleteSeq(ctx, p, seq, false)
}

// DeleteFront implements store.FrontDeleter. The record lives on the
// parent node, so it goes with it.
func (st *Store) DeleteFront(ctx context.Context, p string, seq int64) error {
	return st.deleteSeq(ctx, p, seq, true)
}

func (st *Store) deleteSeq(ctx context.Context, p string, seq int64, front bool) error {
	if p == "/" {
		return fmt.Errorf("%w %q: the root cannot be deleted", store.ErrInvalidPath, store.ShortPath(p))
	}
	if err := st.begin(ctx, "delete", p); err != nil {
		return err
	}
	defer st.srv.mu.Unlock()
	n := st.srv.lookup(p)
	if n != nil && n.seq != seq {
		return fmt.Errorf("memstore: delete: %w: %q has Seq %d, not %d", store.ErrNoNode, store.ShortPath(p), n.seq, seq)
	}
	if err := st.srv.delete(p); err != nil {
		return fmt.Errorf("memstore: delete: %w", err)
	}
	if front {
		n.parent.front = seq
	}
	return nil
}

// FollowsFront implements store.FrontDeleter.
func (st *Store) FollowsFront(ctx context.Context, p string, seq, prev int64) (bool, error) {
	if err := st.begin(ctx, "read", p); err != nil {
		return false, err
	}
	defer st.srv.mu.Unlock()
	n := st.srv.lookup(p)
	return n != nil && n.parent != nil && n.seq == seq && n.parent.front == prev, nil
}

// SessionID implements store.Store.
func (st *Store) SessionID() int64 { return st.id }

// Context implements store.Store.
func (st *Store) Context() context.Context { return st.ctx }

// Disconnected implements store.Store.
func (st *Store) Disconnected() <-chan struct{} {
	st.srv.mu.Lock()
	defer st.srv.mu.Unlock()
	return st.disc
}

// Close implements store.Store: the session's ephemeral nodes go and its
// Context is cancelled, in one step. It never fails; closing an ended
// session does nothing, beyond removing the nodes of an expiry still in
// its margin (see Expire). A frozen session is thawed first.
func (st *Store) Close() error {
	st.srv.mu.Lock()
	defer st.srv.mu.Unlock()
	st.srv.end(st, store.ErrClosed)
	return nil
}

// Disconnect cuts the session's connection without ending the session:
// Disconnected's channel closes and calls fail with store.ErrDisconnected
// until Reconnect. Watches stay set and still fire, as ZooKeeper's do once
// the client reconnects; follows of trees end with store.ErrDisconnected,
// as ZooKeeper's persistent watches do (see FollowTree).
func (st *Store) Disconnect() {
	st.srv.mu.Lock()
	defer st.srv.mu.Unlock()
	if st.ended == nil && !st.disconnected {
		st.disconnected = true
		close(st.disc)
		st.srv.endTrees(st, lostConnection)
	}
}

// Reconnect restores the connection after Disconnect, with the session and
// its ephemeral nodes intact.
func (st *Store) Reconnect() {
	st.srv.mu.Lock()
	defer st.srv.mu.Unlock()
	if st.ended == nil && st.disconnected {
		st.disconnected = false
		st.disc = make(chan struct{})
	}
}

// LoseNextCreateReply makes the next Create or CreateAndList of this session
// apply its change and then lose the reply, with a momentary disconnection.
func (st *Store) LoseNextCreateReply() {
	st.srv.mu.Lock()
	defer st.srv.mu.Unlock()
	st.loseReply = true
}

// blip is a disconnection immediately followed by a reconnection.
func (st *Store) blip() {
	st.srv.endTrees(st, lostConnection)
	close(st.disc)
	st.disc = make(chan struct{})
}

// lostConnection is the end of a follow of the tree at p whose connection
// was cut.
func lostConnection(p string) error {
	return fmt.Errorf("memstore: follow %q: connection lost: %w", p, store.ErrDisconnected)
}
