// Package etcdstore is the etcd adapter of the store contract: a [Store] is
// one session on an etcd cluster, reached through go.etcd.io/etcd/client/v3.
//
// etcd has a flat keyspace with leases where ZooKeeper has a tree with
// sessions. The adapter maps one onto the other:
//
//   - A node at path "/a/b" is the key "/a/b"; its data is the value.
//   - The session is a lease, kept alive by the Store in the background
//     (default TTL [DefaultTTL], see [WithTTL]). Ephemeral nodes are keys
//     attached to it; SessionID and Node.Owner are the lease ID (0: no
//     lease).
//   - The children of "/a" are the keys "/a/<name>" where name has no '/'.
//     Create makes missing parents as persistent empty keys in the same
//     transaction as the node (but for the deepest paths); a key attached
//     to a lease cannot be a parent.
//   - Node.Seq is the key's CreateRevision, for every node. So a contender
//     written under the same prefix by etcd's own concurrency.Mutex or
//     concurrency.Election, or by etcdctl lock, sorts correctly beside
//     corral's. A sequential node's name is the requested name followed by
//     16 hexadecimal digits: random, or those of an ephemeral sequential
//     node of the same session and requested name that was deleted with
//     DeleteSeq (see Names).
//   - Node.Version is the key's Version minus one (0 after Create).
//
// The root "/" is not a key: it always exists, has no data, never changes
// and cannot be written or deleted. Keys that do not start with '/' are
// invisible to the adapter; it uses some of its own there: one it watches
// and never writes (see the Store type), the session's create fence,
// attached to the lease (see Abandoned creates), the front records of
// lock directories (see below), and a marker beside each directory Create
// made, which goes with it: the Store that deletes the last key below such
// a directory removes it, [DefaultReclaimDelay] later unless it created in
// it again meanwhile ([WithReclaimDelay]; Close removes those still due).
// With [WithChroot] every
// key, the adapter's own included, is below the chroot instead.
//
// A Children call reads every key under the node, not only its direct
// children, so it costs in proportion to the node's whole subtree; the
// recipes keep their directories flat. [Store.ChildrenUpTo] and
// [Store.CreateAndWindow] ([store.WindowLister]) read only the few children
// up to a given Seq: what the server sends then does not grow with the
// number of children, though the server still reads them all to sort them
// by CreateRevision. So that a lock handoff needs no such read,
// [Store.DeleteFront] ([store.FrontDeleter]) records, in the transaction
// that deletes an exclusive holder's node, its Seq in a key of the
// adapter's own for the directory, attached to the deleting session's
// lease, and [Store.FollowsFront] lets the waiter behind it read that
// record and its own key: two point reads.
//
// # Names
//
// etcd keeps every key ever written in its index, deleted ones too, until
// the cluster is compacted, and every range read walks them. So a session
// uses the names of its ephemeral sequential nodes again, as etcd's own
// concurrency.Mutex uses one key per session: a name whose node the session
// deleted with [Store.DeleteSeq] ([store.SeqDeleter]), which deletes a node
// only if it has the Seq it names, is the name of its next ephemeral
// sequential node under the same requested path. A directory then holds as
// many names as the sessions that use it hold nodes at once, whatever its
// history, and a lock costs the same after a million acquisitions as after
// one. A name deleted with Delete, or whose create failed, is never used
// again, since a late delete by path could remove the new node. Identity is
// path and Seq together (see the store package), so a waiter never mistakes
// the new node for the old one.
//
// # Sessions
//
// The Store renews its lease whenever a third of the TTL has passed since
// it sent the last renewal the server acknowledged. The session ends, and
// Context is cancelled with [store.ErrSessionExpired], at the first of: a
// renewal answered "lease not found" (revoked, or expired on the server),
// or the deadline, TTL after the sending of the last acknowledged renewal.
// At the deadline the server cannot have expired the lease yet, so no other
// session can have been handed this one's locks while it still believed it
// held them.
//
// The deadline is checked synchronously wherever the session's state is
// read, not only by a timer: at the start of every call, in Context and
// Disconnected, and when a reply arrives. A call never succeeds once the
// deadline has passed, and a reply that arrives after it ends the session
// and fails the call with ErrSessionExpired, since the server may have
// expired the lease before it answered. (A write failed that way may have
// been applied, as with [store.ErrDisconnected]; an ephemeral node it made
// goes with the lease.)
//
// Open anchors the deadline on the sending of the Grant. When the Grant's
// reply took more than a third of the TTL (a restarting server, a leader
// election), Open renews the lease at once and anchors on that renewal, so
// it never returns a session that is past, or close to, its deadline.
//
// A failed renewal closes the Disconnected channel and renewals are then
// retried every 250 ms; meanwhile every call first renews the lease (one
// attempt, see Bounds), so a call that succeeds after a disconnection has
// seen its session alive.
//
// # Bounds
//
// Every call returns when its ctx ends, give or take the bounds below,
// whatever the state of the connection or the cluster:
//
//   - Attempt timeout ([WithAttemptTimeout], default
//     [DefaultAttemptTimeout]): every request the Store sends (a read, a
//     transaction, a lease grant or renewal made for a call, the setup of
//     a watch) is one attempt, given up after this long. A server can stall
//     a request: a member that forwards a write to a leader that just died
//     holds it for its request timeout (7 s by default), though a new
//     leader is elected within about two election timeouts. A call whose
//     attempt is given up fails with [store.ErrDisconnected] (for a write,
//     the outcome is unknown) and the caller retries, as corral's recipes
//     do, instead of waiting for the stalled request; a sequential Create
//     retries by itself. A request that needs longer than the attempt
//     timeout never succeeds (a Children of a huge directory on a slow
//     link): raise the bound.
//   - Each renewal of the keepalive loop is bounded by
//     min(attempt timeout, max(500 ms, min(TTL/5, 2 s))) and by the
//     deadline; after a failed one, the next follows 250 ms later.
//   - A Create whose ctx ends while one of its requests may be applied
//     waits for its undo (see Abandoned creates) at most one attempt
//     timeout more, then returns ctx's error.
//   - Close waits at most min(TTL, 5 s) for the revocation of the lease.
//   - Open and Dial block until a lease is granted or their ctx ends; a
//     given-up Grant attempt is retried.
//
// # Abandoned creates
//
// A create whose ctx ends while one of its transactions may have reached
// the server (sent and not answered, or answered with an unknown outcome) is
// undone by the Store. One transaction deletes the node if it is there as it
// would have been made (with this session's lease, or none for a persistent
// node, the data written, no children) and, in the same transaction, writes
// the session's create fence, the key "\x00corral/etcdstore/fence/<lease>"
// attached to the lease. Every create transaction of the session requires
// the fence to be as it last saw it, so a create that reaches the server
// after its undo (held in a frozen link, say) fails instead of making a
// node: once the undo is applied, the node is gone for good. A create of the
// session that was running when the fence moved is sent again, which the
// caller does not see. The undo is retried (10 ms apart, doubling up to
// 1 s) until it is applied or the session ends (the lease's end removes
// ephemeral nodes anyway); Close stops it. A persistent node with a fixed
// name whose create had an unknown outcome is not deleted, since it may
// have been made by someone else; the fence still moves, so the create
// cannot be applied later.
//
// # Watches
//
// ExistsW and ChildrenW open an etcd watch at the current revision, with
// require-leader, and read the watched keys beside it; changes the read
// already saw are skipped, so there is no gap and no stale event. Such a
// watch is served from etcd's synced watcher group and fires as soon as
// the change commits (a watch from an older revision waits up to 100 ms
// for the unsynced group's catch-up). A watch served by a member that lost
// its leader fails with [store.ErrDisconnected]; one resumed after a broken
// stream from a compacted revision re-reads and reports what changed. The
// setup of a watch is one attempt, bounded by the call's ctx; once set up,
// the watch lives until its event, its ctx's end or the session's end.
//
// # Credentials, TLS and roles
//
// A Store talks to etcd with whatever its client was configured with:
// clientv3.Config's TLS (the CA in RootCAs, a client certificate in
// Certificates, for a cluster run with --client-cert-auth) and Username and
// Password (for a cluster with authentication enabled). See the package
// example and README.md, "Secure connections".
//
// Open makes one read in the Store's root before it grants its lease, so
// that what would fail every call fails Open instead, with a sentinel:
// [store.ErrAuth] for no credentials where the cluster requires them
// (Dial fails with it too for a wrong password or an unknown user,
// which clientv3.New reports, and at once, from a TLS handshake of its
// own with each endpoint, when a certificate is refused; Open on a client
// made elsewhere sees the refusal only when its first attempt is given
// up), and
// [store.ErrPermission] when the user's roles do not let it read there.
// Later calls that a role does not allow fail with [store.ErrPermission]
// and change nothing.
//
// A role scoped to a key prefix needs [WithChroot]: it keeps every key
// the Store reads or writes, its own included, below the chroot.
//
// # Following, taking, leasing
//
// Beside the contract the Store implements the optional capabilities a
// queue needs to take an item for a constant cost (see the store package):
// [Store.GetDelete] deletes a node and returns it in one transaction (a
// delete with its previous value); [Store.FollowChildren] reads a
// directory once and then serves its changes from one watch, and its Sync
// waits for the watch to reach the current revision (one small read that
// walks no range, then progress requests while the range is quiet); and
// [Store.CreateLeased] attaches a node to a lease of its own (a grant, then
// the create), renewed and revoked through the Lease it returns, timed on
// the server's clock whatever becomes of the session. A range read walks
// every key etcd still indexes in the range, deleted ones too until the
// next compaction; after its first listing a follow reads no range again.
//
// # Logging
//
// The Store logs nothing unless given a logger with [WithLogger], and then
// only at debug level (disconnections, reconnections, given-up attempts,
// undone creates, the session's end). [Dial] gives the client it makes the
// same logger, or a silent one, unless its Config has its own.
package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral-go/corral/internal/reclaim"
	"github.com/corral-go/corral/store"
)

