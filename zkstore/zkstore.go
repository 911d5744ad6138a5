// Package zkstore is the ZooKeeper adapter of the store contract: a
// [store.Store] that is one ZooKeeper session, over the client
// github.com/go-zookeeper/zk.
//
// Every method takes a ctx and returns when it ends, although the client
// has no notion of one: the request goes on in a goroutine owned by the
// Store, and a create that completes after its caller left is undone, so no
// abandoned call leaves a node behind.
//
// Ephemeral sequential nodes are created in Curator's protected form,
// "_c_<uuid>-<name><10 digits>": when the connection breaks before the reply
// arrives, the Store looks for the uuid among the parent's children once it
// has reconnected, and checks that the node it finds belongs to its own
// session, so a lost reply never yields a second node. Seq is the 10-digit
// suffix of a name ([store.ParseSeq]), so nodes written by Curator, kazoo and
// go-zookeeper's own lock order correctly beside corral's.
//
// The client reconnects by itself within the session timeout; meanwhile
// [Store.Disconnected] is closed and ownership of the session's ephemeral
// nodes is unknown. When the server expires the session the client would
// silently open a new one: the Store treats that as the end of its session,
// cancels [Store.Context] with [store.ErrSessionExpired] and fails every
// later call.
package zkstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-go/corral/store"
	"github.com/go-zookeeper/zk"
)

var (
	_ store.Store           = (*Store)(nil)
	_ store.ChildrenWatcher = (*Store)(nil)
)

// DefaultSessionTimeout is the session timeout asked of the server unless
// WithSessionTimeout says otherwise. The server may grant another (by
// default it clamps to 2 to 20 ticks).
const DefaultSessionTimeout = 10 * time.Second

// protectedPrefix starts the names of ephemeral sequential nodes, as in
// Curator: "_c_<uuid>-<name>".
const protectedPrefix = "_c_"

var openACL = zk.WorldACL(zk.PermAll)

// Logger receives the client's log messages. *log.Logger implements it.
type Logger interface {
	Printf(format string, args ...any)
}

type options struct {
	sessionTimeout time.Duration
	logger         Logger
}

// Option configures Open.
type Option func(*options)

// WithSessionTimeout sets the session timeout asked of the server.
func WithSessionTimeout(d time.Duration) Option {
	return func(o *options) { o.sessionTimeout = d }
}

// WithLogger sends the client's error messages to l instead of the standard
// logger; a nil l discards them.
func WithLogger(l Logger) Option {
	return func(o *options) {
		if l == nil {
			l = discard{}
		}
		o.logger = l
	}
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// Store is one ZooKeeper session. Open one with [Open]; the zero value is
// not usable. All methods are safe for concurrent use. A Store must not be
// copied.
type Store struct {
	conn    *zk.Conn
	events  <-chan zk.Event // closed when the client's goroutines have ended
	id      atomic.Int64
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stop    chan struct{} // closed to make the monitor close the client
	stopped chan struct{} // closed when the client has ended

	mu          sync.Mutex
	ended       error // ErrSessionExpired or ErrClosed, once the session ended
	closed      bool
	connected   bool
	established chan struct{} // closed when the session first exists
	down        chan struct{} // closed when disconnected
	up          chan struct{} // closed when connected
	calls       sync.WaitGroup
	timeout     time.Duration
	lost        *time.Timer // ends the session if disconnected too long
	downSince   time.Time
}

// Open connects to the ZooKeeper servers ("host:port"; the port defaults
// to 2181) and returns once a session is established, or when ctx ends
// (with ctx.Err(), wrapped). Close the Store to end the session.
func Open(ctx context.Context, servers []string, opts ...Option) (*Store, error) {
	o := options{sessionTimeout: DefaultSessionTimeout, logger: zk.DefaultLogger}
	for _, opt := range opts {
		opt(&o)
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("zkstore: open: %w: no servers", store.ErrInvalidArgument)
	}
	s := &Store{
		stop:        make(chan struct{}),
		stopped:     make(chan struct{}),
		established: make(chan struct{}),
		down:        make(chan struct{}),
		up:          make(chan struct{}),
		timeout:     o.sessionTimeout,
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())

	// The event callback needs s.conn; it waits on s.mu until it is set.
	s.mu.Lock()
	conn, events, err := zk.Connect(servers, o.sessionTimeout,
		zk.WithLogger(o.logger), zk.WithLogInfo(false),
		zk.WithEventCallback(s.onEvent), zk.WithDialer(s.dial))
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("zkstore: open: %w", err)
	}
	s.conn, s.events = conn, events
	s.mu.Unlock()
	go s.monitor()

	select {
	case <-s.established:
		return s, nil
	case <-ctx.Done():
		s.Close()
		return nil, fmt.Errorf("zkstore: open: %w", ctx.Err())
	}
}

