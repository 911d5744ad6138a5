// Package zkstore is the ZooKeeper adapter of the store contract: a
// [store.Store] that is one ZooKeeper session, over the client
// github.com/go-zookeeper/zk.
//
// Ephemeral sequential nodes are created in Curator's protected form,
// "_c_<uuid>-<name><10 digits>": when the connection breaks before the reply
// arrives, the Store looks for the uuid among the parent's children once it
// has reconnected, and checks that the node it finds belongs to its own
// session, so a lost reply never yields a second node. Seq is the 10-digit
// suffix of a name ([store.ParseSeq]), so nodes written by Curator, kazoo and
// go-zookeeper's own lock order correctly beside corral's.
//
// [Store.CreateAndList] ([store.CreateLister]) sends the listing right
// behind an ephemeral sequential create, without waiting for the create's
// reply: the server answers a session's requests in order, so the listing
// sees the new node, and a lock's first step takes one round trip.
//
// # Session deadline
//
// The server expires a session once it has received nothing from the client
// for the session timeout it granted ([Store.SessionTimeout]; it clamps the
// one asked for with [WithSessionTimeout] to its own bounds, by default 2 to
// 20 ticks). In an ensemble only the leader expires sessions; a follower
// cut off from it goes on answering its clients for syncLimit × tickTime,
// whether or not the leader has already expired their sessions. The Store
// keeps a deadline that is never later than the leader's expiry, whatever
// syncLimit × tickTime:
//
//	deadline = when the latest request the leader has counted began to be sent
//	           + the negotiated session timeout
//
// and ends the session a guard before it, at its end:
//
//	end   = deadline - guard
//	guard = timeout/8 (at most 1 s) + 2 × this process's timer lateness,
//	        at most timeout/4
//
// The guard is for the client's own delays: the leader expires the
// session at the deadline at the earliest, and between the end and the
// moment a holder sees its hold over, a loaded process waits for the CPU
// twice (for the timer that ends the session, then for the holder's
// goroutine). The lateness is the 99th percentile of how late a timer has
// fired in this process over the last 10 s, measured by one sampler per
// process (20 wake-ups a second while any session is open), so the guard
// grows with the load and the fixed part, 250 ms at a 2 s timeout, is
// what is left between the holder seeing its hold end and the leader's
// expiry, on a machine as loaded as it was measured to be (see Sessions in
// package store). It is read afresh at every check: a guard grown since
// the last request moves the end earlier at once.
//
// The Store reads the client's connection both ways: the server answers
// every request with exactly one reply, in order, so once k replies (watch
// notifications aside) have arrived on a connection, the server has
// received the first k requests sent on it, the last of them no earlier than
// when it began to be sent. An answer alone proves only that the server
// is alive; the leader has counted a request once the connect response
// that accepts the session has arrived (a follower asks the leader to
// revalidate it), or once a request that passes through the leader (a
// write, a sync), sent at least a third of a timeout after the answer to
// that request, has been answered on the same connection: a follower
// reports its sessions' activity to the leader every half tick, on the
// stream it forwards requests on. That holds for any timeout of at least
// 1.5 ticks (the server grants at least 2 unless its minSessionTimeout
// says otherwise). To keep the deadline fresh the Store sends a sync
// whenever no request of the session has passed through the leader for an
// eighth of the timeout (8 requests per timeout on an idle session, none on
// one that writes as often), so on a working connection the deadline stays
// over a third of a timeout ahead, and the end over a quarter on an idle
// machine (a sixth with the guard at its limit). A stalled connection ends
// the session on the client after a third to a half of the timeout on an
// idle machine (less on a loaded one), sooner than the two thirds the
// client waits before it gives the connection up: a Store that must ride
// out longer stalls asks for a longer timeout. A server
// restart or a change of leader only extends sessions (the server counts
// their timeouts afresh), so the rule holds through them.
//
// Once the end has passed the session is over: [Store.Context] is
// cancelled with [store.ErrSessionExpired], every later call fails with it,
// and so does a call whose answer arrives only after the end (the server
// may have applied it: its outcome is unknown, as with
// [store.ErrDisconnected]); the client never connects again (it would make
// a new session). The Store checks the end whenever a call starts, a
// call's result or a watch's event is delivered, Context or Disconnected
// is called, and from a timer: a process that was stopped past its end (SIGSTOP, a VM pause)
// sees its session over on its first read, before anything the connection
// delivered meanwhile. So Context is cancelled before the server can expire
// the session and let another session take over what its ephemeral nodes
// held. The session also ends when the server says it expired, or when the
// client finds itself on another session.
//
// While the connection is down, [Store.Disconnected] is closed and
// ownership of the session's ephemeral nodes is unknown. Calls made
// meanwhile wait for the reconnection, bounded by their ctx and by the
// session's end; a request in flight when the connection broke fails with
// [store.ErrDisconnected]. The client tries the servers in turn, pausing
// between rounds (50 ms, doubling up to 1 s); it gives up a server that has
// not completed the handshake within the session timeout divided by the
// number of servers, as ZooKeeper's Java client does, or within half the
// time left to the session, if that comes first: a server may accept a
// connection and never answer it.
//
// # Cancellation and undo
//
// Every method takes a ctx and returns when it ends, although the client
// has no notion of one: the request goes on in a goroutine owned by the
// Store, until it completes or the session ends (Close waits for it). A
// listing (Children) and a plain delete need no such goroutine: the Store
// writes them on the connection itself, as direct requests, and the
// connection hands their answers to their callers, or drops them once the
// callers have left (see direct.go); a delete so given up still happens,
// as it would through the client.
//
// A create whose caller left is undone: the node, if the server makes it,
// is deleted as soon as the connection allows, retrying across lost
// connections for as long as the session lives, unless someone changed it
// meanwhile. The caller waits up to [UndoWait] for that, so on a working
// connection a cancelled Create returns with its node already gone, and in
// an outage it returns at most UndoWait after its ctx ended while the undo
// goes on. A protected create (ephemeral sequential) that has made nothing
// yet is not retried once its caller has left, and a directory it made for
// the node is removed as the last one out of it would remove it (see
// [WithReclaimDelay]). What cannot be undone: a
// persistent or plain sequential create whose reply was lost has an
// unknown outcome, as with [store.ErrDisconnected], and a persistent node
// still to be undone when the session ends stays (ephemeral ones go with
// the session).
//
// # Open and Close
//
// [Open] is bounded by its ctx, even against a peer that accepts the
// connection and never answers, or that speaks another protocol: the Store
// closes the connection under the client. [Store.Close] of a connected
// session asks the server to close it and waits up to a second for the
// answer; otherwise it returns at once, with the client shut down.
//
// # Credentials, ACLs, chroot and TLS
//
// [WithDigestAuth] (or [WithAuth], for another scheme) authenticates the
// session. Open sends the credentials before it returns; go-zookeeper
// keeps those that succeeded and sends them again on every reconnection,
// before any other request, so the session never acts without its
// identity. A client certificate the server authenticated ([WithTLS]) is
// an identity too, and a certificate alone is enough. The nodes a session
// with an identity creates, parents included, get [CreatorACL] (every
// right to the creator's identities, read to anyone); those of a session
// without one are open to everyone, which Open logs at Warn
// ([WithIdentityRequired] refuses such a session instead); [WithACL] sets
// another ACL. ZooKeeper checks the rights to create and to
// delete a node on its parent, so the ACL of a recipe's directory decides
// who may contend there and who may remove a contender.
//
// Digest passwords are not checked by the server when given, only when an
// ACL is met; Open checks them against the ACL of the Store's root, so a
// wrong password for the user that owns the root fails Open rather than
// every later call (see [WithAuth]).
//
// [WithChroot] roots the Store at a subtree, as a chroot in a ZooKeeper
// connect string does. [WithTLS] talks TLS to ZooKeeper's secure client
// port; a certificate either side refuses fails Open at once.
//
// The server's refusals map onto the store's sentinels:
// [store.ErrPermission] for an ACL that denies a call (ZooKeeper's
// NOAUTH), [store.ErrAuth] for refused credentials (AUTHFAILED, a
// certificate refused in the TLS handshake, a wrong digest password found
// by Open), and [store.ErrInvalidArgument] for an ACL the server will not
// set (INVALIDACL).
//
// # Child counts
//
// Every ZooKeeper node's stat counts its children (numChildren) and the
// creations and deletions of children since it was made (cversion), so
// the Store implements the optional store.ChildCounter:
// [Store.CountChildren] is one exists request, and [Store.ChildrenCounted]
// returns the counts the server sends with a listing. A queue consumer uses
// them to list a queue again only when items were put since. ZooKeeper
// cannot delete a node and return its data in one request, nor tell the
// names of new children without listing them all, so the Store implements
// neither store.GetDeleter nor store.ChildrenFollower; nor store.Leaser:
// TTL nodes need the server's extendedTypesEnabled, and an expired one is
// deleted only by the server's container sweep (every minute by default).
//
// # Following a tree
//
// [Store.FollowTree] ([store.TreeFollower]) follows a subtree with one
// persistent recursive watch (ZooKeeper 3.6+, addWatch, which go-zookeeper
// cannot send: the Store sends it as a request of its own), and a read of
// each node a notification names, in the stream's order, at most 256 reads
// in flight so that a burst never holds up the session's own requests.
// The server keeps no history to resume the watch from: a lost connection
// ends the follow with store.ErrDisconnected, and its caller reads anew.
// An older server refuses addWatch, and FollowTree fails with
// errors.ErrUnsupported (store.FollowTree then follows with a watch per
// node). Stop removes the watch from the server.
//
// The servers before ZOOKEEPER-4466 (3.6.0 to 3.8.x, Debian's 3.8.0 among
// them) keep one watch per connection and path, with one mode: a one-shot
// watch set on the root of a followed tree by the same session would turn
// the recursive watch into a one-shot one, and the follow would stop
// hearing of the nodes below without a word; and removing the recursive
// watch removes the one-shot watches of the session on its path with it.
// The Store guards both (recursive.go): a read with a watch on a path that
// has a recursive watch goes out without one (the recursive watch tells of
// every change of the path, and fires it), and a recursive watch is
// removed only once no one-shot watch of the session is set on its path.
// The guard lives in the link that writes every frame, so it holds for
// the client's requests too; it needs no go-zookeeper field, and the
// client's lastZxid (below) is not touched.
//
// # Directories
//
// A parent Create makes is a container node holding a mark of corral's
// own ("\x00corral:dir", which Get shows as no data): ZooKeeper's clients
// cannot tell a container from a persistent node. The Store that deletes
// the last node of such a directory removes it, and those above it left
// empty, [DefaultReclaimDelay] later unless it created in it again
// meanwhile, and Close removes those still due ([WithReclaimDelay]); the
// server's container reaper takes those emptied by a session's end. A
// sequential node's Seq starts again in a directory made again, so the
// fencing token of a node is its directory's creation zxid plus its Seq
// (store.Node.Fence), set by CreateAndList and Get.
//
// # go-zookeeper's lastZxid race
//
// go-zookeeper v1.0.4 writes the latest zxid it has seen from its receive
// loop while, after a reconnection, another of its goroutines reads it to
// re-arm its watches: a data race that `go test -race` reports in programs
// whose watches outlive a reconnection (go-zookeeper/zk pull request 35).
// The Store's connections keep that zxid in the client's stead, so the
// client never writes it: they zero it in each answer the client reads and
// write the right one into its connect and SetWatches requests (zxid.go).
//
// # Logging
//
// A Store logs nothing unless given a logger with [WithLogger]; the
// client's own messages then go to it too, at Debug or Warn.
package zkstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/internal/clockguard"
	"github.com/corral-go/corral/internal/reclaim"
	"github.com/corral-go/corral/store"
)

