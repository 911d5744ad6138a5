// Package etcdserver runs real etcd servers inside a Go test binary: one
// member or a cluster of several, embedded with go.etcd.io/etcd/server/v3/embed
// on 127.0.0.1, on free ports and in temporary data directories, with their
// logs silenced. A member can be stopped, killed and restarted, which is what
// the fault tests of etcdstore and of the recipes need.
//
// Tests use [Start]; code that outlives one test (a server shared by a whole
// test binary) uses [New] and calls [Cluster.Close] itself.
//
// A cluster can serve its clients over TLS with client certificates
// ([WithTLS]) and have authentication enabled ([Cluster.EnableAuth]); its
// own client configuration ([Cluster.ClientConfig]) then carries the root
// user's certificate and credentials.
//
// A cluster started [WithPartitions] can cut one member off from the
// others ([Cluster.Partition]) while its clients still reach it.
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package etcdserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/internal/testing/testcert"
)

// StartTimeout bounds how long a member may take to join its cluster and
// become ready to serve clients. A cold race build is slow; a warm one starts
// in well under a second.
const StartTimeout = 60 * time.Second

// Cluster is a set of embedded etcd members that form one cluster.
// Its methods are safe for concurrent use.
type Cluster struct {
	// Members are the cluster's members, in the order they were started.
	Members []*Member

	tls   *clientTLS // nil: plain HTTP
	links *links     // nil: not started WithPartitions

	mu           sync.Mutex
	rootPassword string // set once auth is enabled

	closeOnce sync.Once
}

// Option configures a cluster.
type Option func(*config)

type config struct {
	tls        *clientTLS
	partitions bool
}

// clientTLS is what serving clients over TLS takes.
type clientTLS struct {
	ca     *testcert.CA
	server testcert.Pair
	root   testcert.Pair // the cluster's own client certificate, CN=root
}

// WithTLS makes the members serve clients over TLS (https) with the
// certificate server, and require client certificates signed by ca (etcd's
// --client-cert-auth). Peers still talk plain HTTP. The cluster's own
// clients present a certificate for CN=root, made from ca.
func WithTLS(ca *testcert.CA, server testcert.Pair) Option {
	return func(c *config) { c.tls = &clientTLS{ca: ca, server: server} }
}

// Member is one embedded etcd server. Its client and peer addresses never
// change, so a restarted member is found again by the same clients.
//
// Clients reach the member through a loopback proxy (internal/testing/tcpproxy) at
// ClientURL, which the member advertises: that is how Kill drops every
// client connection at once, as a crash does, where etcd's own shutdown
// would drain them for seconds.
type Member struct {
	// Name is the member's name in the cluster ("m0", "m1", ...).
	Name string
	// ClientURL is the URL clients dial ("http://127.0.0.1:port"), through
	// the member's proxy.
	ClientURL string
	// ListenURL is the URL the member itself listens on for clients,
	// without the proxy (for benchmarks).
	ListenURL string
	// PeerURL is the URL other members dial, through the member's peer
	// proxy.
	PeerURL string

	proxy          *tcpproxy.Proxy // clients to the member
	peerProxy      *tcpproxy.Proxy // other members to the member
	peerListen     string
	dir            string
	initialCluster string
	token          string
	tls            *clientTLS
	peerTLS        transport.TLSInfo // empty: peers talk plain HTTP

	mu sync.Mutex
	e  *embed.Etcd // nil while stopped
}