// dial refuses to connect once the session ended: the client would open a
// new session, and with it act for a session that is not this Store's.
func (s *Store) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended != nil {
		return nil, ended
	}
	return net.DialTimeout(network, addr, timeout)
}

// onEvent follows the client's session state. The client calls it on its
// own goroutine, before it sends any request on a new connection.
func (s *Store) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.State {
	case zk.StateHasSession:
		id := s.conn.SessionID()
		switch {
		case s.ended != nil:
		case s.id.Load() == 0:
			s.id.Store(id)
			s.connected = true
			close(s.up)
			close(s.established)
		case id != s.id.Load():
			// The old session expired and the client made a new one.
			s.endLocked(store.ErrSessionExpired)
		case !s.connected:
			s.connected = true
			s.down = make(chan struct{})
			close(s.up)
			if s.lost != nil {
				s.lost.Stop()
			}
		}
	case zk.StateExpired:
		s.endLocked(store.ErrSessionExpired)
	case zk.StateDisconnected:
		if s.connected {
			s.connected = false
			close(s.down)
			s.up = make(chan struct{})
			s.startLostTimer()
		}
	}
}

// startLostTimer ends the session if the client stays disconnected for the
// session timeout: by then the server has expired it, or will as soon as it
// hears from anyone, so the client can no longer count on its ephemeral
// nodes (Curator does the same). The timeout asked for is used; a server
// that granted a shorter one expires the session sooner, which the client
// learns when it reconnects. s.mu is held.
func (s *Store) startLostTimer() {
	s.downSince = time.Now()
	if s.lost != nil {
		s.lost.Reset(s.timeout)
		return
	}
	s.lost = time.AfterFunc(s.timeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.connected || s.ended != nil {
			return
		}
		if rest := s.timeout - time.Since(s.downSince); rest > 0 {
			s.lost.Reset(rest) // disconnected again since this timer was set
			return
		}
		s.endLocked(fmt.Errorf("%w: disconnected for the session timeout (%v)", store.ErrSessionExpired, s.timeout))
	})
}

// endLocked ends the session with cause. s.mu is held.
func (s *Store) endLocked(cause error) {
	if s.ended != nil {
		return
	}
	s.ended = cause
	s.cancel(cause)
	if s.lost != nil {
		s.lost.Stop()
	}
	if s.connected {
		s.connected = false
		close(s.down)
	}
	close(s.stop)
}

// monitor closes the client once the session ended and waits for its
// goroutines to exit.
func (s *Store) monitor() {
	defer close(s.stopped)
	<-s.stop
	s.conn.Close()
	for range s.events {
	}
}

// SessionID returns the ZooKeeper session id. Ephemeral nodes of this
// session have it as their Owner.
func (s *Store) SessionID() int64 { return s.id.Load() }

// Context returns a context that is cancelled when the session ends, with
// store.ErrSessionExpired or store.ErrClosed as its cause.
func (s *Store) Context() context.Context { return s.ctx }