var (
	_ store.Store           = (*Store)(nil)
	_ store.ChildrenWatcher = (*Store)(nil)
	_ store.NodeWatcher     = (*Store)(nil)
)

// DefaultSessionTimeout is the session timeout asked of the server unless
// WithSessionTimeout says otherwise. The server may grant another (by
// default it clamps to 2 to 20 ticks); [Store.SessionTimeout] tells which.
const DefaultSessionTimeout = 10 * time.Second

// UndoWait bounds how long a call whose ctx ended waits for the undo of a
// create it had sent (see the package doc): a cancelled Create returns at
// most UndoWait after its ctx ended, with its node deleted if the
// connection allowed that by then.
const UndoWait = time.Second

type options struct {
	sessionTimeout time.Duration
	logger         *slog.Logger
	auth           []credential
	acl            []zk.ACL // nil: the default for the session's identity
	chroot         string   // "" for none
	tls            *tls.Config
	needIdentity   bool     // WithIdentityRequired
	invalid        []string // what the options given got wrong
	noTimer        bool     // tests: end the session only when its state is read
	reclaimDelay   time.Duration
}

// Option configures Open.
type Option func(*options)

// WithSessionTimeout sets the session timeout asked of the server; it must
// be positive. The server grants a timeout within its own bounds, which
// [Store.SessionTimeout] returns.
func WithSessionTimeout(d time.Duration) Option {
	return func(o *options) { o.sessionTimeout = d }
}