// DefaultTTL is the lease TTL of a session unless [WithTTL] says otherwise.
// A session whose client cannot renew its lease for this long ends with
// [store.ErrSessionExpired].
const DefaultTTL = 10 * time.Second

// DefaultAttemptTimeout bounds each request the Store sends unless
// [WithAttemptTimeout] says otherwise; see Bounds in the package doc.
//
// Measured on loopback (3-member embedded cluster, race build, two shared
// cores): under 8 contenders cycling a lock, the slowest of 9,300 healthy
// requests took 264 ms (p99.9 122 ms). After the leader was killed, a
// release retried on ErrDisconnected was applied 1.0–2.0 s later with this
// bound, 2.0 s with 2 s, 1.1–1.5 s with 500 ms, and 7.0–8.1 s with none
// (the server's request timeout). One second keeps about four times the
// slowest healthy request and a failover near the election's own length.
const DefaultAttemptTimeout = time.Second

var (
	_ store.Store           = (*Store)(nil)
	_ store.ChildrenWatcher = (*Store)(nil)
	_ store.NodeWatcher     = (*Store)(nil)
	_ store.CreateLister    = (*Store)(nil)
	_ store.WindowLister    = (*Store)(nil)
	_ store.SeqDeleter      = (*Store)(nil)
	_ store.FrontDeleter    = (*Store)(nil)
)

