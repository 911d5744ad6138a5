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
//     transaction as the node; a key attached to a lease cannot be a parent.
//   - Node.Seq is the key's CreateRevision, for every node. So a contender
//     written under the same prefix by etcd's own concurrency.Mutex or
//     concurrency.Election, or by etcdctl lock, sorts correctly beside
//     corral's. A sequential node's name is the requested name followed by
//     16 random hexadecimal digits.
//   - Node.Version is the key's Version minus one (0 after Create).
//
// The root "/" is not a key: it always exists, has no data, never changes
// and cannot be written or deleted. Keys that do not start with '/' are
// invisible to the adapter.
//
// A Children call reads every key under the node, not only its direct
// children, so it costs in proportion to the node's whole subtree; the
// recipes keep their directories flat.
//
// # Sessions
//
// The Store renews its lease every TTL/3. The session ends, and Context is
// cancelled with [store.ErrSessionExpired], at the first of: a renewal
// answered "lease not found" (revoked, or expired on the server), or TTL
// elapsed since the sending of the last renewal the server acknowledged.
// At that moment the server cannot have expired the lease yet, so no other
// session can have been handed this one's locks while it still believed it
// held them. A failed renewal closes the Disconnected channel and renewals
// are then retried every 250 ms; meanwhile every call first renews the
// lease (waiting for the connection within its ctx), so a call that
// succeeds after a disconnection has seen its session alive.
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
// stream from a compacted revision re-reads and reports what changed.
package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	gosync "sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral-go/corral/store"
)

// DefaultTTL is the lease TTL of a session unless [WithTTL] says otherwise.
// A session whose client cannot renew its lease for this long ends with
// [store.ErrSessionExpired].
const DefaultTTL = 10 * time.Second

var (
	_ store.Store           = (*Store)(nil)
	_ store.ChildrenWatcher = (*Store)(nil)
	_ store.CreateLister    = (*Store)(nil)
)

// Option configures a Store.
type Option func(*options)

type options struct {
	ttl time.Duration
}

// WithTTL sets the TTL of the session's lease, rounded up to whole seconds
// (etcd's unit). The server may raise it to its minimum (by default 2 s,
// 1.5 election timeouts). A longer TTL survives longer disconnections; a
// shorter one hands a dead client's locks over sooner.
func WithTTL(ttl time.Duration) Option {
	return func(o *options) { o.ttl = ttl }
}

// Store is one etcd session, implementing [store.Store],
// [store.ChildrenWatcher] and [store.CreateLister]. It is safe for
// concurrent use. Create it with [Open] or [Dial]; the zero Store is not
// usable.
//
// A Store runs three goroutines until it is closed or its session ends: the
// lease renewal loop, a watcher of the client's connection state, and one
// standing watch that keeps the client's watch stream open (the server
// holds one idle watcher for it). Each pending ExistsW or ChildrenW adds
// one more until its event is delivered. Close waits for all of them.
type Store struct {
	cli       *clientv3.Client
	ownClient bool
	lease     clientv3.LeaseID
	ttl       time.Duration // as granted by the server

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

	wg        gosync.WaitGroup // background goroutines: keepalive, watches
	closeOnce gosync.Once
}

// Open starts a session on cli: it grants a lease and keeps it alive until
// the Store is closed or the lease is lost. It blocks until the lease is
// granted or ctx ends. The Store never closes cli: close it after the Store.
func Open(ctx context.Context, cli *clientv3.Client, opts ...Option) (*Store, error) {
	o := options{ttl: DefaultTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if o.ttl <= 0 {
		return nil, fmt.Errorf("etcdstore: %w: TTL %v", store.ErrInvalidArgument, o.ttl)
	}
	secs := int64((o.ttl + time.Second - 1) / time.Second)
	sent := time.Now()
	resp, err := cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: grant lease: %w", classify(ctx, err))
	}
	s := &Store{
		cli:   cli,
		lease: resp.ID,
		ttl:   time.Duration(resp.TTL) * time.Second,
		kick:  make(chan struct{}, 1),
		disc:  make(chan struct{}),
	}
	s.deadline = sent.Add(s.ttl)
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.wg.Add(3)
	go s.keepAlive()
	go s.watchConn()
	go s.anchor()
	return s, nil
}