// Store is one ZooKeeper session. Open one with [Open]; the zero value is
// not usable. All methods are safe for concurrent use. A Store must not be
// copied.
type Store struct {
	conn      *client
	acl       []zk.ACL // of every node the Store creates
	tls       *tls.Config
	watches   watchTable      // client watches not fired yet (see watch.go)
	events    <-chan zk.Event // closed when the client's goroutines have ended
	id        atomic.Int64
	ctx       context.Context
	cancel    context.CancelCauseFunc
	stop      chan struct{} // closed to make the monitor close the client
	stopped   chan struct{} // closed when the client has ended
	log       *slog.Logger
	requested time.Duration
	nservers  int
	over      atomic.Bool          // the session has ended
	wires     wires                // frames awaited on the wire (see pipeline.go)
	dirs      dirs                 // the directories known as made by Create or not (see reclaim.go)
	later     reclaim.Later        // the directories this Store emptied, until their delay is up
	rounds    atomic.Int64         // round trips waited for (see tracker.rounds)
	zxids     zxids                // the zxids the client has seen, kept in its stead (see zxid.go)
	syncs     atomic.Int64         // syncs the pacer has sent
	workers   workers              // goroutines that run the client's requests (see workers.go)
	nauth     int                  // the session's credentials (see direct.go)
	live      atomic.Pointer[link] // the link direct requests go on, when one may
	ownXids   atomic.Uint32        // direct requests sent (see ownXid)

	// The session's clock. The deadline is in nanoseconds since base (0
	// until the first connect response), the negotiated timeout it was
	// counted with in nanoseconds; both are read without s.mu.
	base     time.Time
	deadline atomic.Int64
	timeout  atomic.Int64
	unguard  func() // stops this Store's use of the clock guard's sampler

	atStandIn   chan struct{} // closed when the client dials after the end
	standInOnce sync.Once
	refused     chan struct{} // closed when Open is to fail with refusal

	mu          sync.Mutex
	ended       error // ErrSessionExpired or ErrClosed, once the session ended
	closed      bool
	graceful    bool // closed while connected: ask the server to close the session
	connected   bool
	established chan struct{} // closed when the session first exists
	down        chan struct{} // closed when disconnected
	up          chan struct{} // closed when connected
	calls       sync.WaitGroup
	links       map[*link]struct{}
	timedID     int64         // the session the clock times
	negotiated  time.Duration // the session timeout the server granted
	acked       time.Time     // latest send the leader has counted (see quorum.go)
	proofs      []proof       // recent answers on the current connection, oldest first
	leaderSent  time.Time     // latest send of an answered request that passed through the leader
	timer       *time.Timer   // ends the session at its end (see onTimer)
	timerAt     time.Duration // when timer fires, since base
	noTimer     bool
	lastConnErr error // why the latest connection failed before its handshake
	certFails   int   // consecutive certificate failures before the session
	refusal     error // why Open fails: every server refused our certificate or theirs
}

