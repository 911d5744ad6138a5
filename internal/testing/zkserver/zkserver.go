// Package zkserver runs real ZooKeeper servers for tests: a single server or
// an ensemble, on 127.0.0.1 with free ports, temporary data directories and
// short ticks, and lets a test stop, kill and restart them, partition one
// member of an ensemble from the others (Config.QuorumProxies), and expire
// a client's session.
//
// It starts the server from the Debian package zookeeper (the jars under
// /usr/share/java, run by the java on PATH). A server can also serve clients
// over TLS, on a secure client port of its own (see [TLS]). [Require] skips a test when that
// is not installed, or fails it when the environment variable CI is "true":
// in CI a missing server is a failure, never a skip. The environment
// variable ZOOKEEPER_CLASSPATH replaces the default class path.
//
// Every process is started with a parent-death signal, so servers die with
// the test binary even when it is killed before its cleanups run.
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package zkserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/tcpproxy"
)

// DefaultClassPath is the class path of the Debian package zookeeper.
// netty-codec is not in the Class-Path of Debian's zookeeper.jar, but
// Netty's TLS handler needs it (without it the secure client port fails
// every handshake with a ClassNotFoundException); it comes with
// libnetty-java, which the package depends on.
const DefaultClassPath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:/usr/share/java/netty-codec.jar"

// Config describes the servers to start. The zero Config is usable.
type Config struct {
	// TickTime is ZooKeeper's basic time unit; default 100ms. Session
	// timeouts and the ensemble's sync limits are counted in ticks.
	TickTime time.Duration
	// SyncLimit is how many ticks a follower may go without hearing from
	// its leader (and the leader from it) before it gives up; default 10.
	// Until then a follower cut off from the ensemble answers its clients.
	SyncLimit int
	// QuorumProxies makes StartEnsemble route every member's links to
	// each other member (quorum and election) through a tcpproxy of its
	// own, so that [Ensemble.Partition] can cut one member off from the
	// others while its clients still reach it.
	QuorumProxies bool
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// the server grants; defaults 2 ticks and 60s (ZooKeeper's own
	// default, 2 to 20 ticks, is too narrow for short ticks).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// Dir holds the servers' configuration and data. When empty a
	// temporary directory is made and removed by Close.
	Dir string
	// StartTimeout bounds the wait for a server to serve; default 60s.
	StartTimeout time.Duration
	// ContainerCheck is how often the server reaps empty containers;
	// default ContainerCheckInterval. A test of what a client does with
	// its emptied directories sets it long, so that the reaper does not
	// take one first.
	ContainerCheck time.Duration
	// TLS, when set, makes a standalone server serve clients over TLS
	// too, on a secure client port of its own ([Server.TLSAddr]); the
	// plain port stays open (Addr, for the four-letter commands and for
	// tests that compare). Ensembles ignore it.
	TLS *TLS
}

// TLS is the TLS configuration of a server's secure client port, served by
// ZooKeeper's Netty connection factory with PEM key and trust stores (the
// format ZooKeeper 3.8's X509Util reads besides JKS and PKCS12).
type TLS struct {
	// KeyStore is a PEM file holding the server's private key (PKCS #8)
	// and its certificate: testcert.Pair.BundleFile.
	KeyStore string
	// TrustStore is a PEM file holding the CA certificates that client
	// certificates must chain to.
	TrustStore string
	// ClientAuth is ZooKeeper's ssl.clientAuth: "need" (the default:
	// a client without a certificate the trust store vouches for is
	// refused during the handshake), "want" or "none". A client
	// certificate the server accepts also authenticates the session as
	// x509:<subject DN> (ZooKeeper's X509AuthenticationProvider).
	ClientAuth string
}

// conf returns the lines of zoo.cfg that serve the secure port.
func (c *TLS) conf(port int) string {
	auth := c.ClientAuth
	if auth == "" {
		auth = "need"
	}
	return fmt.Sprintf(`secureClientPort=%d
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=%s
ssl.keyStore.type=PEM
ssl.trustStore.location=%s
ssl.trustStore.type=PEM
ssl.clientAuth=%s
`, port, c.KeyStore, c.TrustStore, auth)
}