// Option configures a Store.
type Option func(*options)

type options struct {
	ttl     time.Duration
	attempt time.Duration
	logger  *slog.Logger
	chroot  string // "" for none
	invalid string // what an option got wrong
	delay   time.Duration
	// expiryHook, when set, runs in the keepalive loop when its timer
	// finds the deadline passed, before it ends the session (tests only,
	// see export_test.go).
	expiryHook func()
}

func newOptions(opts []Option) (options, error) {
	o := options{ttl: DefaultTTL, attempt: DefaultAttemptTimeout, delay: DefaultReclaimDelay}
	for _, opt := range opts {
		opt(&o)
	}
	if o.invalid != "" {
		return o, fmt.Errorf("etcdstore: %w: %s", store.ErrInvalidArgument, o.invalid)
	}
	if o.ttl <= 0 {
		return o, fmt.Errorf("etcdstore: %w: TTL %v", store.ErrInvalidArgument, o.ttl)
	}
	if o.attempt <= 0 {
		return o, fmt.Errorf("etcdstore: %w: attempt timeout %v", store.ErrInvalidArgument, o.attempt)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// WithTTL sets the TTL of the session's lease, rounded up to whole seconds
// (etcd's unit). The server may raise it to its minimum (by default 2 s,
// 1.5 election timeouts). A longer TTL survives longer disconnections; a
// shorter one hands a dead client's locks over sooner. It must be positive.
func WithTTL(ttl time.Duration) Option {
	return func(o *options) { o.ttl = ttl }
}

// WithAttemptTimeout sets how long the Store waits for the reply to one
// request before it gives the attempt up (default [DefaultAttemptTimeout];
// see Bounds in the package doc). Shorter gets a caller past a stalled
// server sooner; it must stay well above the slowest healthy request, or
// calls fail with [store.ErrDisconnected] on a loaded but healthy cluster.
// It must be positive.
func WithAttemptTimeout(d time.Duration) Option {
	return func(o *options) { o.attempt = d }
}

// WithLogger sends the Store's debug messages to l (by default they are
// discarded). [Dial] also gives l to the client it makes, unless its Config
// sets Logger or LogConfig; the client's messages then arrive at debug
// level whatever their own, with logger=etcd-client and their level as
// etcd_level, because each concerns one failed attempt that the Store
// reports itself (clientv3 warns about every cancelled call).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// Store is one etcd session, implementing [store.Store],
// [store.ChildrenWatcher], [store.CreateLister], [store.WindowLister] and
// [store.SeqDeleter]. It is safe for
// concurrent use. Create it with [Open] or [Dial]; the zero Store is not
// usable.
//
// A Store runs three goroutines until it is closed or its session ends: the
// lease renewal loop, a watcher of the client's connection state, and one
// standing watch that keeps the client's watch stream open (the server
// holds one idle watcher for it). Each pending ExistsW or ChildrenW adds
// one more until its event is delivered, and each abandoned create one
// until it is undone. Close waits for all of them.
type Store struct {
	later      reclaim.Later // the directories this Store emptied, until their delay is up (reclaim.go)
	dirs       dirs          // the directories it knows to exist (reclaim.go)
	cli        *clientv3.Client
	kv         clientv3.KV      // cli's, below the chroot if any
	watcher    clientv3.Watcher // cli's, below the chroot if any
	chroot     string
	ownKeys    string // the prefix of the adapter's own keys; see keys.go
	anchorKey  string
	ownClient  bool
	lease      clientv3.LeaseID
	ttl        time.Duration // as granted by the server
	attempt    time.Duration // bound of one request
	log        *slog.Logger
	fenceKey   string
	expiryHook func()

	// closeClient, when Dial made the client, frees the context it
	// gave the client (see tlsProbe).
	closeClient context.CancelFunc

	// ctx is the session's lifetime; its cause says how it ended.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// kick asks the keepalive loop for an early renewal, when an RPC or
	// the connection state suggests the connection broke.
	kick chan struct{}

	mu          gosync.Mutex
	closed      bool
	deadline    time.Time     // the session ends then unless renewed; see session.go
	lastRenewal time.Time     // send time of the latest acknowledged renewal
	disc        chan struct{} // the channel Disconnected returns now
	discClosed  bool
	fence       int64 // the fence's ModRevision as last seen; see create.go

	names names // names of ephemeral sequential nodes to use again; see names.go

	wg        gosync.WaitGroup // background goroutines: keepalive, watches, undos
	undos     gosync.WaitGroup // the undos alone, for tests
	closeOnce gosync.Once
}

// Open starts a session on cli: it grants a lease and keeps it alive until
// the Store is closed or the lease is lost. It blocks until the lease is
// granted (and, after a slow Grant, renewed; see Sessions in the package
// doc) or ctx ends; attempts given up after the attempt timeout are
// retried. When ctx ends first, the error wraps ctx's error and says which
// endpoints were tried and what the connection was doing. Refused
// credentials or certificates fail with [store.ErrAuth], a root the user
// may not read with [store.ErrPermission] (see Credentials, TLS and roles
// in the package doc). A nil cli fails with [store.ErrInvalidArgument].
// The Store never closes cli: close it after the Store.
func Open(ctx context.Context, cli *clientv3.Client, opts ...Option) (*Store, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if cli == nil {
		return nil, fmt.Errorf("etcdstore: open: %w: nil client", store.ErrInvalidArgument)
	}
	return open(ctx, cli, o, nil)
}

func open(ctx context.Context, cli *clientv3.Client, o options, diag *dialDiag) (*Store, error) {
	s := &Store{
		cli:        cli,
		kv:         cli.KV,
		watcher:    cli.Watcher,
		chroot:     o.chroot,
		ownKeys:    ownKeys,
		attempt:    o.attempt,
		log:        o.logger,
		expiryHook: o.expiryHook,
		kick:       make(chan struct{}, 1),
		disc:       make(chan struct{}),
	}
	s.later.Delay, s.later.Remove = o.delay, s.reclaimAll
	if s.chroot != "" {
		s.kv = namespace.NewKV(cli.KV, s.chroot)
		s.watcher = namespace.NewWatcher(cli.Watcher, s.chroot)
		s.ownKeys = "/" + ownKeys
	}
	s.anchorKey = s.ownKeys + "anchor"
	secs := int64((o.ttl + time.Second - 1) / time.Second)
	if err := s.check(ctx, diag); err != nil {
		return nil, err
	}
	if err := s.establish(ctx, secs, diag); err != nil {
		return nil, err
	}
	s.fenceKey = fmt.Sprintf("%sfence/%x", s.ownKeys, int64(s.lease))
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	// Read before the keepalive loop can move it.
	s.log.Debug("etcdstore: session opened", "lease", s.leaseHex(), "ttl", s.ttl, "deadline_in", time.Until(s.deadline))
	s.wg.Add(3)
	go s.keepAlive()
	go s.watchConn()
	go s.anchor()
	return s, nil
}

// establish grants the session's lease and anchors its deadline, retrying
// given-up attempts until ctx ends.
func (s *Store) establish(ctx context.Context, secs int64, diag *dialDiag) error {
	var last error
	for i := 0; ; i++ {
		if i > 0 {
			if err := sleep(ctx, backoff(i)); err != nil {
				return unreachable(ctx, s.cli, diag, last)
			}
		}
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, s.attempt)
		resp, err := s.cli.Grant(actx, secs)
		cancel()
		if err != nil {
			if refusal := tlsRefusal(err, diag); refusal != nil {
				return fmt.Errorf("etcdstore: open: %w", refusal)
			}
			if ctx.Err() != nil {
				return unreachable(ctx, s.cli, diag, err)
			}
			if err := classify(ctx, err); !errors.Is(err, store.ErrDisconnected) {
				return fmt.Errorf("etcdstore: open: grant lease: %w", err)
			}
			s.log.Debug("etcdstore: grant attempt failed", "err", err)
			last = err
			continue
		}
		s.lease, s.ttl = resp.ID, time.Duration(resp.TTL)*time.Second
		s.deadline = sent.Add(s.ttl)
		if time.Until(s.deadline) >= s.ttl-s.ttl/3 {
			return nil
		}
		// The Grant's reply took more than a third of the TTL: the
		// deadline it gives is near or past, though the server only
		// counts the TTL from its own, later grant. Anchor on a
		// renewal sent now instead.
		s.log.Debug("etcdstore: slow grant; renewing at once", "lease", s.leaseHex(), "took", time.Since(sent))
		sent = time.Now()
		actx, cancel = context.WithTimeout(ctx, s.attempt)
		kresp, err := s.cli.KeepAliveOnce(actx, s.lease)
		cancel()
		if err == nil {
			if d := sent.Add(time.Duration(kresp.TTL) * time.Second); time.Now().Before(d) {
				s.deadline = d
				return nil
			}
			err = errors.New("renewal answered after its TTL")
		}
		if ctx.Err() != nil {
			return unreachable(ctx, s.cli, diag, err)
		}
		// The lease, which holds no key, expires by itself.
		s.log.Debug("etcdstore: renewal after a slow grant failed; granting again", "lease", s.leaseHex(), "err", err)
		last = err
	}
}

// backoff is the wait before the i-th retry (from 1) of a request given
// up: 10 ms, doubling, at most 1 s.
func backoff(i int) time.Duration {
	return min(10*time.Millisecond<<min(i-1, 7), time.Second)
}

// sleep waits for d or ctx's end, and returns ctx's cause then.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Client returns the etcd client the Store uses. It is not confined to the
// Store's chroot: its keys are the server's.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Lease returns the ID of the session's lease.
func (s *Store) Lease() clientv3.LeaseID { return s.lease }

// TTL returns the lease TTL the server granted.
func (s *Store) TTL() time.Duration { return s.ttl }

// SessionID returns the session's lease ID, the Owner of its ephemeral
// nodes.
func (s *Store) SessionID() int64 { return int64(s.lease) }

func (s *Store) leaseHex() string { return fmt.Sprintf("%x", int64(s.lease)) }

// Context returns a context that is cancelled when the session ends, with
// cause [store.ErrSessionExpired] (wrapped, saying why) when the lease was
// lost or could not be renewed in time, or [store.ErrClosed] after Close.
// It checks the session's deadline first: once the deadline has passed, the
// context it returns is cancelled, even if no timer has noticed yet.
func (s *Store) Context() context.Context {
	s.mu.Lock()
	ended := s.expireLocked()
	s.mu.Unlock()
	if ended {
		s.logEnded()
	}
	return s.ctx
}

// Disconnected returns a channel that is closed when a lease renewal fails
// (the connection is lost or the cluster has no leader) while the lease may
// still be alive, and when the session ends (checked against the deadline
// first, as Context does). After a successful renewal a new call returns a
// new, open channel.
func (s *Store) Disconnected() <-chan struct{} {
	s.mu.Lock()
	ended := s.expireLocked()
	disc := s.disc
	s.mu.Unlock()
	if ended {
		s.logEnded()
	}
	return disc
}

// Close ends the session: it stops the keepalive and the undoing of
// abandoned creates, cancels Context with [store.ErrClosed], revokes the
// lease (which deletes the session's ephemeral nodes and its fence) and
// waits for the Store's goroutines, whose pending watches deliver an event
// with Err. It blocks for at most min(TTL, 5 s) when the cluster cannot be
// reached; the lease then expires by itself. A persistent node whose
// abandoned create was still being undone may remain. Close is idempotent:
// later calls return nil, and every other method then fails with
// [store.ErrClosed].
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		reclaim.Flush(s.later.Stop(), s.reclaimAll, min(s.attempt, maxFlush))
		s.mu.Lock()
		s.closed = true
		s.cancel(store.ErrClosed)
		s.setDisconnectedLocked()
		s.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), min(s.ttl, 5*time.Second))
		defer cancel()
		if _, rerr := s.cli.Revoke(ctx, s.lease); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			err = fmt.Errorf("etcdstore: close: revoke lease %x: %w", int64(s.lease), classify(ctx, rerr))
		}
		s.wg.Wait()
		if s.ownClient {
			s.cli.Close()
		}
		if s.closeClient != nil {
			s.closeClient()
		}
	})
	return err
}

