package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	gosync "sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"

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
	// madeParentsHook, when set, runs after a create or a batch made its
	// missing parents apart (makeParents), before it goes on (tests only).
	madeParentsHook func()
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

// Store is one etcd session, implementing [store.Store] and the optional
// [store.CreateLister], [store.WindowLister], [store.SeqDeleter] and
// [store.FrontDeleter] among others (see the package doc). It is safe for
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
	later           reclaim.Later // the directories this Store emptied, until their delay is up (reclaim.go)
	dirs            dirs          // the directories it knows to exist (reclaim.go)
	cli             *clientv3.Client
	kv              clientv3.KV      // cli's, below the chroot if any
	watcher         clientv3.Watcher // cli's, below the chroot if any
	chroot          string
	ownKeys         string // the prefix of the adapter's own keys; see keys.go
	anchorKey       string
	ownClient       bool
	lease           clientv3.LeaseID
	ttl             time.Duration // as granted by the server
	attempt         time.Duration // bound of one request
	log             *slog.Logger
	fenceKey        string
	fenceGet        clientv3.Op // the read of fenceKey after a create's refusal
	expiryHook      func()
	madeParentsHook func()

	// closeClient, when Dial made the client, frees the context it
	// gave the client (see tlsProbe).
	closeClient context.CancelFunc

	// ctx is the session's lifetime; its cause says how it ended.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// watchCtx is ctx with the metadata that makes a watch fail when its
	// member has no leader: built once, as each build allocates.
	watchCtx context.Context

	// kick asks the keepalive loop for an early renewal, when an RPC or
	// the connection state suggests the connection broke.
	kick chan struct{}

	mu          gosync.Mutex
	closed      bool
	deadline    time.Time     // the session ends then unless renewed; see session.go
	lastRenewal time.Time     // send time of the latest acknowledged renewal
	disc        chan struct{} // the channel Disconnected returns now
	discClosed  bool
	fence       int64       // the fence's ModRevision as last seen; see createundo.go
	attemptCtxs attemptCtxs // the watches of attempts, for the next ones; see call.go

	names names // names of ephemeral sequential nodes to use again; see names.go
	ops   ops   // a create's operations that depend on its parent alone; see createops.go

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
		cli:             cli,
		kv:              cli.KV,
		watcher:         cli.Watcher,
		chroot:          o.chroot,
		ownKeys:         ownKeys,
		attempt:         o.attempt,
		log:             o.logger,
		expiryHook:      o.expiryHook,
		madeParentsHook: o.madeParentsHook,
		kick:            make(chan struct{}, 1),
		disc:            make(chan struct{}),
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
	s.fenceGet = clientv3.OpGet(s.fenceKey, clientv3.WithKeysOnly())
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.watchCtx = clientv3.WithRequireLeader(s.ctx)
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
			if err := s.sleep(ctx, backoff(i)); err != nil {
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
