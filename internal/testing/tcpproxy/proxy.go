// Package tcpproxy is a small TCP proxy on loopback for fault-injection
// tests: it relays every connection it accepts to one target address and lets
// a test cut, refuse or freeze the traffic, and restore it.
//
// A test points its client at [Proxy.Addr] instead of the server. The proxy
// knows nothing of the protocol it relays; a test that needs to act on one
// message (forward a request, then close the connection before its reply)
// gives the proxy a [Framer] that splits each stream into messages and a
// [Hook] that decides, message by message, what to do.
//
// All methods are safe for concurrent use.
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package tcpproxy

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction is the way a message travels through the proxy.
type Direction int

const (
	// Upstream messages travel from the client to the target.
	Upstream Direction = iota
	// Downstream messages travel from the target to the client.
	Downstream
)

func (d Direction) String() string {
	if d == Upstream {
		return "upstream"
	}
	return "downstream"
}

// Message is one message seen by a [Hook].
type Message struct {
	// Conn numbers the proxied connections from 1 in the order they were
	// accepted.
	Conn uint64
	Dir  Direction
	// Index numbers the messages of one direction of one connection from 0.
	Index int
	// Data is the message, framing included. The hook must not keep it.
	Data []byte
}

// Action is what a [Hook] tells the proxy to do with a message.
type Action int

const (
	// Forward relays the message.
	Forward Action = iota
	// ForwardThenCut relays the message, stops relaying anything in the
	// other direction at once and closes both sides of the connection: a
	// request is delivered but its reply never is.
	ForwardThenCut
	// Drop discards the message and keeps the connection.
	Drop
	// Cut discards the message and closes both sides of the connection.
	Cut
)

// Hook decides what happens to a message. It runs on the connection's relay
// goroutine and must not block.
type Hook func(Message) Action

// Framer returns the length of the first complete message at the start of
// buf, or 0 when buf does not hold a complete message yet. A negative length
// means the stream cannot be framed; the connection is then closed.
type Framer func(buf []byte) int

// LengthPrefixed frames a stream of messages that each start with their
// length as a 4-byte big-endian integer not counting those 4 bytes (the
// framing of ZooKeeper's protocol, among others).
func LengthPrefixed(buf []byte) int {
	if len(buf) < 4 {
		return 0
	}
	n := int(binary.BigEndian.Uint32(buf))
	if n < 0 || n > 64<<20 {
		return -1
	}
	if len(buf) < 4+n {
		return 0
	}
	return 4 + n
}

type mode int

const (
	forwarding mode = iota
	frozen
	refusing
)

// Proxy relays connections from its own loopback address to a target.
// Create one with [New]; the zero value is not usable.
type Proxy struct {
	ln     net.Listener
	target string
	ids    atomic.Uint64
	bytes  [2]atomic.Int64 // relayed, by Direction

	mu     sync.Mutex
	mode   mode
	open   chan struct{} // closed while traffic may flow
	links  map[*link]struct{}
	framer Framer
	hook   Hook
	closed bool

	wg sync.WaitGroup
}

// New starts a proxy listening on a free port of 127.0.0.1 that relays to
// target. Close stops it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		ln:     ln,
		target: target,
		open:   make(chan struct{}),
		links:  make(map[*link]struct{}),
	}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Bytes returns how many bytes the proxy has relayed in direction dir,
// over all its connections.
func (p *Proxy) Bytes(dir Direction) int64 { return p.bytes[dir].Load() }

// Addr returns the address clients dial, as "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy relays to.
func (p *Proxy) Target() string { return p.target }

// Conns returns the number of connections open through the proxy now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// SetHook makes the proxy split both directions of every connection with
// framer and ask hook about each message. A nil hook (or framer) relays
// bytes as they come. It applies to bytes read after the call.
func (p *Proxy) SetHook(framer Framer, hook Hook) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if framer == nil || hook == nil {
		framer, hook = nil, nil
	}
	p.framer, p.hook = framer, hook
}

// Cut closes every connection now open. New connections are relayed as
// usual.
func (p *Proxy) Cut() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Refuse cuts every connection and, until Restore, closes each new
// connection as soon as it is accepted: the client sees a server that
// hangs up on it.
func (p *Proxy) Refuse() {
	p.setMode(refusing)
	p.Cut()
}

// Freeze stops all traffic without closing anything: open connections stay
// open and new ones are accepted, but no byte is relayed either way until
// Restore. The peers see a network partition.
func (p *Proxy) Freeze() { p.setMode(frozen) }

// Restore ends Refuse or Freeze: traffic flows again, including bytes held
// while frozen.
func (p *Proxy) Restore() { p.setMode(forwarding) }

func (p *Proxy) setMode(m mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == m {
		return
	}
	wasForwarding := p.mode == forwarding
	p.mode = m
	switch {
	case m == forwarding:
		close(p.open)
	case wasForwarding:
		p.open = make(chan struct{})
	}
}

// Close stops listening, closes every connection and waits for the relay
// goroutines to exit. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if already {
		return nil
	}
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed || p.mode == refusing {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	l := &link{id: p.ids.Add(1), client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.mode == refusing {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(l, Upstream) }()
	go func() { defer wg.Done(); p.pump(l, Downstream) }()
	wg.Wait()

	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pump relays one direction of l until either side closes.
func (p *Proxy) pump(l *link, dir Direction) {
	defer l.close()
	src, dst := l.client, l.server
	if dir == Downstream {
		src, dst = l.server, l.client
	}
	buf := make([]byte, 0, 32<<10)
	index := 0
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		for len(buf) > 0 {
			p.mu.Lock()
			framer, hook := p.framer, p.hook
			p.mu.Unlock()
			size := len(buf)
			if framer != nil {
				size = framer(buf)
				if size < 0 {
					return
				}
				if size == 0 {
					break
				}
			}
			act := Forward
			if hook != nil {
				act = hook(Message{Conn: l.id, Dir: dir, Index: index, Data: buf[:size]})
				index++
			}
			if !p.relay(l, dir, dst, buf[:size], act) {
				return
			}
			buf = buf[:copy(buf, buf[size:])]
		}
		if err != nil {
			return
		}
	}
}

// relay carries out act for msg and reports whether the pump goes on.
func (p *Proxy) relay(l *link, dir Direction, dst net.Conn, msg []byte, act Action) bool {
	switch act {
	case Drop:
		return true
	case Cut:
		return false
	}
	if !p.wait(l) || l.muted(dir) {
		return false
	}
	if act == ForwardThenCut {
		// Mute the other direction before the request can be answered.
		l.mute(1 - dir)
	}
	if _, err := dst.Write(msg); err != nil {
		return false
	}
	p.bytes[dir].Add(int64(len(msg)))
	return act != ForwardThenCut
}

// wait blocks while traffic is frozen and reports false once l is closed.
func (p *Proxy) wait(l *link) bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-l.done:
		return false
	}
}

type link struct {
	id             uint64
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
	mutedDirs      [2]atomic.Bool
}

func (l *link) mute(d Direction)       { l.mutedDirs[d].Store(true) }
func (l *link) muted(d Direction) bool { return l.mutedDirs[d].Load() }

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.server.Close()
	})
}