// Disconnected returns a channel that is closed when the client loses its
// connection to the server, or when the session ends. It is already closed
// while the client is disconnected; after a reconnection to the same session
// a new call returns a new channel.
func (s *Store) Disconnected() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

// Close ends the session: the server deletes its ephemeral nodes before
// Close returns, if it can be reached. Close cancels Context with
// store.ErrClosed (unless the session had already ended), makes pending
// calls and watches return, and waits for the client's goroutines. It is
// idempotent; later calls fail with store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.endLocked(store.ErrClosed)
	s.mu.Unlock()
	<-s.stopped
	s.calls.Wait()
	return nil
}

// endErr returns the error of calls made after the session ended, or nil.
func (s *Store) endErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endErrLocked()
}

func (s *Store) endErrLocked() error {
	switch {
	case s.ended == nil:
		return nil
	case s.closed && s.ended != store.ErrClosed:
		return fmt.Errorf("%w after %w", store.ErrClosed, s.ended)
	}
	return s.ended
}

// begin admits a call that will run on a goroutine of the Store, or returns
// why not.
func (s *Store) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.endErrLocked(); err != nil {
		return err
	}
	s.calls.Add(1)
	return nil
}

// waitConnected blocks until the client is connected with this session, or
// the session ended.
func (s *Store) waitConnected() error {
	s.mu.Lock()
	up := s.up
	s.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-s.ctx.Done():
		return s.endErr()
	}
}

// undoWait bounds how long a caller that left waits for the undo of its
// call, so that a cancelled create returns with its node gone.
const undoWait = 5 * time.Second

// call runs f, one or more blocking client requests, and returns its result,
// or ctx.Err() if ctx ends first. f then goes on in its goroutine and, if it
// completes after the caller left, its result is passed to undo (if not
// nil) to clean up; the caller waits for that, up to undoWait, so that
// whatever the abandoned call made is gone when it returns.
func call[T any](s *Store, ctx context.Context, f func() (T, error), undo func(T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if err := s.begin(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil {
		// Nothing can cancel the call: no goroutine needed.
		defer s.calls.Done()
		return f()
	}
	type result struct {
		v   T
		err error
	}
	const pending, done, abandoned = 0, 1, 2
	var state atomic.Int32
	ch := make(chan result, 1)
	undone := make(chan struct{})
	go func() {
		defer s.calls.Done()
		v, err := f()
		if state.CompareAndSwap(pending, done) {
			ch <- result{v, err}
			return
		}
		if undo != nil {
			undo(v, err)
		}
		close(undone)
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(pending, abandoned) {
			if undo != nil {
				t := time.NewTimer(undoWait)
				defer t.Stop()
				select {
				case <-undone:
				case <-t.C:
				}
			}
			return zero, ctx.Err()
		}
		// The result won the race: keep it rather than undo it.
		r := <-ch
		return r.v, r.err
	}
}

// fail wraps err, from a call on path, onto the store's sentinels.
func (s *Store) fail(op, path string, err error) error {
	if end := s.endErr(); end != nil {
		return fmt.Errorf("zkstore: %s %s: %w", op, path, end)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, store.ErrInvalidPath) || errors.Is(err, store.ErrDisconnected) ||
		errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrSessionExpired) {
		return fmt.Errorf("zkstore: %s %s: %w", op, path, err)
	}
	if sentinel := sentinelOf(err); sentinel != nil {
		return fmt.Errorf("zkstore: %s %s: %w (%w)", op, path, sentinel, err)
	}
	return fmt.Errorf("zkstore: %s %s: %w", op, path, err)
}

func sentinelOf(err error) error {
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return store.ErrNoNode
	case errors.Is(err, zk.ErrNodeExists):
		return store.ErrNodeExists
	case errors.Is(err, zk.ErrNotEmpty):
		return store.ErrNotEmpty
	case errors.Is(err, zk.ErrBadVersion):
		return store.ErrBadVersion
	case errors.Is(err, zk.ErrNoChildrenForEphemerals):
		return store.ErrEphemeralParent
	case errors.Is(err, zk.ErrInvalidPath), errors.Is(err, zk.ErrBadArguments):
		return store.ErrInvalidPath
	case errors.Is(err, zk.ErrSessionExpired):
		return store.ErrSessionExpired
	case isConnErr(err):
		return store.ErrDisconnected
	}
	return nil
}