// Open connects to the ZooKeeper servers ("host:port"; the port defaults
// to 2181) and returns once a session is established and, with
// credentials, TLS or a chroot, set up: authenticated, its identity found
// (see [WithIdentityRequired]), its credentials checked against its root,
// its chroot created if missing (see [WithAuth] and [WithChroot]). If ctx ends first, or the session cannot be had, it shuts
// the client down (promptly: the connections are closed under it) and
// returns ctx.Err() or the reason, wrapped: [store.ErrAuth] for refused
// credentials or certificates, [store.ErrPermission] for a root the
// session's identities may not use. When ctx ends before any server
// answered, the error names the last connection failure. Invalid options
// fail with [store.ErrInvalidArgument]. Close the Store to end the session.
func Open(ctx context.Context, servers []string, opts ...Option) (*Store, error) {
	o := options{sessionTimeout: DefaultSessionTimeout, reclaimDelay: DefaultReclaimDelay}
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.invalid) > 0 {
		return nil, fmt.Errorf("zkstore: open: %w: %s", store.ErrInvalidArgument, strings.Join(o.invalid, "; "))
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("zkstore: open: %w: no servers", store.ErrInvalidArgument)
	}
	if o.sessionTimeout < time.Millisecond || o.sessionTimeout > math.MaxInt32*time.Millisecond {
		return nil, fmt.Errorf("zkstore: open: %w: session timeout %v", store.ErrInvalidArgument, o.sessionTimeout)
	}
	if err := checkCertificates(o.tls, time.Now()); err != nil {
		return nil, fmt.Errorf("zkstore: open: %w", err)
	}
	if o.logger == nil {
		o.logger = discardLogger
	}
	s := &Store{
		acl:         o.acl, // nil: setUp chooses by the session's identity
		tls:         o.tls,
		refused:     make(chan struct{}),
		stop:        make(chan struct{}),
		stopped:     make(chan struct{}),
		workers:     workers{jobs: make(chan runner)},
		established: make(chan struct{}),
		down:        make(chan struct{}),
		up:          make(chan struct{}),
		atStandIn:   make(chan struct{}),
		links:       make(map[*link]struct{}),
		log:         o.logger,
		requested:   o.sessionTimeout,
		nservers:    len(servers),
		base:        time.Now(),
		noTimer:     o.noTimer,
		nauth:       len(o.auth),
	}
	s.later.Delay, s.later.Remove = o.reclaimDelay, s.reclaimAll
	s.ctx, s.cancel = context.WithCancelCause(context.Background())

	// The event callback needs s.conn; it waits on s.mu until it is set.
	s.mu.Lock()
	conn, events, err := zk.Connect(servers, o.sessionTimeout,
		zk.WithLogger(clientLogger{s, o.logger}), zk.WithLogInfo(true),
		zk.WithHostProvider(&hosts{s: s}),
		zk.WithEventCallback(s.onEvent), zk.WithDialer(s.dial))
	if err != nil {
		s.mu.Unlock()
		s.cancel(nil)
		return nil, fmt.Errorf("zkstore: open: %w", err)
	}
	s.conn, s.events = &client{zk: conn, root: o.chroot}, events
	s.unguard = clockguard.Use()
	s.mu.Unlock()
	go s.monitor()

	select {
	case <-s.established:
	case <-s.refused:
		s.mu.Lock()
		err := s.refusal
		s.mu.Unlock()
		s.Close()
		return nil, fmt.Errorf("zkstore: open: %w", err)
	case <-s.ctx.Done():
		err := s.endErr()
		s.Close()
		return nil, fmt.Errorf("zkstore: open: %w", err)
	case <-ctx.Done():
		s.mu.Lock()
		last := s.lastConnErr
		s.mu.Unlock()
		s.Close()
		if last != nil {
			return nil, fmt.Errorf("zkstore: open: no session with %v: %w (last connection error: %v)", servers, ctx.Err(), last)
		}
		return nil, fmt.Errorf("zkstore: open: no session with %v: %w", servers, ctx.Err())
	}
	// From now on only what passes through the leader keeps the session:
	// the setting up below included.
	if err := s.begin(); err != nil {
		s.Close()
		return nil, fmt.Errorf("zkstore: open: %w", err)
	}
	go s.pace()
	if _, err := call(s, ctx, func(left *caller) (struct{}, error) {
		return struct{}{}, s.setUp(left, &o)
	}, nil); err != nil {
		err = s.fail("open", s.rootName(), err)
		s.Close()
		return nil, err
	}
	return s, nil
}