func (c Config) withDefaults() Config {
	if c.TickTime <= 0 {
		c.TickTime = 100 * time.Millisecond
	}
	if c.SyncLimit <= 0 {
		c.SyncLimit = 10
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 2 * c.TickTime
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 60 * time.Second
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.ContainerCheck <= 0 {
		c.ContainerCheck = ContainerCheckInterval
	}
	return c
}

func classPath() string {
	if cp := os.Getenv("ZOOKEEPER_CLASSPATH"); cp != "" {
		return cp
	}
	return DefaultClassPath
}

// Available returns nil when a ZooKeeper server can be started here, and
// otherwise an error that says what is missing.
func Available() error {
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("zkserver: java not found (apt-get install -y zookeeper): %w", err)
	}
	for _, jar := range strings.Split(classPath(), ":") {
		if _, err := os.Stat(jar); err != nil {
			return fmt.Errorf("zkserver: ZooKeeper not installed (apt-get install -y zookeeper): %w", err)
		}
	}
	return nil
}

// Require skips t when ZooKeeper cannot be started here, or fails it when
// the environment variable CI is "true".
func Require(t testing.TB) {
	t.Helper()
	err := Available()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v (CI=true: a missing ZooKeeper is a failure)", err)
	}
	t.Skip(err)
}

// Server is one ZooKeeper server process, standalone or an ensemble member.
// Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	dir     string
	cfgFile string
	port    int
	tlsPort int    // 0 without TLS
	main    string // Java main class

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    *tailBuffer
}

// errPortTaken is why a server exited while starting when another process
// took one of its ports between freePorts and the server's bind (tests of
// other packages run beside this one).
var errPortTaken = errors.New("zkserver: a port was taken before the server bound it")

// portTries bounds the starts on fresh ports after errPortTaken.
const portTries = 5

// Start starts a standalone server and returns once it serves clients.
// Close stops it. A port taken meanwhile by another process is replaced.
func Start(cfg Config) (*Server, error) {
	for attempt := 1; ; attempt++ {
		s, err := start(cfg)
		if !errors.Is(err, errPortTaken) || attempt == portTries {
			return s, err
		}
	}
}

func start(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	dir, err := makeDir(&cfg)
	if err != nil {
		return nil, err
	}
	nports := 1
	if cfg.TLS != nil {
		nports = 2
	}
	ports, err := freePorts(nports)
	if err != nil {
		return nil, err
	}
	extra := ""
	if cfg.TLS != nil {
		extra = cfg.TLS.conf(ports[1])
	}
	s, err := newServer(cfg, dir, ports[0], "org.apache.zookeeper.server.ZooKeeperServerMain", extra)
	if err == nil {
		if cfg.TLS != nil {
			s.tlsPort = ports[1]
		}
		err = s.Start()
	}
	if err != nil {
		if s != nil {
			s.kill()
		}
		if cfg.Dir == "" {
			os.RemoveAll(dir)
		}
		return nil, err
	}
	return s, nil
}

// ForTest starts a standalone server for t (see [Require]) and stops it
// when t ends.
func ForTest(t testing.TB, cfg Config) *Server {
	t.Helper()
	Require(t)
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func makeDir(cfg *Config) (string, error) {
	if cfg.Dir != "" {
		return cfg.Dir, os.MkdirAll(cfg.Dir, 0o755)
	}
	return os.MkdirTemp("", "zkserver-")
}

// ContainerCheckInterval is how often the server reaps empty container
// nodes (znode.container.checkIntervalMs; a minute by default), and how long
// a container that never had a child lives (maxNeverUsedIntervalMs; never
// reaped by default).
const ContainerCheckInterval = time.Second

func newServer(cfg Config, dir string, port int, main, extra string) (*Server, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`tickTime=%d
initLimit=20
syncLimit=%d
clientPort=%d
clientPortAddress=127.0.0.1
dataDir=%s
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
minSessionTimeout=%d
maxSessionTimeout=%d
%s`, cfg.TickTime.Milliseconds(), cfg.SyncLimit, port, data,
		cfg.MinSessionTimeout.Milliseconds(), cfg.MaxSessionTimeout.Milliseconds(), extra)
	cfgFile := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgFile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, dir: dir, cfgFile: cfgFile, port: port, main: main}, nil
}

