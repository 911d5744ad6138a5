// Package zkbackend is the storetest.Backend of zkstore: it opens sessions
// on a real ZooKeeper server (or ensemble) through a fault-injecting proxy of
// their own, so that a test can lose a reply, cut a session's connection or
// expire a session without touching any other.
//
// Over TLS ([NewTLS]) the proxies see only ciphertext: they still cut and
// freeze connections, but cannot learn a session's password or spot a
// create, so Expire and LoseNextCreateReply skip the test that calls them.
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package zkbackend

import (
	"context"
	"crypto/tls"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/zkstore"
)

var (
	_ storetest.Backend      = (*Backend)(nil)
	_ storetest.ReplyLoser   = (*Backend)(nil)
	_ storetest.Disconnector = (*Backend)(nil)
)

// DefaultSessionTimeout is the session timeout of the sessions a Backend
// opens unless its options say otherwise: long enough that a loaded machine
// never expires a session by accident (Expire does not wait for it).
const DefaultSessionTimeout = 15 * time.Second

// Timeout bounds every wait of the Backend's methods.
const Timeout = 20 * time.Second

// Backend opens zkstore sessions on the servers it was made with. Its
// methods are safe for concurrent use.
type Backend struct {
	servers []string
	opts    []zkstore.Option
	opaque  bool // over TLS: the proxies cannot read the traffic

	mu       sync.Mutex
	sessions map[store.Store]*session
}

// New returns a Backend on the servers at addrs. opts apply to every
// session after the Backend's defaults (DefaultSessionTimeout, ReclaimDelay).
func New(addrs []string, opts ...zkstore.Option) *Backend {
	all := append([]zkstore.Option{zkstore.WithSessionTimeout(DefaultSessionTimeout), zkstore.WithReclaimDelay(ReclaimDelay)}, opts...)
	return &Backend{servers: addrs, opts: all, sessions: make(map[store.Store]*session)}
}

// session is what the Backend knows of one session it opened.
type session struct {
	proxies  []*tcpproxy.Proxy
	loseNext atomic.Bool

	mu     sync.Mutex
	id     int64
	passwd []byte
}

// hook watches the session's traffic: it learns the session's password
// from the server's connect response, and loses a create's reply on demand.
func (s *session) hook(m tcpproxy.Message) tcpproxy.Action {
	if m.Index == 0 {
		// The connect request and its response have no request header.
		if m.Dir == tcpproxy.Downstream {
			if id, pw, ok := zkserver.ParseConnectResponse(m.Data); ok && id != 0 {
				s.mu.Lock()
				s.id, s.passwd = id, pw
				s.mu.Unlock()
			}
		}
		return tcpproxy.Forward
	}
	if m.Dir == tcpproxy.Upstream && zkserver.IsCreate(m.Data) && s.loseNext.CompareAndSwap(true, false) {
		return tcpproxy.ForwardThenCut
	}
	return tcpproxy.Forward
}

// NewTLS returns a Backend whose sessions talk TLS, configured by cfg, to
// the servers at addrs (their secure client ports). opts apply as in New.
func NewTLS(addrs []string, cfg *tls.Config, opts ...zkstore.Option) *Backend {
	b := New(addrs, append([]zkstore.Option{zkstore.WithTLS(cfg)}, opts...)...)
	b.opaque = true
	return b
}

// Open opens a session through proxies of its own; it is closed, and its
// proxies too, when t ends.
func (b *Backend) Open(t testing.TB) store.Store {
	t.Helper()
	st, _ := b.OpenWithProxies(t)
	return st
}