// SessionID returns the ZooKeeper session id. Ephemeral nodes of this
// session have it as their Owner.
func (s *Store) SessionID() int64 { return s.id.Load() }

// Context returns a context that is cancelled when the session ends, with
// store.ErrSessionExpired or store.ErrClosed (possibly wrapped) as its
// cause. It checks the session's end first (see the package doc), so a
// session past its end is seen as ended even before the timer that
// ends it has run.
func (s *Store) Context() context.Context {
	s.expire()
	return s.ctx
}

// Disconnected returns a channel that is closed when the client loses its
// connection to the server, or when the session ends. It is already closed
// while the client is disconnected; after a reconnection to the same session
// a new call returns a new channel. Like Context, it checks the session's
// end first.
func (s *Store) Disconnected() <-chan struct{} {
	s.expire()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

// Close ends the session. If the client is connected, the server deletes
// the session's ephemeral nodes before Close returns, or Close gives up
// waiting for its answer after a second; otherwise they go when the server
// expires the session. Close cancels Context with store.ErrClosed (unless
// the session had already ended), makes pending calls and watches return,
// stops the undo of abandoned creates, and waits for every goroutine of
// the Store and the client. It is idempotent; later calls fail with
// store.ErrClosed.
func (s *Store) Close() error {
	s.expire()
	reclaim.Flush(s.later.Stop(), s.reclaimAll, maxFlush)
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.graceful = s.ended == nil && s.connected
		s.endLocked(store.ErrClosed)
	}
	s.mu.Unlock()
	<-s.stopped
	s.calls.Wait()
	s.workers.wg.Wait()
	s.unguard()
	return nil
}