// Addr returns the client address, "127.0.0.1:port". It stays the same
// across restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// TLSAddr returns the address of the secure client port, "127.0.0.1:port",
// or "" for a server started without TLS.
func (s *Server) TLSAddr() string {
	if s.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// Pid returns the process ID of the running server's JVM, or 0 while it is
// stopped (benchmarks read its CPU time from /proc).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Start starts the stopped server again, with its data, and returns once it
// serves clients. It does nothing if the server is running.
func (s *Server) Start() error {
	if err := s.spawn(); err != nil {
		return err
	}
	return s.WaitServing(s.cfg.StartTimeout)
}

func (s *Server) spawn() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	cmd := exec.Command("java",
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.admin.enableServer=false",
		// Tests need speed, not durability across power loss; a
		// killed process still loses nothing (the OS keeps the log).
		"-Dzookeeper.forceSync=no",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		// Containers emptied by a session's end, or never used, are
		// reaped within a second rather than a minute, so tests can
		// wait for it (see ContainerCheckInterval).
		fmt.Sprintf("-Dznode.container.checkIntervalMs=%d", s.cfg.ContainerCheck.Milliseconds()),
		fmt.Sprintf("-Dznode.container.maxNeverUsedIntervalMs=%d", s.cfg.ContainerCheck.Milliseconds()),
		"-cp", classPath(), s.main, s.cfgFile)
	out := &tailBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("zkserver: start java: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited, s.out = cmd, exited, out
	return nil
}

// WaitServing waits up to timeout until the server serves clients: its
// srvr command reports a Mode (ruok answers before that).
func (s *Server) WaitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		exited, out := s.exited, s.out
		s.mu.Unlock()
		if exited == nil {
			return errors.New("zkserver: server not running")
		}
		if _, err := s.Mode(); err == nil && s.tlsListening() {
			return nil
		}
		select {
		case <-exited:
			err := fmt.Errorf("zkserver: server on %s exited while starting:\n%s", s.Addr(), out)
			if strings.Contains(out.String(), "Address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zkserver: server on %s not serving after %v:\n%s", s.Addr(), timeout, out)
		}
	}
}

// tlsListening reports whether the secure client port, if any, accepts
// connections: the server opens it after the plain one.
func (s *Server) tlsListening() bool {
	if s.tlsPort == 0 {
		return true
	}
	c, err := net.DialTimeout("tcp", s.TLSAddr(), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Mode returns the server's mode as srvr reports it: "standalone",
// "leader" or "follower". It fails while the server does not serve.
func (s *Server) Mode() (string, error) {
	out, err := FourLetter(s.Addr(), "srvr")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("zkserver: %s not serving: %q", s.Addr(), out)
}

// Stop stops the server gracefully (SIGTERM, then SIGKILL after 10s) and
// waits for the process to exit. It does nothing if the server is stopped.
func (s *Server) Stop() error { return s.signal(syscall.SIGTERM, 10*time.Second) }

// Kill kills the server process (SIGKILL), as a crash would, and waits for
// it to exit.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL, 0) }

func (s *Server) kill() { s.Kill() }

func (s *Server) signal(sig syscall.Signal, grace time.Duration) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	// Only our own process, by pid.
	cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-exited:
			return nil
		case <-time.After(grace):
			cmd.Process.Kill()
		}
	}
	<-exited
	return nil
}

// Restart stops the server and starts it again with the same port and data.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start()
}

// Running reports whether the server process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Output returns the last lines the server logged.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return ""
	}
	return s.out.String()
}