// sessionErr checks the deadline and returns the error every call fails
// with once the session has ended, or nil.
func (s *Store) sessionErr() error {
	s.mu.Lock()
	ended := s.expireLocked()
	closed := s.closed
	s.mu.Unlock()
	if ended {
		s.logEnded()
	}
	if s.ctx.Err() == nil {
		return nil
	}
	if closed {
		return store.ErrClosed
	}
	return context.Cause(s.ctx)
}

// end ends the session with cause, unless it has ended already.
func (s *Store) end(cause error) {
	s.mu.Lock()
	ended := s.endLocked(cause)
	s.mu.Unlock()
	if ended {
		s.logEnded()
	}
}

// endLocked ends the session with cause, unless it has ended already, and
// reports whether it did. s.mu is held; the caller logs the end once it
// has let go of s.mu (a handler may call the Store).
func (s *Store) endLocked(cause error) bool {
	if s.ctx.Err() != nil {
		return false
	}
	s.cancel(cause)
	s.setDisconnectedLocked()
	return true
}

func (s *Store) logEnded() {
	s.log.Debug("etcdstore: session ended", "lease", s.leaseHex(), "cause", context.Cause(s.ctx))
}

func (s *Store) setDisconnectedLocked() {
	if !s.discClosed {
		close(s.disc)
		s.discClosed = true
	}
}