// Get returns the node at path, or an error wrapping store.ErrNoNode.
func (s *Store) Get(ctx context.Context, path string) (store.Node, error) {
	if err := store.ValidatePath(path); err != nil {
		return store.Node{}, err
	}
	seq, ok := store.ParseSeq(store.Base(path))
	ok = ok && path != "/"
	r, err := call(s, ctx, func(*caller) (read, error) {
		if ok {
			return s.getSeq(path, seq)
		}
		data, st, err := s.conn.Get(path)
		return read{data: data, st: st}, err
	}, nil)
	if err != nil {
		return store.Node{}, s.fail("get", path, err)
	}
	n := node(path, r.data, r.st)
	n.Token = r.token
	return n, nil
}

// read is what Get reads of a node: its data and Stat and, for a
// sequential node, its fencing token.
type read struct {
	data  []byte
	st    *zk.Stat
	token int64
}

// getSeq reads the sequential node at path, with Seq seq, and its fencing
// token (store.Node.Token): its directory's creation zxid plus seq (see
// fenced), where the directory is read after the node, so that a
// directory older than the node is the node's own. The directory's read
// goes out right behind the node's, without waiting for its reply: one
// round trip. Should it have gone out first anyway (another read of the
// same path was on the wire), the directory's Stat says so (its last child
// change is older than the node) and it is read again.
func (s *Store) getSeq(path string, seq int64) (read, error) {
	dir := store.Parent(path)
	type got struct {
		r   read
		err error
	}
	written, stop := s.wires.expect(string(getDataTag(s.conn.abs(path))))
	done := make(chan got, 1)
	s.goRun(fn(func() {
		data, st, err := s.conn.Get(path)
		done <- got{read{data: data, st: st}, err}
	}))
	var (
		g      got
		sent   bool
		ok     bool
		dst    *zk.Stat
		dirErr error
	)
	select {
	case <-written:
		sent = true
		ok, dst, dirErr = s.conn.Exists(dir)
	case g = <-done:
	}
	stop()
	if sent {
		g = <-done
	}
	if g.err != nil {
		return read{}, g.err
	}
	if !sent || dirErr != nil || !ok || dst.Pzxid < g.r.st.Czxid {
		ok, dst, dirErr = s.conn.Exists(dir)
	}
	if dirErr == nil && ok && dst.Czxid < g.r.st.Czxid {
		g.r.token = dst.Czxid + seq
	}
	return g.r, nil
}

// getDataTag is what the frame of a getData of the server's path abs, with
// no watch, holds (opcode, path, watch false): a frame that holds it is
// such a request (see wires).
func getDataTag(abs string) []byte {
	b := binary.BigEndian.AppendUint32(nil, 4) // opGetData
	b = binary.BigEndian.AppendUint32(b, uint32(len(abs)))
	b = append(b, abs...)
	return append(b, 0)
}