// Close kills the server and removes its directory if Start made it.
func (s *Server) Close() error {
	s.Kill()
	if s.cfg.Dir == "" {
		return os.RemoveAll(s.dir)
	}
	return nil
}

// Ensemble is a ZooKeeper ensemble of servers on this machine.
type Ensemble struct {
	// Members are the servers, member i having myid i+1.
	Members []*Server
	dir     string
	ownDir  bool
	// links[i][j] relays member i's connections to member j (its quorum
	// and election ports), with QuorumProxies.
	links [][]*peerLink
}

// peerLink is the pair of proxies through which one member reaches
// another.
type peerLink struct{ quorum, election *tcpproxy.Proxy }

func (l *peerLink) close() {
	l.quorum.Close()
	l.election.Close()
}

// StartEnsemble starts an ensemble of n members and returns once every
// member serves clients (a quorum has formed). Close stops it. A port
// taken meanwhile by another process is replaced.
func StartEnsemble(n int, cfg Config) (*Ensemble, error) {
	for attempt := 1; ; attempt++ {
		e, err := startEnsemble(n, cfg)
		if !errors.Is(err, errPortTaken) || attempt == portTries {
			return e, err
		}
	}
}

func startEnsemble(n int, cfg Config) (*Ensemble, error) {
	cfg = cfg.withDefaults()
	ownDir := cfg.Dir == ""
	dir, err := makeDir(&cfg)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	e := &Ensemble{dir: dir, ownDir: ownDir}
	if cfg.QuorumProxies {
		if err := e.proxyLinks(n, ports); err != nil {
			e.Close()
			return nil, err
		}
	}
	for i := range n {
		peers := e.peers(i, n, ports)
		mcfg := cfg
		mcfg.Dir = filepath.Join(dir, fmt.Sprintf("member%d", i+1))
		mdir, err := makeDir(&mcfg)
		if err == nil {
			err = os.MkdirAll(filepath.Join(mdir, "data"), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(mdir, "data", "myid"), []byte(strconv.Itoa(i+1)), 0o644)
		}
		var s *Server
		if err == nil {
			s, err = newServer(mcfg, mdir, ports[3*i], "org.apache.zookeeper.server.quorum.QuorumPeerMain",
				"reconfigEnabled=false\nstandaloneEnabled=false\n"+peers)
		}
		if err == nil {
			e.Members = append(e.Members, s)
			err = s.spawn()
		}
		if err != nil {
			e.Close()
			return nil, err
		}
	}
	for _, s := range e.Members {
		if err := s.WaitServing(cfg.StartTimeout); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// proxyLinks makes the proxies of every member's links to every other.
func (e *Ensemble) proxyLinks(n int, ports []int) error {
	e.links = make([][]*peerLink, n)
	for i := range n {
		e.links[i] = make([]*peerLink, n)
		for j := range n {
			if i == j {
				continue
			}
			q, err := tcpproxy.New(net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*j+1])))
			if err != nil {
				return fmt.Errorf("zkserver: quorum proxy: %w", err)
			}
			el, err := tcpproxy.New(net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*j+2])))
			if err != nil {
				q.Close()
				return fmt.Errorf("zkserver: election proxy: %w", err)
			}
			e.links[i][j] = &peerLink{q, el}
		}
	}
	return nil
}

// peers returns the server lines of member i's configuration: its own
// quorum and election ports, and the other members' as i reaches them
// (through i's proxies, with QuorumProxies). The members' lines differ
// only in the addresses, which ZooKeeper allows.
func (e *Ensemble) peers(i, n int, ports []int) string {
	var b strings.Builder
	for j := range n {
		q, el := strconv.Itoa(ports[3*j+1]), strconv.Itoa(ports[3*j+2])
		if e.links != nil && i != j {
			q, el = port(e.links[i][j].quorum.Addr()), port(e.links[i][j].election.Addr())
		}
		fmt.Fprintf(&b, "server.%d=127.0.0.1:%s:%s\n", j+1, q, el)
	}
	return b.String()
}