// probe asks the keepalive loop to renew the lease now.
func (s *Store) probe() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// begin checks that the session is alive and returns a context for one
// call: it ends with ctx or, with the session's cause, when the session
// ends, so no call outlives the session it was made on.
//
// While the client is disconnected, begin first renews the lease (one
// attempt, within ctx): a call that succeeds after a disconnection has seen
// the session alive, and Disconnected has been reset, by the time it
// returns.
func (s *Store) begin(ctx context.Context) (context.Context, func(), error) {
	if err := s.sessionErr(); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	done := func() { stop(); cancel(nil) }
	if s.isDisconnected() {
		rctx, rcancel := context.WithTimeout(cctx, s.attempt)
		err := s.renew(rctx)
		rcancel()
		if err != nil {
			done()
			if serr := s.sessionErr(); serr != nil {
				return nil, nil, serr
			}
			if ctx.Err() != nil {
				return nil, nil, classify(ctx, err)
			}
			return nil, nil, fmt.Errorf("%w: renew lease: %w", store.ErrDisconnected, err)
		}
	}
	return cctx, done, nil
}

func (s *Store) isDisconnected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discClosed
}

// do sends one request of a call made with ctx, as one attempt: it gives
// the request up after the attempt timeout, and turns a reply that arrives
// after the session's deadline into the session's end.
func do[T any](s *Store, ctx context.Context, rpc func(context.Context) (T, error)) (T, error) {
	actx, cancel := context.WithTimeout(ctx, s.attempt)
	defer cancel()
	v, err := rpc(actx)
	switch {
	case err == nil:
		if serr := s.sessionErr(); serr != nil {
			var zero T
			return zero, serr
		}
	case ctx.Err() == nil && actx.Err() != nil:
		s.log.Debug("etcdstore: attempt given up", "timeout", s.attempt, "err", err)
		err = fmt.Errorf("%w: no reply within the attempt timeout (%v): %w", store.ErrDisconnected, s.attempt, err)
	}
	return v, err
}

// fail turns the error of a call made with ctx into the contract's terms:
// the session's end wins, then ctx's own end, then what the backend said.
func (s *Store) fail(ctx context.Context, op, p string, err error) error {
	if serr := s.sessionErr(); serr != nil {
		return fmt.Errorf("etcdstore: %s %q: %w", op, p, serr)
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The server no longer knows our lease: the session is over,
		// whatever the keepalive loop has seen so far.
		s.end(fmt.Errorf("%w: lease not found by %s", store.ErrSessionExpired, op))
		return fmt.Errorf("etcdstore: %s %q: %w", op, p, store.ErrSessionExpired)
	}
	err = classify(ctx, err)
	if errors.Is(err, store.ErrDisconnected) {
		s.probe()
	}
	return fmt.Errorf("etcdstore: %s %q: %w", op, p, err)
}