// Dial creates a client from cfg and opens a session on it as [Open] does.
// The Store owns that client and closes it in Close.
func Dial(ctx context.Context, cfg clientv3.Config, opts ...Option) (*Store, error) {
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: dial: %w", err)
	}
	s, err := Open(ctx, cli, opts...)
	if err != nil {
		cli.Close()
		return nil, err
	}
	s.ownClient = true
	return s, nil
}

// Client returns the etcd client the Store uses.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Lease returns the ID of the session's lease.
func (s *Store) Lease() clientv3.LeaseID { return s.lease }

// TTL returns the lease TTL the server granted.
func (s *Store) TTL() time.Duration { return s.ttl }

// SessionID returns the session's lease ID, the Owner of its ephemeral
// nodes.
func (s *Store) SessionID() int64 { return int64(s.lease) }

// Context returns a context that is cancelled when the session ends, with
// cause [store.ErrSessionExpired] (wrapped, saying why) when the lease was
// lost or could not be renewed in time, or [store.ErrClosed] after Close.
func (s *Store) Context() context.Context { return s.ctx }

// Disconnected returns a channel that is closed when a lease renewal fails
// (the connection is lost or the cluster has no leader) while the lease may
// still be alive, and when the session ends. After a successful renewal a
// new call returns a new, open channel.
func (s *Store) Disconnected() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disc
}

// Close ends the session: it stops the keepalive, cancels Context with
// [store.ErrClosed], revokes the lease (which deletes the session's
// ephemeral nodes) and waits for the Store's goroutines, whose pending
// watches deliver an event with Err. It blocks for at most min(TTL, 5 s)
// when the cluster cannot be reached; the lease then expires by itself.
// Close is idempotent: later calls return nil, and every other method then
// fails with [store.ErrClosed].
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
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
	})
	return err
}

// sessionErr returns the error every call fails with once the session has
// ended, or nil.
func (s *Store) sessionErr() error {
	if s.ctx.Err() == nil {
		return nil
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return store.ErrClosed
	}
	return context.Cause(s.ctx)
}

