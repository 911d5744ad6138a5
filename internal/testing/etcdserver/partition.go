package etcdserver

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/internal/testing/testcert"
)

// WithPartitions lets [Cluster.Partition] cut a member off from the others.
//
// A member's ID derives from the peer URLs every member lists for it, so
// all members must dial a member at the same address, the proxy in front
// of its peer listener: the links between two members cannot have proxies
// of their own, and that proxy sees every other member's connections
// alike. So under this option the members talk to each other over TLS,
// each naming itself in the server name it asks for (SNI, which a
// ClientHello carries in the clear), and the proxy in front of a member
// reads the sender of each connection from its first record. Every
// connection from one member to another carries that member's name, raft
// messages, lease renewals forwarded to the leader and version checks
// alike.
func WithPartitions() Option {
	return func(c *config) { c.partitions = true }
}

// links is which links between the members of a cluster are cut.
type links struct {
	// names[i] is the server name member i asks for when it dials another.
	names []string

	mu  sync.Mutex
	cut [][]bool // cut[i][j]: nothing travels between members i and j
}

// newLinks makes the links of an n-member cluster, all up, and the peer
// TLS configuration every member starts from, with its files in the
// cluster's directory dir.
func newLinks(dir string, n int) (*links, transport.TLSInfo, error) {
	dir = filepath.Join(dir, "peer-tls")
	l := &links{cut: make([][]bool, n)}
	for i := range n {
		l.names = append(l.names, fmt.Sprintf("m%d.peers.test", i))
		l.cut[i] = make([]bool, n)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, transport.TLSInfo{}, fmt.Errorf("etcdserver: %w", err)
	}
	ca, err := testcert.New(dir, "peers")
	if err != nil {
		return nil, transport.TLSInfo{}, fmt.Errorf("etcdserver: peer CA: %w", err)
	}
	pair, err := ca.Server("peer", l.names...)
	if err != nil {
		return nil, transport.TLSInfo{}, fmt.Errorf("etcdserver: peer certificate: %w", err)
	}
	return l, transport.TLSInfo{CertFile: pair.CertFile, KeyFile: pair.KeyFile, TrustedCAFile: ca.File}, nil
}

// hook is the hook of the proxy in front of member to's peer listener: it
// learns each connection's sender from its ClientHello and drops whatever
// travels on it, both ways, while their link is cut. A connection whose
// sender is not a member is closed.
func (l *links) hook(to int) tcpproxy.Hook {
	// The senders of the proxy's connections, by its numbers for them.
	// It keeps one entry per connection the proxy ever relayed, a few
	// dozen in a test.
	from := map[uint64]int{}
	return func(m tcpproxy.Message) tcpproxy.Action {
		l.mu.Lock()
		defer l.mu.Unlock()
		if m.Dir == tcpproxy.Upstream && m.Index == 0 {
			name := helloServerName(m.Data)
			i := 0
			for i < len(l.names) && l.names[i] != name {
				i++
			}
			if i == len(l.names) {
				return tcpproxy.Cut
			}
			from[m.Conn] = i
		}
		// A server speaks only after the ClientHello has passed.
		if i, ok := from[m.Conn]; ok && l.cut[i][to] {
			return tcpproxy.Drop
		}
		return tcpproxy.Forward
	}
}

// set cuts (or restores) the links between member i and every other.
func (l *links) set(i int, cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for j := range l.cut {
		if j != i {
			l.cut[i][j], l.cut[j][i] = cut, cut
		}
	}
}

// Partition cuts member i off from every other member: whatever travels
// between them is lost, both ways, on the connections open now and on
// those dialed later, as in a network partition (nothing is closed). Its
// clients still reach it. The cluster must have been started
// [WithPartitions].
func (c *Cluster) Partition(i int) error { return c.setCut(i, true) }

// Heal ends Partition(i). The connections that lost TLS records meanwhile
// fail their next one and are dialed again.
func (c *Cluster) Heal(i int) error { return c.setCut(i, false) }

func (c *Cluster) setCut(i int, cut bool) error {
	if c.links == nil {
		return errors.New("etcdserver: the cluster was started without WithPartitions")
	}
	if i < 0 || i >= len(c.Members) {
		return fmt.Errorf("etcdserver: no member %d", i)
	}
	c.links.set(i, cut)
	return nil
}

// Leader returns the ID of the leader as the member sees it: 0 while it
// knows of none (a member cut off from the others soon does not) or is
// stopped.
func (m *Member) Leader() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.e == nil {
		return 0
	}
	return uint64(m.e.Server.Leader())
}

// tlsRecord frames a TLS stream into its records.
func tlsRecord(buf []byte) int {
	const header = 5 // type, version, length
	if len(buf) < header {
		return 0
	}
	n := header + int(binary.BigEndian.Uint16(buf[3:header]))
	if len(buf) < n {
		return 0
	}
	return n
}

// errHelloRead ends the handshake that helloServerName starts.
var errHelloRead = errors.New("etcdserver: ClientHello read")

// helloServerName returns the server name that record, a ClientHello, asks
// for, or "". crypto/tls parses it: a server handshake on a connection
// that reads the record and writes nowhere stops at the hello.
func helloServerName(record []byte) string {
	var name string
	_ = tls.Server(&helloConn{r: bytes.NewReader(record)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			name = h.ServerName
			return nil, errHelloRead
		},
	}).Handshake()
	return name
}

// helloConn is the connection helloServerName hands crypto/tls.
type helloConn struct{ r *bytes.Reader }

func (c *helloConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *helloConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *helloConn) Close() error                     { return nil }
func (c *helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *helloConn) SetDeadline(time.Time) error      { return nil }
func (c *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (c *helloConn) SetWriteDeadline(time.Time) error { return nil }