// classify wraps the sentinel an etcd client error means, so that every
// error a call can meet matches one: ctx's error when ctx ended; ErrAuth or
// ErrPermission for refused credentials or rights; ErrTooLarge for a
// request over the server's or gRPC's size limit; ErrInvalidArgument for a
// request the server refuses as malformed (etcd says InvalidArgument or
// OutOfRange: a lease TTL too large); ErrSessionExpired for a lease the
// server no longer knows. Everything else leaves the outcome unknown or
// says the cluster cannot serve the call now, which a later attempt may
// change, and is ErrDisconnected: lost connections, timeouts and
// cancellations that are not ctx's, no leader, a member that is not the
// leader or not ready (FailedPrecondition), too many requests or no space
// (ResourceExhausted), a proposal dropped between leaders, and every code
// etcd does not document for the call (Unknown, such as a server's own
// "context deadline exceeded", Internal, DataLoss, Unimplemented, and
// errors with no code at all).
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != ctx.Err() && errors.Is(err, cause) {
			// ctx's own cause, passed on from a ctx derived from it:
			// the caller gets ctx.Err(), as from the other stores,
			// and the cause only in the text.
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if matchesSentinel(err) {
		return err
	}
	code := codeOf(err)
	if sentinel := authSentinel(err, code); sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	switch {
	case errors.Is(err, rpctypes.ErrRequestTooLarge), isGRPCTooLarge(err, code):
		return fmt.Errorf("%w: %w", store.ErrTooLarge, err)
	case code == codes.InvalidArgument, code == codes.OutOfRange:
		return fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: %w", store.ErrSessionExpired, err)
	}
	return fmt.Errorf("%w: %w", store.ErrDisconnected, err)
}

// matchesSentinel reports whether err already matches a sentinel of the
// contract (an error the Store made itself).
func matchesSentinel(err error) bool {
	for _, s := range []error{
		store.ErrDisconnected, store.ErrSessionExpired, store.ErrClosed,
		store.ErrAuth, store.ErrPermission, store.ErrTooLarge, store.ErrInvalidArgument,
	} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// isGRPCTooLarge reports whether err is gRPC's own refusal of a message
// over its size limit, on either side (it has no error value to match).
func isGRPCTooLarge(err error, code codes.Code) bool {
	return code == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max")
}

// codeOf returns the gRPC code of an etcd client error.
func codeOf(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		// clientv3 turns the server's errors into EtcdError, which
		// keeps the gRPC code apart from status.
		return ee.Code()
	}
	return status.Code(err)
}

// Get returns the node at p, or ErrNoNode. The root has no data and Seq 0.
func (s *Store) Get(ctx context.Context, p string) (store.Node, error) {
	if err := store.ValidatePath(p); err != nil {
		return store.Node{}, err
	}
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return store.Node{}, fmt.Errorf("etcdstore: get %q: %w", p, err)
	}
	defer done()
	if p == "/" {
		return store.Node{Path: "/"}, nil
	}
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return s.kv.Get(ctx, p)
	})
	if err != nil {
		return store.Node{}, s.fail(ctx, "get", p, err)
	}
	if len(resp.Kvs) == 0 {
		return store.Node{}, fmt.Errorf("etcdstore: get %q: %w", p, store.ErrNoNode)
	}
	return node(resp.Kvs[0]), nil
}

// Set replaces the data of the node at p if its Version is version, or
// whatever it is when version is store.AnyVersion, keeping the node's lease.
func (s *Store) Set(ctx context.Context, p string, data []byte, version int64) (store.Node, error) {
	if err := store.ValidatePath(p); err != nil {
		return store.Node{}, err
	}
	if p == "/" {
		return store.Node{}, fmt.Errorf("etcdstore: set %q: %w: the root holds no data", p, store.ErrInvalidPath)
	}
	if err := store.ValidateData(data); err != nil {
		return store.Node{}, err
	}
	if version < store.AnyVersion {
		return store.Node{}, fmt.Errorf("etcdstore: set %q: %w: version %d", p, store.ErrInvalidArgument, version)
	}
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return store.Node{}, fmt.Errorf("etcdstore: set %q: %w", p, err)
	}
	defer done()
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(p), ">", 0)}
	if version != store.AnyVersion {
		cmps = append(cmps, clientv3.Compare(clientv3.Version(p), "=", version+1))
	}
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.kv.Txn(ctx).If(cmps...).
			Then(clientv3.OpPut(p, string(data), clientv3.WithIgnoreLease()), clientv3.OpGet(p)).
			Else(clientv3.OpGet(p, clientv3.WithKeysOnly())).
			Commit()
	})
	if err != nil {
		return store.Node{}, s.fail(ctx, "set", p, err)
	}
	if !resp.Succeeded {
		if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
			return store.Node{}, fmt.Errorf("etcdstore: set %q: %w", p, store.ErrNoNode)
		}
		return store.Node{}, fmt.Errorf("etcdstore: set %q: %w", p, store.ErrBadVersion)
	}
	return node(resp.Responses[1].GetResponseRange().Kvs[0]), nil
}