// isConnErr reports whether err means the connection failed, leaving the
// outcome of a request unknown.
func isConnErr(err error) bool {
	var ne net.Error
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

func node(path string, data []byte, st *zk.Stat) store.Node {
	seq, _ := store.ParseSeq(store.Base(path))
	return store.Node{Path: path, Data: data, Seq: seq, Version: int64(st.Version), Owner: st.EphemeralOwner}
}

func children(names []string) []store.Child {
	cs := make([]store.Child, len(names))
	for i, name := range names {
		seq, _ := store.ParseSeq(name)
		cs[i] = store.Child{Name: name, Seq: seq}
	}
	slices.SortFunc(cs, func(a, b store.Child) int {
		if a.Seq != b.Seq {
			if a.Seq < b.Seq {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return cs
}

// Create creates the node at path; see [store.Store]. Missing parents are
// created as persistent, empty nodes. An ephemeral sequential node is named
// "_c_<uuid>-<name><10 digits>" and is created exactly once even if a reply
// is lost: Create then waits for the reconnection (bounded by ctx) and finds
// the node again. If ctx ends first, Create returns ctx.Err() and a node
// created afterwards is deleted.
func (s *Store) Create(ctx context.Context, path string, data []byte, mode store.Mode) (store.Node, error) {
	if err := store.ValidateCreate(path, data, mode); err != nil {
		return store.Node{}, err
	}
	var flags int32
	if mode&store.Ephemeral != 0 {
		flags |= zk.FlagEphemeral
	}
	if mode&store.Sequential != 0 {
		flags |= zk.FlagSequence
	}
	target, guid := path, ""
	if mode == store.EphemeralSequential {
		guid = newUUID()
		target = store.Join(store.Parent(path), protectedPrefix+guid+"-"+store.Base(path))
	}
	data = slices.Clone(data)
	created, err := call(s, ctx,
		func() (string, error) { return s.create(target, data, flags, guid) },
		func(created string, err error) { s.undoCreate(target, mode, created, err) })
	if err != nil {
		return store.Node{}, s.fail("create", path, err)
	}
	n := node(created, data, &zk.Stat{})
	if mode&store.Ephemeral != 0 {
		n.Owner = s.SessionID()
	}
	return n, nil
}

// create makes path, and its parents if they are missing. With a guid (a
// protected create) it survives a lost reply: it looks for the node by its
// guid once reconnected, and creates it again only if it is not there.
func (s *Store) create(path string, data []byte, flags int32, guid string) (string, error) {
	parent := store.Parent(path)
	for attempt := 0; ; attempt++ {
		created, err := s.conn.Create(path, data, flags, openACL)
		switch {
		case err == nil:
			return created, nil
		case errors.Is(err, zk.ErrNoNode) && attempt < 100:
			err = s.makeParents(parent)
			if err == nil {
				continue
			}
			if guid == "" || !isConnErr(err) {
				return "", err
			}
			if err := s.waitConnected(); err != nil {
				return "", err
			}
		case guid != "" && isConnErr(err) && !errors.Is(err, zk.ErrClosing):
			found, err := s.findProtected(parent, guid)
			if err != nil || found != "" {
				return found, err
			}
		default:
			return "", err
		}
	}
}

// findProtected returns the child of parent with guid in its name if it
// belongs to this session, or "" if there is none. It retries until it
// knows, or the session ends.
func (s *Store) findProtected(parent, guid string) (string, error) {
	prefix := protectedPrefix + guid + "-"
	for {
		if err := s.waitConnected(); err != nil {
			return "", err
		}
		names, _, err := s.conn.Children(parent)
		if errors.Is(err, zk.ErrNoNode) {
			return "", nil
		}
		if isConnErr(err) && !errors.Is(err, zk.ErrClosing) {
			continue
		}
		if err != nil {
			return "", err
		}
		i := slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
		if i < 0 {
			return "", nil
		}
		found := store.Join(parent, names[i])
		ok, st, err := s.conn.Exists(found)
		if isConnErr(err) && !errors.Is(err, zk.ErrClosing) {
			continue
		}
		if err != nil {
			return "", err
		}
		if !ok {
			return "", nil // deleted since: create again
		}
		if st.EphemeralOwner != s.SessionID() {
			return "", fmt.Errorf("%w: %s belongs to session %#x, not %#x",
				store.ErrNodeExists, found, st.EphemeralOwner, s.SessionID())
		}
		return found, nil
	}
}

// makeParents creates p and its missing ancestors as persistent nodes.
func (s *Store) makeParents(p string) error {
	if p == "/" {
		return nil
	}
	_, err := s.conn.Create(p, nil, 0, openACL)
	if errors.Is(err, zk.ErrNoNode) {
		if err := s.makeParents(store.Parent(p)); err != nil {
			return err
		}
		_, err = s.conn.Create(p, nil, 0, openACL)
	}
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// undoCreate deletes the node of a create whose caller left before it
// completed. target is the path asked of the server.
func (s *Store) undoCreate(target string, mode store.Mode, created string, err error) {
	if err == nil {
		// Version 0: only if nobody has set it since.
		s.conn.Delete(created, 0)
		return
	}
	if mode != store.Ephemeral || !isConnErr(err) || s.waitConnected() != nil {
		return
	}
	// A plain ephemeral create whose reply was lost: the node is ours if
	// this session owns it.
	if ok, st, err := s.conn.Exists(target); err == nil && ok && st.EphemeralOwner == s.SessionID() {
		s.conn.Delete(target, 0)
	}
}

// newUUID returns a random (version 4) UUID in its usual text form.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// Get returns the node at path, or an error wrapping store.ErrNoNode.
func (s *Store) Get(ctx context.Context, path string) (store.Node, error) {
	if err := store.ValidatePath(path); err != nil {
		return store.Node{}, err
	}
	type result struct {
		data []byte
		st   *zk.Stat
	}
	r, err := call(s, ctx, func() (result, error) {
		data, st, err := s.conn.Get(path)
		return result{data, st}, err
	}, nil)
	if err != nil {
		return store.Node{}, s.fail("get", path, err)
	}
	return node(path, r.data, r.st), nil
}

// Set replaces the data of the node at path if its Version is version, or
// unconditionally with store.AnyVersion; see [store.Store].
func (s *Store) Set(ctx context.Context, path string, data []byte, version int64) (store.Node, error) {
	if err := store.ValidatePath(path); err != nil {
		return store.Node{}, err
	}
	if err := store.ValidateData(data); err != nil {
		return store.Node{}, err
	}
	if version < store.AnyVersion {
		return store.Node{}, fmt.Errorf("zkstore: set %s: %w: version %d", path, store.ErrInvalidArgument, version)
	}
	data = slices.Clone(data)
	st, err := call(s, ctx, func() (*zk.Stat, error) {
		if version > math.MaxInt32 {
			// ZooKeeper versions are int32: this one cannot match.
			ok, _, err := s.conn.Exists(path)
			if err == nil && !ok {
				err = zk.ErrNoNode
			}
			if err == nil {
				err = zk.ErrBadVersion
			}
			return nil, err
		}
		return s.conn.Set(path, data, int32(version))
	}, nil)
	if err != nil {
		return store.Node{}, s.fail("set", path, err)
	}
	return node(path, data, st), nil
}

// Children returns the children of path sorted by Seq, then name, or an
// error wrapping store.ErrNoNode.
func (s *Store) Children(ctx context.Context, path string) ([]store.Child, error) {
	if err := store.ValidatePath(path); err != nil {
		return nil, err
	}
	names, err := call(s, ctx, func() ([]string, error) {
		names, _, err := s.conn.Children(path)
		return names, err
	}, nil)
	if err != nil {
		return nil, s.fail("children", path, err)
	}
	return children(names), nil
}

// ExistsW reports whether path exists and sets a one-shot watch on its
// creation, deletion or data change; see [store.Store]. The watch survives
// reconnections: a change made while disconnected is delivered after the
// reconnection. Its event carries Err when ctx ends or the session ends.
func (s *Store) ExistsW(ctx context.Context, path string) (bool, store.Stat, <-chan store.Event, error) {
	if err := store.ValidatePath(path); err != nil {
		return false, store.Stat{}, nil, err
	}
	type result struct {
		ok bool
		st *zk.Stat
		ch <-chan zk.Event
	}
	r, err := call(s, ctx, func() (result, error) {
		ok, st, ch, err := s.conn.ExistsW(path)
		return result{ok, st, ch}, err
	}, nil)
	if err != nil {
		return false, store.Stat{}, nil, s.fail("exists", path, err)
	}
	var stat store.Stat
	if r.ok {
		stat = node(path, nil, r.st).Stat()
	}
	return r.ok, stat, s.watch(ctx, path, r.ch), nil
}

// ChildrenW returns the children of path as Children does and sets a
// one-shot watch on a change to them or the deletion of path; see
// [store.ChildrenWatcher] and ExistsW.
func (s *Store) ChildrenW(ctx context.Context, path string) ([]store.Child, <-chan store.Event, error) {
	if err := store.ValidatePath(path); err != nil {
		return nil, nil, err
	}
	type result struct {
		names []string
		ch    <-chan zk.Event
	}
	r, err := call(s, ctx, func() (result, error) {
		names, _, ch, err := s.conn.ChildrenW(path)
		return result{names, ch}, err
	}, nil)
	if err != nil {
		return nil, nil, s.fail("children", path, err)
	}
	return children(r.names), s.watch(ctx, path, r.ch), nil
}

// watch turns a client watch into a store one: exactly one event, then
// closed, with Err when ctx or the session ends first.
func (s *Store) watch(ctx context.Context, path string, zch <-chan zk.Event) <-chan store.Event {
	out := make(chan store.Event, 1)
	if err := s.begin(); err != nil {
		out <- store.Event{Path: path, Err: fmt.Errorf("zkstore: watch %s: %w", path, err)}
		close(out)
		return out
	}
	go func() {
		defer s.calls.Done()
		defer close(out)
		select {
		case ev := <-zch:
			out <- s.event(path, ev)
		case <-ctx.Done():
			out <- store.Event{Path: path, Err: fmt.Errorf("zkstore: watch %s: %w", path, ctx.Err())}
		case <-s.ctx.Done():
			out <- store.Event{Path: path, Err: fmt.Errorf("zkstore: watch %s: %w", path, s.endErr())}
		}
	}()
	return out
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

// Delete deletes the node at path; see [store.Store]. The root cannot be
// deleted (store.ErrInvalidPath).
func (s *Store) Delete(ctx context.Context, path string) error {
	if err := store.ValidatePath(path); err != nil {
		return err
	}
	if path == "/" {
		return fmt.Errorf("zkstore: delete /: %w: the root cannot be deleted", store.ErrInvalidPath)
	}
	_, err := call(s, ctx, func() (struct{}, error) {
		return struct{}{}, s.conn.Delete(path, -1)
	}, nil)
	if err != nil {
		return s.fail("delete", path, err)
	}
	return nil
}