// OpenWithProxies opens a session as Open does and returns it with its
// proxies, one per server, for faults of a test's own.
func (b *Backend) OpenWithProxies(t testing.TB, opts ...zkstore.Option) (*zkstore.Store, []*tcpproxy.Proxy) {
	t.Helper()
	sess := &session{}
	var addrs []string
	for _, srv := range b.servers {
		p, err := tcpproxy.New(srv)
		if err != nil {
			sess.close()
			t.Fatal(err)
		}
		if !b.opaque {
			p.SetHook(tcpproxy.LengthPrefixed, sess.hook)
		}
		sess.proxies = append(sess.proxies, p)
		addrs = append(addrs, p.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	st, err := zkstore.Open(ctx, addrs, slices.Concat(b.opts, opts)...)
	if err != nil {
		sess.close()
		t.Fatal(err)
	}
	b.mu.Lock()
	b.sessions[st] = sess
	b.mu.Unlock()
	t.Cleanup(func() {
		st.Close()
		sess.close()
		b.mu.Lock()
		delete(b.sessions, st)
		b.mu.Unlock()
	})
	return st, sess.proxies
}

func (s *session) close() {
	for _, p := range s.proxies {
		p.Close()
	}
}

func (b *Backend) session(t testing.TB, st store.Store) *session {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	sess, ok := b.sessions[st]
	if !ok {
		t.Fatalf("zkbackend: %T %p was not opened by this backend", st, st)
	}
	return sess
}

// Expire makes the server expire the session of st at once: it cuts st's
// connection and keeps it from reconnecting, closes the session on the
// server with the session's own password, and lets st reconnect to learn
// it. The session's ephemeral nodes are gone when Expire returns.
func (b *Backend) Expire(t testing.TB, st store.Store) {
	t.Helper()
	if b.opaque {
		t.Skip("zkbackend: Expire needs the session's password, which TLS hides from the proxy")
	}
	sess := b.session(t, st)
	sess.mu.Lock()
	id, pw := sess.id, sess.passwd
	sess.mu.Unlock()
	if id != st.SessionID() {
		t.Fatalf("zkbackend: Expire: saw session %#x, store has %#x", id, st.SessionID())
	}
	for _, p := range sess.proxies {
		p.Refuse()
	}
	err := zkserver.CloseSession(b.servers[0], id, pw, Timeout)
	for _, p := range sess.proxies {
		p.Restore()
	}
	if err != nil {
		t.Fatalf("zkbackend: Expire: %v", err)
	}
}

// Traffic returns the bytes st has sent to its servers and received from
// them so far, as its proxies relayed them.
func (b *Backend) Traffic(t testing.TB, st store.Store) (up, down int64) {
	t.Helper()
	for _, p := range b.session(t, st).proxies {
		up += p.Bytes(tcpproxy.Upstream)
		down += p.Bytes(tcpproxy.Downstream)
	}
	return up, down
}

// LoseNextCreateReply makes the next create request of st reach the server
// and then closes st's connection before the reply can arrive.
func (b *Backend) LoseNextCreateReply(t testing.TB, st store.Store) {
	t.Helper()
	if b.opaque {
		t.Skip("zkbackend: LoseNextCreateReply cannot spot a create in TLS traffic")
	}
	b.session(t, st).loseNext.Store(true)
}

// Disconnect cuts st's connection and refuses new ones until Reconnect. It
// returns once st has noticed (its Disconnected channel is closed).
func (b *Backend) Disconnect(t testing.TB, st store.Store) {
	t.Helper()
	for _, p := range b.session(t, st).proxies {
		p.Refuse()
	}
	select {
	case <-st.Disconnected():
	case <-time.After(Timeout):
		t.Fatalf("zkbackend: Disconnect: client did not notice in %v", Timeout)
	}
}

// Freeze stops all traffic of st without closing its connection, as a
// network partition does, until Reconnect. It returns at once.
func (b *Backend) Freeze(t testing.TB, st store.Store) {
	t.Helper()
	for _, p := range b.session(t, st).proxies {
		p.Freeze()
	}
}

// ReclaimDelay is the reclaim delay of the sessions a Backend opens
// (zkstore.WithReclaimDelay), shorter than the default so that tests that
// wait for a directory to go do not wait long; it is the same mechanism.
const ReclaimDelay = 100 * time.Millisecond

// ReclaimWithin implements storetest.Reclaimer: a Store removes an emptied
// directory at most a quarter of its delay after the delay; the rest is
// room for a loaded machine.
func (b *Backend) ReclaimWithin() time.Duration { return 2*ReclaimDelay + 10*time.Second }

// ReapWithin implements storetest.Reaper: the harness's servers reap empty
// containers every zkserver.ContainerCheckInterval, so one emptied just
// after a check goes within two.
func (b *Backend) ReapWithin() time.Duration { return 2 * zkserver.ContainerCheckInterval }

// Servers returns the addresses of the servers the Backend opens sessions
// on.
func (b *Backend) Servers() []string { return slices.Clone(b.servers) }

// Reconnect lets st reconnect after Disconnect and returns once it has, to
// the same session (or once the session ended).
func (b *Backend) Reconnect(t testing.TB, st store.Store) {
	t.Helper()
	for _, p := range b.session(t, st).proxies {
		p.Restore()
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	WaitConnected(t, ctx, st)
}

// WaitConnected waits until st is connected (its Disconnected channel is
// open) or its session ended, and fails t when ctx ends first.
func WaitConnected(t testing.TB, ctx context.Context, st store.Store) {
	t.Helper()
	for {
		select {
		case <-st.Disconnected():
		default:
			return
		}
		select {
		case <-st.Context().Done():
			return
		case <-ctx.Done():
			t.Fatalf("zkbackend: not reconnected: %v", context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
			// Polled: the contract has no "connected" signal.
		}
	}
}