// Delete deletes the node at p: ErrNoNode when it does not exist,
// ErrNotEmpty when it has children (checked in the same transaction). An
// attempt given up after the attempt timeout fails with ErrDisconnected:
// the node may or may not have been deleted.
func (s *Store) Delete(ctx context.Context, p string) error {
	return s.delete(ctx, p, 0, byName)
}

// DeleteSeq deletes the node at p if its Seq (CreateRevision) is seq, in
// one transaction that also checks that it has no children: ErrNoNode when
// there is no node at p or another one, ErrNotEmpty when it has children.
// An attempt given up after the attempt timeout fails with ErrDisconnected:
// the node may or may not have been deleted. Once this session's node is
// known to be gone, its name may be used again (see Names in the package
// doc).
func (s *Store) DeleteSeq(ctx context.Context, p string, seq int64) error {
	return s.delete(ctx, p, seq, bySeq)
}

// DeleteFront is DeleteSeq that, in the same transaction, records seq as
// the last front release of p's parent (see [store.FrontDeleter]). The
// record is a key of the adapter's own (see WithChroot), attached to this
// session's lease: it goes when the session does, and a waiter that finds
// no record reads the contenders again, as it would without one.
func (s *Store) DeleteFront(ctx context.Context, p string, seq int64) error {
	return s.delete(ctx, p, seq, front)
}

// FollowsFront reports whether the node at p has Seq seq and the record of
// p's parent is prev, with one read-only transaction of two point reads;
// see [store.FrontDeleter].
func (s *Store) FollowsFront(ctx context.Context, p string, seq, prev int64) (bool, error) {
	if err := store.ValidatePath(p); err != nil {
		return false, err
	}
	if p == "/" {
		return false, nil
	}
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return false, fmt.Errorf("etcdstore: read %q: %w", p, err)
	}
	defer done()
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.kv.Txn(ctx).Then(clientv3.OpGet(p, clientv3.WithKeysOnly()), clientv3.OpGet(s.frontKey(p))).Commit()
	})
	if err != nil {
		return false, s.fail(ctx, "read", p, err)
	}
	own, rec := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(own) == 0 || own[0].CreateRevision != seq || len(rec) == 0 {
		return false, nil
	}
	return string(rec[0].Value) == strconv.FormatInt(prev, 10), nil
}

// frontKey is the key of the front record of p's parent.
func (s *Store) frontKey(p string) string {
	return s.ownKeys + "front" + store.Parent(p)
}

// How delete picks the node it deletes.
const (
	byName = iota // the node at the path, whichever it is
	bySeq         // only the node with the given Seq
	front         // as bySeq, and record it as its parent's front release
)

// delete is Delete, DeleteSeq or DeleteFront, as how says: one transaction
// that deletes p if it has no children (and, but for byName, if its
// CreateRevision is seq), else reads p to tell why not.
func (s *Store) delete(ctx context.Context, p string, seq int64, how int) error {
	if err := store.ValidatePath(p); err != nil {
		return err
	}
	if p == "/" {
		return fmt.Errorf("etcdstore: delete %q: %w: the root cannot be deleted", p, store.ErrInvalidPath)
	}
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("etcdstore: delete %q: %w", p, err)
	}
	defer done()
	bySeq := how != byName
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(p+"/"), "=", 0).WithPrefix()}
	if bySeq {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(p), "=", seq))
	}
	// The front record is written unless the delete empties the
	// directory, which then goes with its record (see reclaim.go).
	var rec []clientv3.Op
	if how == front {
		rec = append(rec, clientv3.OpPut(s.frontKey(p), strconv.FormatInt(seq, 10), clientv3.WithLease(s.lease)))
	}
	// A directory deleted by name takes its marker and record along.
	s.dirs.drop(p)
	then := s.dropDir(p)
	op, dirs, ok := s.reclaimNow(p, rec...)
	if ok {
		then = append(then, op)
	} else {
		then = append(then, rec...)
	}
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.kv.Txn(ctx).If(cmps...).Then(then...).Else(clientv3.OpGet(p, clientv3.WithKeysOnly())).Commit()
	})
	if err == nil && resp.Succeeded {
		s.deleted(ctx, p, resp, ok, dirs)
	}
	// A name whose node is gone is free again (see names) when the node is
	// known to be the one this session made; a delete by name cannot tell
	// which node it deleted, so it drops the name for good.
	gone := func() {
		if bySeq {
			s.names.deleted(p, seq)
		} else {
			s.names.forget(p)
		}
	}
	switch {
	case err != nil:
		if !bySeq {
			s.names.forget(p)
		}
		return s.fail(ctx, "delete", p, err)
	case resp.Succeeded && resp.Responses[0].GetResponseDeleteRange().Deleted > 0:
		gone()
		return nil
	case resp.Succeeded:
		gone()
		return fmt.Errorf("etcdstore: delete %q: %w", p, store.ErrNoNode)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 && (!bySeq || kvs[0].CreateRevision == seq) {
		return fmt.Errorf("etcdstore: delete %q: %w", p, store.ErrNotEmpty)
	}
	gone()
	if bySeq {
		return fmt.Errorf("etcdstore: delete %q: %w: no node with Seq %d", p, store.ErrNoNode, seq)
	}
	return fmt.Errorf("etcdstore: delete %q: %w", p, store.ErrNoNode)
}