// Set replaces the data of the node at path if its Version is version, or
// unconditionally with store.AnyVersion; see [store.Store].
func (s *Store) Set(ctx context.Context, path string, data []byte, version int64) (store.Node, error) {
	if err := store.ValidatePath(path); err != nil {
		return store.Node{}, err
	}
	if path == "/" {
		// As on every store: ZooKeeper's root node is not a corral node.
		return store.Node{}, fmt.Errorf("zkstore: set %s: %w: the root holds no data", store.ShortPath(path), store.ErrInvalidPath)
	}
	if err := store.ValidateData(data); err != nil {
		return store.Node{}, err
	}
	if version < store.AnyVersion {
		return store.Node{}, fmt.Errorf("zkstore: set %s: %w: version %d", store.ShortPath(path), store.ErrInvalidArgument, version)
	}
	data = slices.Clone(data)
	st, err := call(s, ctx, func(*caller) (*zk.Stat, error) {
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
	kids, _, err := s.children(ctx, path)
	return kids, err
}

// children is Children that also returns the creation zxid of path, which
// tells one incarnation of a directory from another (see fenced).
func (s *Store) children(ctx context.Context, path string) ([]store.Child, int64, error) {
	names, st, err := s.list(ctx, path)
	if err != nil {
		return nil, 0, err
	}
	return children(names), st.Czxid, nil
}

// list lists path with the Stat the server sends with the listing, and
// notes what that Stat says of path (see learn).
func (s *Store) list(ctx context.Context, path string) ([]string, *zk.Stat, error) {
	r, err := callDirect(s, ctx, func(l *link) (listing, error) {
		return wait(ctx, s.askList(l, path))
	}, func(*caller) (listing, error) {
		names, st, err := s.conn.Children(path)
		return listing{names, st}, err
	})
	if err != nil {
		return nil, nil, s.fail("children", path, err)
	}
	s.learn(path, r.st.DataLength, r.st.Version)
	return r.names, r.st, nil
}

// listed is children's result of a listing of path made as a direct
// request (askList).
func (s *Store) listed(path string, r result[listing]) ([]store.Child, int64, error) {
	if r.err != nil {
		return nil, 0, s.fail("children", path, r.err)
	}
	s.learn(path, r.v.st.DataLength, r.v.st.Version)
	return children(r.v.names), r.v.st.Czxid, nil
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
	del := func(*caller) (struct{}, error) { return struct{}{}, s.deleteNode(path) }
	var err error
	if s.plainDelete(path) {
		_, err = callDirect(s, ctx, func(l *link) (struct{}, error) { return struct{}{}, s.deleteDirect(ctx, l, path) }, del)
	} else {
		_, err = call(s, ctx, del, nil)
	}
	if err != nil {
		return s.fail("delete", path, err)
	}
	return nil
}

func node(path string, data []byte, st *zk.Stat) store.Node {
	seq, _ := store.ParseSeq(store.Base(path))
	n := store.Node{Path: path, Data: data, Seq: seq, Version: int64(st.Version), Owner: st.EphemeralOwner}
	if bytes.Equal(n.Data, dirMark) {
		n.Data = nil // a directory Create made: no data of anyone's
	}
	if st.Ctime > 0 {
		n.Created = time.UnixMilli(st.Ctime)
	}
	return n
}

// children returns the children named names, sorted as
// store.SortChildren sorts them. The sequential names of a directory hold
// distinct numbers, so where every name is one they are sorted by their
// numbers alone, each packed with its place into one integer: quicker
// than comparing children, at every check of a recipe's directory.
func children(names []string) []store.Child {
	keys := make([]uint64, len(names))
	for i, name := range names {
		seq, ok := store.ParseSeq(name)
		if !ok || seq > math.MaxUint32 || uint64(i) > math.MaxUint32 {
			return sortChildren(names)
		}
		keys[i] = uint64(seq)<<32 | uint64(i)
	}
	slices.Sort(keys)
	cs := make([]store.Child, len(names))
	for j, k := range keys {
		if j > 0 && k>>32 == keys[j-1]>>32 { // a name that merely ends in digits
			return sortChildren(names)
		}
		cs[j] = store.Child{Name: names[uint32(k)], Seq: int64(k >> 32)}
	}
	return cs
}

// sortChildren is children of any names.
func sortChildren(names []string) []store.Child {
	cs := make([]store.Child, len(names))
	for i, name := range names {
		seq, _ := store.ParseSeq(name)
		cs[i] = store.Child{Name: name, Seq: seq}
	}
	store.SortChildren(cs)
	return cs
}