// end ends the session with cause, unless it has ended already.
func (s *Store) end(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel(cause)
	s.setDisconnectedLocked()
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
// While the client is disconnected, begin first renews the lease (waiting
// for the connection, within ctx): a call that succeeds after a
// disconnection has seen the session alive, and Disconnected has been
// reset, by the time it returns.
func (s *Store) begin(ctx context.Context) (context.Context, func(), error) {
	if err := s.sessionErr(); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	done := func() { stop(); cancel(nil) }
	if s.isDisconnected() {
		if err := s.renew(cctx); err != nil {
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

// classify wraps the sentinel an etcd client error means: ctx's error when
// ctx ended, ErrDisconnected when the outcome is unknown because of the
// connection or the cluster (no leader, timeout, lost reply).
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		// clientv3 turns the server's errors into EtcdError, which
		// keeps the gRPC code apart from status.
		code = ee.Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted:
		return fmt.Errorf("%w: %w", store.ErrDisconnected, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// A deadline or cancellation that is not ctx's: the client's own
		// (closing client, stream reset); the outcome is unknown.
		return fmt.Errorf("%w: %w", store.ErrDisconnected, err)
	}
	return err
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
	resp, err := s.cli.Get(ctx, p)
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
	resp, err := s.cli.Txn(ctx).If(cmps...).
		Then(clientv3.OpPut(p, string(data), clientv3.WithIgnoreLease()), clientv3.OpGet(p)).
		Else(clientv3.OpGet(p, clientv3.WithKeysOnly())).
		Commit()
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
// ErrNotEmpty when it has children (checked in the same transaction).
func (s *Store) Delete(ctx context.Context, p string) error {
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
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(p+"/"), "=", 0).WithPrefix()).
		Then(clientv3.OpDelete(p)).
		Else(clientv3.OpGet(p, clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return s.fail(ctx, "delete", p, err)
	}
	if resp.Succeeded {
		if resp.Responses[0].GetResponseDeleteRange().Deleted == 0 {
			return fmt.Errorf("etcdstore: delete %q: %w", p, store.ErrNoNode)
		}
		return nil
	}
	if resp.Responses[0].GetResponseRange().Count == 0 {
		return fmt.Errorf("etcdstore: delete %q: %w", p, store.ErrNoNode)
	}
	return fmt.Errorf("etcdstore: delete %q: %w", p, store.ErrNotEmpty)
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
	resp, err := s.cli.Get(ctx, key, opts...)
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

// ancestors returns the ancestors of p below the root, outermost first.
func ancestors(p string) []string {
	var as []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			as = append(as, p[:i])
		}
	}
	return as
}

// Create creates the node at p; see [store.Store]. A sequential node's name
// is p followed by 16 random hexadecimal digits.
//
// The create is one transaction: it checks that the node does not exist and
// that its parent exists and is not attached to a lease, and puts the node.
// When the parent is missing, a second transaction checks that no ancestor
// is attached to a lease, creates the missing ones as persistent empty keys
// and puts the node. When the reply of a sequential
// create is lost (ErrDisconnected), Create sends the same transaction again
// with the same unique name until it gets an answer, ctx ends or the session
// ends; the node it then finds under that name with this session's lease is
// the one it created, so a lost reply never makes a duplicate. When ctx ends
// first, Create waits for the transaction's outcome (at most 5 s), deletes
// the node if it was made, and returns ctx's error.
func (s *Store) Create(ctx context.Context, p string, data []byte, mode store.Mode) (store.Node, error) {
	n, _, err := s.create(ctx, p, data, mode, false)
	return n, err
}

// CreateAndList creates a node as Create does and, in the same transaction,
// lists the children of its parent as Children would right after the create.
func (s *Store) CreateAndList(ctx context.Context, p string, data []byte, mode store.Mode) (store.Node, []store.Child, error) {
	return s.create(ctx, p, data, mode, true)
}

func (s *Store) create(ctx context.Context, p string, data []byte, mode store.Mode, list bool) (store.Node, []store.Child, error) {
	if err := store.ValidateCreate(p, data, mode); err != nil {
		return store.Node{}, nil, err
	}
	octx, done, err := s.begin(ctx)
	if err != nil {
		return store.Node{}, nil, fmt.Errorf("etcdstore: create %q: %w", p, err)
	}
	defer done()

	name := p
	if mode&store.Sequential != 0 {
		name = fmt.Sprintf("%s%016x", p, rand.Uint64())
	}
	var lease clientv3.LeaseID
	if mode&store.Ephemeral != 0 {
		lease = s.lease
	}
	r := &createReq{name: name, parent: store.Parent(name), data: data, lease: lease, mode: mode, list: list}
	// The first transaction assumes the parent exists, as it does for
	// every create in a recipe's directory but the first; only when it
	// does not is the full one, which makes the missing ancestors, sent.
	full := false
	// retried is set once a transaction may have been applied without
	// our seeing its reply.
	retried := false
	backoff := 10 * time.Millisecond
	for {
		resp, err := s.commitCreate(ctx, r, full)
		if err == nil {
			n, kids, err := r.result(resp, full, retried)
			if errors.Is(err, errNoParent) {
				full = true
				continue
			}
			return n, kids, err
		}
		err = s.fail(ctx, "create", name, err)
		if mode&store.Sequential == 0 || !errors.Is(err, store.ErrDisconnected) {
			return store.Node{}, nil, err
		}
		retried = true
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-octx.Done():
			t.Stop()
			if ctx.Err() != nil {
				s.abandon(name, data, lease)
			}
			return store.Node{}, nil, s.fail(ctx, "create", name, context.Cause(octx))
		}
		backoff = min(2*backoff, time.Second)
	}
}

// createBound bounds a create transaction, and so how long a caller that
// left waits for its outcome.
const createBound = 5 * time.Second

// commitCreate sends r's transaction on a context of the session's, not
// ctx's: a create cancelled in flight can still be applied by the server
// after a delete sent behind it, so it must not be cancelled. When ctx ends
// first, commitCreate waits for the server's answer (within createBound),
// undoes the node if it was made (or, with no answer, deletes it if it is
// there) and returns ctx's error: a create abandoned by its caller leaves
// no node once it has returned.
func (s *Store) commitCreate(ctx context.Context, r *createReq, full bool) (*clientv3.TxnResponse, error) {
	type result struct {
		resp *clientv3.TxnResponse
		err  error
	}
	res := make(chan result, 1)
	cmps, then, els := r.txn(full)
	started := s.goWatch(func() {
		tctx, cancel := context.WithTimeout(s.ctx, createBound)
		defer cancel()
		resp, err := s.cli.Txn(tctx).If(cmps...).Then(then...).Else(els...).Commit()
		res <- result{resp, err}
	})
	if !started {
		return nil, s.sessionErr()
	}
	select {
	case out := <-res:
		return out.resp, out.err
	case <-ctx.Done():
	}
	out := <-res
	made := out.err == nil && out.resp.Succeeded
	unknown := out.err != nil && (r.mode&store.Sequential != 0 || r.lease != 0)
	if made || unknown {
		s.abandon(r.name, r.data, r.lease)
	}
	return nil, ctx.Err()
}

// errNoParent says that a create's parent is missing: send the full
// transaction.
var errNoParent = errors.New("etcdstore: parent missing")

// createReq is one create, sent as one of two transactions:
//
//   - fast: if the node is absent and the parent exists with no lease, put
//     the node; else read both, to tell ErrNodeExists, ErrEphemeralParent
//     and a missing parent apart.
//   - full: if the node is absent and no ancestor has a lease, put each
//     missing ancestor as a persistent empty key (a nested transaction per
//     ancestor) and the node; else read the node.
//
// Both list the parent's subtree after the put when list is set.
type createReq struct {
	name, parent string
	data         []byte
	lease        clientv3.LeaseID
	mode         store.Mode
	list         bool
}

func (r *createReq) txn(full bool) (cmps []clientv3.Cmp, then, els []clientv3.Op) {
	cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(r.name), "=", 0))
	els = append(els, clientv3.OpGet(r.name))
	switch {
	case full:
		for _, a := range ancestors(r.name) {
			cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(a), "=", 0))
			then = append(then, clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(a), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(a, "")}, nil))
		}
	case r.parent != "/":
		cmps = append(cmps,
			clientv3.Compare(clientv3.CreateRevision(r.parent), ">", 0),
			clientv3.Compare(clientv3.LeaseValue(r.parent), "=", 0))
		els = append(els, clientv3.OpGet(r.parent, clientv3.WithKeysOnly()))
	}
	if r.lease != 0 {
		then = append(then, clientv3.OpPut(r.name, string(r.data), clientv3.WithLease(r.lease)))
	} else {
		then = append(then, clientv3.OpPut(r.name, string(r.data)))
	}
	if r.list {
		key, opts := listRange(r.parent)
		then = append(then, clientv3.OpGet(key, opts...))
		els = append(els, clientv3.OpGet(key, opts...))
	}
	return cmps, then, els
}