// Start starts an n-member cluster in t.TempDir() and stops it when the test
// ends. If the cluster cannot start, Start fails the test: a missing server
// is a failure, never a skip.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c, err := New(t.TempDir(), n, opts...)
	if err != nil {
		t.Fatalf("etcdserver.Start(%d): %v", n, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// New starts an n-member cluster whose data lives under dir and returns once
// every member is ready to serve clients. The caller must Close it.
func New(dir string, n int, opts ...Option) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcdserver: %d members", n)
	}
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.tls != nil {
		root, err := cfg.tls.ca.Client("root")
		if err != nil {
			return nil, fmt.Errorf("etcdserver: client certificate: %w", err)
		}
		cfg.tls.root = root
	}
	// A port picked free can be taken by someone else before etcd binds
	// it; such a start fails fast, and is retried with new ports.
	var err error
	for attempt := range 3 {
		var c *Cluster
		c, err = start(filepath.Join(dir, fmt.Sprintf("try%d", attempt)), n, cfg)
		if err == nil {
			return c, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, err
}

func start(dir string, n int, cfg config) (*Cluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{tls: cfg.tls}
	scheme, peerScheme := "http", "http"
	if cfg.tls != nil {
		scheme = "https"
	}
	var peerTLS transport.TLSInfo
	if cfg.partitions {
		peerScheme = "https"
		if c.links, peerTLS, err = newLinks(dir, n); err != nil {
			return nil, err
		}
	}
	token := fmt.Sprintf("corral-%d-%d", os.Getpid(), time.Now().UnixNano())
	var initial []string
	for i := range n {
		m := &Member{
			Name:       fmt.Sprintf("m%d", i),
			ListenURL:  fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i]),
			peerListen: fmt.Sprintf("%s://127.0.0.1:%d", peerScheme, ports[2*i+1]),
			dir:        filepath.Join(dir, fmt.Sprintf("m%d", i)),
			token:      token,
			tls:        cfg.tls,
			peerTLS:    peerTLS,
		}
		c.Members = append(c.Members, m)
		m.proxy, err = tcpproxy.New(fmt.Sprintf("127.0.0.1:%d", ports[2*i]))
		if err == nil {
			m.peerProxy, err = tcpproxy.New(fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]))
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("etcdserver: proxy: %w", err)
		}
		m.ClientURL = scheme + "://" + m.proxy.Addr()
		m.PeerURL = peerScheme + "://" + m.peerProxy.Addr()
		if c.links != nil {
			m.peerTLS.ServerName = c.links.names[i]
			m.peerProxy.SetHook(tlsRecord, c.links.hook(i))
		}
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		m.initialCluster = strings.Join(initial, ",")
	}
	// Members of a new cluster must start together: none is ready before
	// a quorum has joined.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.start("new") })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdserver: free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (m *Member) config(state string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.dir
	lu, _ := url.Parse(m.ListenURL)
	cu, _ := url.Parse(m.ClientURL)
	plu, _ := url.Parse(m.peerListen)
	pu, _ := url.Parse(m.PeerURL)
	cfg.ListenClientUrls = []url.URL{*lu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*plu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	if m.tls != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile:       m.tls.server.CertFile,
			KeyFile:        m.tls.server.KeyFile,
			TrustedCAFile:  m.tls.ca.File,
			ClientCertAuth: true,
		}
	}
	cfg.PeerTLSInfo = m.peerTLS
	// Authentication hashes a password at every client's Authenticate:
	// bcrypt's cheapest cost keeps a test that opens many sessions fast
	// (the default, 10, costs tens of milliseconds each).
	cfg.BcryptCost = 4
	cfg.InitialCluster = m.initialCluster
	cfg.InitialClusterToken = m.token
	cfg.ClusterState = state
	// Durability is not under test; fsync on every commit only slows the
	// suite down on a shared machine.
	cfg.UnsafeNoFsync = true
	// NewConfig leaves this at 0 (the etcd binary's flag defaults it to
	// 300 ms), which makes the server format every request as text for a
	// slow-request warning: a third of a small Txn's CPU time.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	return cfg
}

func (m *Member) start(state string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.e != nil {
		return fmt.Errorf("etcdserver: member %s is running", m.Name)
	}
	e, err := embed.StartEtcd(m.config(state))
	if err != nil {
		return fmt.Errorf("etcdserver: start member %s: %w", m.Name, err)
	}
	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdserver: member %s: %w", m.Name, err)
	case <-timer.C:
		e.Close()
		return fmt.Errorf("etcdserver: member %s not ready after %v", m.Name, StartTimeout)
	}
	m.e = e
	m.proxy.Restore()
	return nil
}

// Running reports whether the member is running.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e != nil
}

// ID returns the member's ID in the cluster, or 0 while it is stopped.
func (m *Member) ID() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.e == nil {
		return 0
	}
	return uint64(m.e.Server.MemberID())
}

// IsLeader reports whether the member is running and is the raft leader.
func (m *Member) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e != nil && m.e.Server.Leader() == m.e.Server.MemberID()
}

// Stop stops the member gracefully: a leader hands its leadership over
// first, clients see their streams closed. Stopping a stopped member does
// nothing.
func (m *Member) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.e == nil {
		return
	}
	m.e.Close()
	m.e = nil
}

// Kill stops the member abruptly, as a crash would: every client connection
// is closed at once and new ones are refused, raft stops with no leadership
// transfer, then the server is torn down (etcd gives no way to skip that
// part without leaking its goroutines). Killing a stopped member does
// nothing.
func (m *Member) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.e == nil {
		return
	}
	m.proxy.Refuse()
	m.e.Server.HardStop()
	m.e.Close()
	m.e = nil
}

