// Package etcdbackend adapts an embedded etcd cluster (internal/testing/etcdserver)
// to storetest.Backend, so that the conformance suite and the recipe tests
// run on etcdstore sessions with real faults:
//
//   - every session's client dials the members through a loopback
//     tcpproxy of its own, so Disconnect refuses its connections (the
//     client sees servers that hang up) and Reconnect lets them through;
//   - Expire revokes the session's lease through another client, as the
//     server does when a lease expires, and returns once its keys are gone;
//   - LoseNextCreateReply arms a gRPC client interceptor on the session's
//     client: the next Txn is sent and applied by the server, then its reply
//     is thrown away, the connection is cut and the call fails with
//     codes.Unavailable, exactly what a connection lost in flight looks like;
//   - OpenHooked runs a test's functions on every unary request of the
//     session's client before it is sent and on its reply before the store
//     sees it, so a test can hold either back (a Grant that a restarting
//     server answers late, a reply that arrives late).
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package etcdbackend

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TTL is the session TTL of the stores a Backend opens unless options say
// otherwise: short enough that a fault test does not wait long, long enough
// that a loaded race build never misses a renewal.
const TTL = 5 * time.Second

var (
	_ storetest.Backend      = (*Backend)(nil)
	_ storetest.ReplyLoser   = (*Backend)(nil)
	_ storetest.Disconnector = (*Backend)(nil)
)

// Backend opens etcdstore sessions on one cluster. It is safe for
// concurrent use.
type Backend struct {
	cluster *etcdserver.Cluster
	members []*etcdserver.Member // the members sessions reach; nil: all
	opts    []etcdstore.Option
	// user and password replace the cluster's own credentials, if set.
	user, password string

	mu    gosync.Mutex
	conns map[*etcdstore.Store]*conn
}

// conn is what one session was opened with.
type conn struct {
	proxies []*tcpproxy.Proxy
	cli     *clientv3.Client
	lose    atomic.Bool
	hooks   Hooks
}

// Hooks run on every unary call of a session's client (reads,
// transactions, lease grants; not lease renewals, which travel on a
// stream), with the call's ctx and its gRPC method
// ("/etcdserverpb.Lease/LeaseGrant"): Request before the request is sent,
// Reply once the reply has arrived and before the store sees it. The call
// waits for a hook to return, so a hook that blocks holds the request or
// the reply back; it must return when ctx ends. A nil hook does nothing.
type Hooks struct {
	Request, Reply func(ctx context.Context, method string)
}

// ReclaimDelay is the reclaim delay of the sessions a Backend opens
// (etcdstore.WithReclaimDelay), shorter than the default so that tests that
// wait for a directory to go do not wait long; it is the same mechanism.
const ReclaimDelay = 100 * time.Millisecond

// ReclaimWithin implements storetest.Reclaimer: a Store removes an emptied
// directory at most a quarter of its delay after the delay; the rest is
// room for a loaded machine.
func (b *Backend) ReclaimWithin() time.Duration { return 2*ReclaimDelay + 10*time.Second }

// New returns a Backend on c whose sessions are opened with opts (after
// defaults of WithTTL(TTL) and WithReclaimDelay(ReclaimDelay)).
func New(c *etcdserver.Cluster, opts ...etcdstore.Option) *Backend {
	return &Backend{
		cluster: c,
		opts:    append([]etcdstore.Option{etcdstore.WithTTL(TTL), etcdstore.WithReclaimDelay(ReclaimDelay)}, opts...),
		conns:   map[*etcdstore.Store]*conn{},
	}
}

// NewOn is New for sessions whose clients reach members alone: the test
// of a member cut off from the others pins its holders' sessions on it.
func NewOn(c *etcdserver.Cluster, members []*etcdserver.Member, opts ...etcdstore.Option) *Backend {
	b := New(c, opts...)
	b.members = members
	return b
}

// NewAs is New for sessions authenticated as user with password, on a
// cluster with auth enabled; Expire still revokes leases as root.
func NewAs(c *etcdserver.Cluster, user, password string, opts ...etcdstore.Option) *Backend {
	b := New(c, opts...)
	b.user, b.password = user, password
	return b
}

// Cluster returns the cluster the Backend opens sessions on.
func (b *Backend) Cluster() *etcdserver.Cluster { return b.cluster }

// Open opens a session through proxies of its own. The session, its client
// and its proxies are closed when the test ends.
func (b *Backend) Open(t testing.TB) store.Store {
	t.Helper()
	s, err := b.open(Hooks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.release(s) })
	return s
}

// OpenDelayed is Open for a session whose every unary reply (reads,
// transactions, lease renewals) reaches the store delay() after the server
// sent it.
func (b *Backend) OpenDelayed(t testing.TB, delay func() time.Duration) store.Store {
	t.Helper()
	return b.OpenHooked(t, Hooks{Reply: func(ctx context.Context, _ string) {
		timer := time.NewTimer(delay())
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}})
}