// result interprets the reply of r.txn(full).
func (r *createReq) result(resp *clientv3.TxnResponse, full, retried bool) (store.Node, []store.Child, error) {
	var n store.Node
	if resp.Succeeded {
		n = store.Node{Path: r.name, Data: r.data, Seq: resp.Header.Revision, Owner: int64(r.lease)}
	} else {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			if !full && r.parent != "/" && len(resp.Responses[1].GetResponseRange().Kvs) == 0 {
				return store.Node{}, nil, errNoParent
			}
			return store.Node{}, nil, fmt.Errorf("etcdstore: create %q: %w", r.name, store.ErrEphemeralParent)
		}
		kv := kvs[0]
		// Only a sequential name is ours alone; finding it after a lost
		// reply, with our lease (or none, as we asked), means we made it.
		ours := retried && r.mode&store.Sequential != 0 && kv.Lease == int64(r.lease) && bytes.Equal(kv.Value, r.data)
		if !ours {
			return store.Node{}, nil, fmt.Errorf("etcdstore: create %q: %w", r.name, store.ErrNodeExists)
		}
		n = node(kv)
	}
	if !r.list {
		return n, nil, nil
	}
	listResp := resp.Responses[len(resp.Responses)-1].GetResponseRange()
	_, kids := children(r.parent, listResp.Kvs)
	return n, kids, nil
}

// abandon deletes the node a create whose ctx ended may have made, if it is
// still there as made: with lease (ours, or none for a persistent node), the
// data written, and no children.
func (s *Store) abandon(name string, data []byte, lease clientv3.LeaseID) {
	if s.ctx.Err() != nil && lease != 0 {
		return // the lease is gone or going, and its keys with it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(name), ">", 0),
		clientv3.Compare(clientv3.LeaseValue(name), "=", lease),
		clientv3.Compare(clientv3.Value(name), "=", string(data)),
		clientv3.Compare(clientv3.CreateRevision(name+"/"), "=", 0).WithPrefix(),
	).Then(clientv3.OpDelete(name)).Commit()
}