// Restart starts a stopped or killed member again on the same data
// directory and addresses, and returns once it is ready to serve clients.
func (m *Member) Restart() error {
	return m.start("existing")
}

// Endpoints returns the client URLs of all members, running or not.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Leader returns the running member that is the raft leader, or nil.
func (c *Cluster) Leader() *Member {
	for _, m := range c.Members {
		if m.IsLeader() {
			return m
		}
	}
	return nil
}

// ClientConfig returns a quiet client configuration for endpoints, or for
// every member when none are given: with the root user's client
// certificate under WithTLS, and its credentials once auth is enabled.
func (c *Cluster) ClientConfig(endpoints ...string) clientv3.Config {
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if c.tls != nil {
		cfg.TLS = c.ClientTLS(c.tls.root)
	}
	c.mu.Lock()
	if c.rootPassword != "" {
		cfg.Username, cfg.Password = "root", c.rootPassword
	}
	c.mu.Unlock()
	return cfg
}

// ClientTLS returns a client TLS configuration that trusts the cluster's
// CA and presents the given certificates, or nil for a cluster without
// TLS.
func (c *Cluster) ClientTLS(pairs ...testcert.Pair) *tls.Config {
	if c.tls == nil {
		return nil
	}
	return c.tls.ca.ClientTLS(pairs...)
}

// EnableAuth turns etcd's authentication on: it adds the user root with
// password and the root role, then enables auth. ClientConfig carries
// root's credentials from then on.
func (c *Cluster) EnableAuth(ctx context.Context, password string) error {
	cli, err := c.NewClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.UserAdd(ctx, "root", password); err != nil {
		return fmt.Errorf("etcdserver: add root: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("etcdserver: grant root: %w", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("etcdserver: enable auth: %w", err)
	}
	c.mu.Lock()
	c.rootPassword = password
	c.mu.Unlock()
	return nil
}

// AddUser adds user with password and a role of the same name that may
// read and write every key that starts with one of prefixes (none: no key
// at all).
func (c *Cluster) AddUser(ctx context.Context, user, password string, prefixes ...string) error {
	cli, err := c.NewClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.UserAdd(ctx, user, password); err != nil {
		return fmt.Errorf("etcdserver: add user %s: %w", user, err)
	}
	if _, err := cli.RoleAdd(ctx, user); err != nil {
		return fmt.Errorf("etcdserver: add role %s: %w", user, err)
	}
	for _, p := range prefixes {
		end := clientv3.GetPrefixRangeEnd(p)
		if _, err := cli.RoleGrantPermission(ctx, user, p, end, clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
			return fmt.Errorf("etcdserver: grant %s on %q: %w", user, p, err)
		}
	}
	if _, err := cli.UserGrantRole(ctx, user, user); err != nil {
		return fmt.Errorf("etcdserver: grant role %s: %w", user, err)
	}
	return nil
}

// NewClient returns a new client of the cluster; the caller closes it.
func (c *Cluster) NewClient(endpoints ...string) (*clientv3.Client, error) {
	cli, err := clientv3.New(c.ClientConfig(endpoints...))
	if err != nil {
		return nil, fmt.Errorf("etcdserver: client: %w", err)
	}
	return cli, nil
}

// Client returns a new client of the cluster that is closed when the test
// ends.
func (c *Cluster) Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := c.NewClient(endpoints...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// RevokeLease revokes lease id through a client of its own, as an operator
// or a server-side expiry would, and returns once the server has deleted the
// lease's keys.
func (c *Cluster) RevokeLease(ctx context.Context, id clientv3.LeaseID) error {
	cli, err := c.NewClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Revoke(ctx, id); err != nil {
		return fmt.Errorf("etcdserver: revoke lease %x: %w", int64(id), err)
	}
	return nil
}

// Close stops every member gracefully, the followers first, one after the
// other. Members stopped together would each try to hand leadership to
// another that is stopping too, and wait for etcd's request timeout (7 s);
// killed members leave keep-alive HTTP connections between them open for
// seconds. It is idempotent.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		leader := c.Leader()
		for _, m := range c.Members {
			if m != leader {
				m.Stop()
			}
		}
		if leader != nil {
			leader.Stop()
		}
		// Stopped members leave keep-alive HTTP connections between
		// them open until etcd's peer read timeout (5 s); closing the
		// proxies they run through ends them now.
		for _, m := range c.Members {
			for _, p := range []*tcpproxy.Proxy{m.proxy, m.peerProxy} {
				if p != nil {
					p.Close()
				}
			}
		}
	})
}