// port returns the port of addr, "host:port".
func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// Partition cuts member i off from the other members, both ways, as a
// network partition does: its links to them and theirs to it stay open but
// carry nothing (tcpproxy's Freeze) until Heal. Its clients still reach it,
// and it answers them until it gives up on its leader (SyncLimit ticks).
// It needs QuorumProxies.
func (e *Ensemble) Partition(i int) error { return e.eachLink(i, (*tcpproxy.Proxy).Freeze) }

// Heal ends Partition(i): member i's links carry traffic again, bytes held
// meanwhile included.
func (e *Ensemble) Heal(i int) error { return e.eachLink(i, (*tcpproxy.Proxy).Restore) }

func (e *Ensemble) eachLink(i int, f func(*tcpproxy.Proxy)) error {
	if e.links == nil {
		return errors.New("zkserver: the ensemble was started without QuorumProxies")
	}
	if i < 0 || i >= len(e.Members) {
		return fmt.Errorf("zkserver: no member %d", i)
	}
	for j := range e.Members {
		if j == i {
			continue
		}
		for _, l := range []*peerLink{e.links[i][j], e.links[j][i]} {
			f(l.quorum)
			f(l.election)
		}
	}
	return nil
}

// EnsembleForTest starts an ensemble of n members for t (see [Require])
// and stops it when t ends.
func EnsembleForTest(t testing.TB, n int, cfg Config) *Ensemble {
	t.Helper()
	Require(t)
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	e, err := StartEnsemble(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// Addrs returns the client addresses of the members.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.Members))
	for i, s := range e.Members {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Leader returns the index in Members of the current leader.
func (e *Ensemble) Leader() (int, error) {
	for i, s := range e.Members {
		if m, err := s.Mode(); err == nil && m == "leader" {
			return i, nil
		}
	}
	return -1, errors.New("zkserver: no leader")
}

// Close kills every member and removes the ensemble's directory if
// StartEnsemble made it.
func (e *Ensemble) Close() error {
	for _, s := range e.Members {
		s.Kill()
	}
	for _, row := range e.links {
		for _, l := range row {
			if l != nil {
				l.close()
			}
		}
	}
	if e.ownDir {
		return os.RemoveAll(e.dir)
	}
	return nil
}

// FourLetter sends a four-letter command ("srvr", "mntr", "cons", ...) to
// the server at addr and returns its answer.
func FourLetter(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var b bytes.Buffer
	_, err = b.ReadFrom(c)
	return b.String(), err
}

// freePorts returns n distinct ports free on 127.0.0.1 right now.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Watches returns the number of watches the server at addr holds, over all
// its sessions, children watches included (zk_watch_count of the
// four-letter word mntr). A watch set by several sessions on one path
// counts once per session.
func Watches(addr string) (int, error) {
	out, err := FourLetter(addr, "mntr")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_watch_count\t"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("zkserver: no zk_watch_count in mntr's answer %q", out)
}

// DataWatches returns the number of data and exists watches the server at
// addr holds, over all its sessions (the "Total watches" of the
// four-letter word wchs, which leaves children watches out).
func DataWatches(addr string) (int, error) {
	out, err := FourLetter(addr, "wchs")
	if err != nil {
		return 0, err
	}
	_, total, ok := strings.Cut(out, "Total watches:")
	if !ok {
		return 0, fmt.Errorf("zkserver: wchs answered %q", out)
	}
	return strconv.Atoi(strings.TrimSpace(total))
}

// SessionWatches returns the paths the server at addr holds a data or
// exists watch on for the session with the given ID (the four-letter word
// wchc, which leaves children watches out).
func SessionWatches(addr string, session int64) ([]string, error) {
	out, err := FourLetter(addr, "wchc")
	if err != nil {
		return nil, err
	}
	var paths []string
	mine := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "0x"):
			id, err := strconv.ParseUint(line[2:], 16, 64)
			mine = err == nil && int64(id) == session
		case mine && strings.HasPrefix(line, "\t"):
			paths = append(paths, strings.TrimPrefix(line, "\t"))
		}
	}
	return paths, nil
}