// ChildrenUpTo returns the window of the children of p that ends at seq;
// see [store.WindowLister]. It is one range of p's subtree sorted by
// CreateRevision, with CreateRevision at most seq and at most n keys: what
// the server sends does not grow with the number of children (it still
// reads them all to sort them). Keys deeper than a child share the range and
// are skipped, so a window may hold fewer than n children without being
// complete.
func (s *Store) ChildrenUpTo(ctx context.Context, p string, seq int64, n int) ([]store.Child, bool, error) {
	if err := store.ValidatePath(p); err != nil {
		return nil, false, err
	}
	if n < 1 {
		return nil, false, fmt.Errorf("etcdstore: children %q: %w: window of %d", p, store.ErrInvalidArgument, n)
	}
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("etcdstore: children %q: %w", p, err)
	}
	defer done()
	if seq < 1 {
		return nil, true, nil
	}
	key, opts := windowRange(p, seq, n)
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return s.kv.Get(ctx, key, opts...)
	})
	if err != nil {
		return nil, false, s.fail(ctx, "children", p, err)
	}
	kids, complete := window(p, (*etcdserverpb.RangeResponse)(resp), n)
	return kids, complete, nil
}

// windowRange returns the range of the last n keys below p, by
// CreateRevision, whose CreateRevision is at most maxRev (any, when 0),
// highest first.
func windowRange(p string, maxRev int64, n int) (string, []clientv3.OpOption) {
	opts := []clientv3.OpOption{clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
		clientv3.WithLimit(int64(n))}
	if maxRev > 0 {
		opts = append(opts, clientv3.WithMaxCreateRev(maxRev))
	}
	if p == "/" {
		return "/", append(opts, clientv3.WithPrefix())
	}
	return p + "/", append(opts, clientv3.WithRange(p+"0"))
}

// window picks the direct children of p out of a read of windowRange,
// sorted as Children sorts them, and tells whether the read reached the
// first key below p.
func window(p string, resp *etcdserverpb.RangeResponse, n int) ([]store.Child, bool) {
	kids := make([]store.Child, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if name, ok := childName(p, kv.Key); ok {
			kids = append(kids, store.Child{Name: name, Seq: kv.CreateRevision})
		}
	}
	slices.SortFunc(kids, cmpChild)
	return kids, !resp.More && len(resp.Kvs) <= n
}

// childName returns the name of the child of p that key is, if it is one.
func childName(p string, key []byte) (string, bool) {
	prefix := p + "/"
	if p == "/" {
		prefix = "/"
	}
	if len(key) <= len(prefix) || string(key[:len(prefix)]) != prefix {
		return "", false
	}
	name := key[len(prefix):]
	if bytes.IndexByte(name, '/') >= 0 {
		return "", false
	}
	return string(name), true
}

// Children returns the direct children of p sorted by Seq (CreateRevision),
// then name, or ErrNoNode. It reads p and its whole subtree in one range.
// A path that is no key but has keys below it lists them as a directory
// would, so that a corral observer sees the contenders of an election or
// lock run only by etcd's concurrency package, which never writes its prefix
// key; Get still reports such a path as missing.
func (s *Store) Children(ctx context.Context, p string) ([]store.Child, error) {
	if err := store.ValidatePath(p); err != nil {
		return nil, err
	}
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: children %q: %w", p, err)
	}
	defer done()
	key, opts := listRange(p)
	resp, err := do(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return s.kv.Get(ctx, key, opts...)
	})
	if err != nil {
		return nil, s.fail(ctx, "children", p, err)
	}
	exists, kids := children(p, resp.Kvs)
	if !exists {
		return nil, fmt.Errorf("etcdstore: children %q: %w", p, store.ErrNoNode)
	}
	return kids, nil
}

// listRange returns the range that holds p and its subtree: [p, p+"0"),
// since '0' follows '/'. It also holds siblings of p whose name continues
// p's with a byte below '0' ("p-x", "p.x"); children skips them. For the
// root it is every key that starts with '/'.
func listRange(p string) (string, []clientv3.OpOption) {
	if p == "/" {
		return "/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
	}
	return p, []clientv3.OpOption{clientv3.WithRange(p + "0"), clientv3.WithKeysOnly()}
}

// children picks p and its direct children out of the keys of listRange(p).
// etcd returns them sorted by key; they are usually sorted by create
// revision too (names made in order), so the sort is most often a check.
func children(p string, kvs []*mvccpb.KeyValue) (exists bool, kids []store.Child) {
	prefix := p + "/"
	if p == "/" {
		exists, prefix = true, "/"
	}
	kids = make([]store.Child, 0, len(kvs))
	for _, kv := range kvs {
		k := kv.Key
		if string(k) == p {
			exists = true
			continue
		}
		if len(k) <= len(prefix) || string(k[:len(prefix)]) != prefix {
			continue
		}
		// A key below p makes p a directory even when p is no key:
		// etcd's own concurrency recipes never write their prefix key.
		exists = true
		name := k[len(prefix):]
		if bytes.IndexByte(name, '/') >= 0 {
			continue
		}
		kids = append(kids, store.Child{Name: string(name), Seq: kv.CreateRevision})
	}
	if !slices.IsSortedFunc(kids, cmpChild) {
		slices.SortFunc(kids, cmpChild)
	}
	return exists, kids
}

func cmpChild(a, b store.Child) int {
	if a.Seq != b.Seq {
		return cmpInt(a.Seq, b.Seq)
	}
	return strings.Compare(a.Name, b.Name)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func node(kv *mvccpb.KeyValue) store.Node {
	return store.Node{
		Path:    string(kv.Key),
		Data:    kv.Value,
		Seq:     kv.CreateRevision,
		Version: kv.Version - 1,
		Owner:   kv.Lease,
	}
}