// OpenHooked is Open for a session whose client runs hooks on every unary
// call, with opts applied after the Backend's.
func (b *Backend) OpenHooked(t testing.TB, hooks Hooks, opts ...etcdstore.Option) *etcdstore.Store {
	t.Helper()
	s, err := b.open(hooks, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.release(s) })
	return s
}

func (b *Backend) open(hooks Hooks, opts []etcdstore.Option) (*etcdstore.Store, error) {
	c := &conn{hooks: hooks}
	members := b.members
	if members == nil {
		members = b.cluster.Members
	}
	var eps []string
	for _, m := range members {
		u, err := url.Parse(m.ClientURL)
		if err != nil {
			return nil, err
		}
		p, err := tcpproxy.New(u.Host)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("etcdbackend: proxy: %w", err)
		}
		c.proxies = append(c.proxies, p)
		eps = append(eps, u.Scheme+"://"+p.Addr())
	}
	cfg := b.cluster.ClientConfig(eps...)
	if b.user != "" {
		cfg.Username, cfg.Password = b.user, b.password
	}
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(c.intercept))
	cli, err := clientv3.New(cfg)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("etcdbackend: client: %w", err)
	}
	c.cli = cli
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := etcdstore.Open(ctx, cli, append(slices.Clip(b.opts), opts...)...)
	if err != nil {
		c.close()
		return nil, err
	}
	b.mu.Lock()
	b.conns[s] = c
	b.mu.Unlock()
	return s, nil
}

// intercept loses the reply of the next Txn once armed, and runs the
// session's hooks.
func (c *conn) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if c.hooks.Request != nil {
		c.hooks.Request(ctx, method)
	}
	if c.hooks.Reply != nil {
		defer c.hooks.Reply(ctx, method)
	}
	if method != "/etcdserverpb.KV/Txn" || !c.lose.CompareAndSwap(true, false) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return err
	}
	for _, p := range c.proxies {
		p.Cut()
	}
	return status.Error(codes.Unavailable, "etcdbackend: connection lost before the reply")
}

func (c *conn) close() {
	if c.cli != nil {
		c.cli.Close()
	}
	for _, p := range c.proxies {
		p.Close()
	}
}

func (b *Backend) release(s *etcdstore.Store) {
	s.Close()
	b.mu.Lock()
	c := b.conns[s]
	delete(b.conns, s)
	b.mu.Unlock()
	if c != nil {
		c.close()
	}
}

func (b *Backend) conn(t testing.TB, s store.Store) (*etcdstore.Store, *conn) {
	t.Helper()
	es, ok := s.(*etcdstore.Store)
	b.mu.Lock()
	c := b.conns[es]
	b.mu.Unlock()
	if !ok || c == nil {
		t.Fatalf("etcdbackend: %T was not opened by this backend", s)
	}
	return es, c
}

// Expire revokes the lease of s through another client and returns once the
// server has deleted its keys. s learns it at its next lease renewal.
func (b *Backend) Expire(t testing.TB, s store.Store) {
	t.Helper()
	es, _ := b.conn(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.cluster.RevokeLease(ctx, es.Lease()); err != nil {
		t.Fatal(err)
	}
}

// Traffic returns the bytes s has sent to the cluster and received from it
// so far, as its proxies relayed them.
func (b *Backend) Traffic(t testing.TB, s store.Store) (up, down int64) {
	t.Helper()
	_, c := b.conn(t, s)
	for _, p := range c.proxies {
		up += p.Bytes(tcpproxy.Upstream)
		down += p.Bytes(tcpproxy.Downstream)
	}
	return up, down
}

// LoseNextCreateReply makes the next Txn of s (a create, when the next call
// is one) reach the server and be applied, and its reply be lost.
func (b *Backend) LoseNextCreateReply(t testing.TB, s store.Store) {
	t.Helper()
	_, c := b.conn(t, s)
	c.lose.Store(true)
}

// Disconnect cuts the connections of s to every member and refuses new ones
// until Reconnect.
func (b *Backend) Disconnect(t testing.TB, s store.Store) {
	t.Helper()
	_, c := b.conn(t, s)
	for _, p := range c.proxies {
		p.Refuse()
	}
}

// Freeze stops all traffic of s without closing its connections, as a
// network partition does, until Reconnect.
func (b *Backend) Freeze(t testing.TB, s store.Store) {
	t.Helper()
	_, c := b.conn(t, s)
	for _, p := range c.proxies {
		p.Freeze()
	}
}

// Cut closes the connections of s once; the client may reconnect at once.
func (b *Backend) Cut(t testing.TB, s store.Store) {
	t.Helper()
	_, c := b.conn(t, s)
	for _, p := range c.proxies {
		p.Cut()
	}
}

// Reconnect ends Disconnect or Freeze.
func (b *Backend) Reconnect(t testing.TB, s store.Store) {
	t.Helper()
	_, c := b.conn(t, s)
	for _, p := range c.proxies {
		p.Restore()
	}
}
