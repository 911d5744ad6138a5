package zkstore

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/corral-go/corral/internal/clockguard"
	"github.com/corral-go/corral/store"
	"github.com/go-zookeeper/zk"
)

// connectAcked records a connect response read on a link. It reports
// whether the response accepted this Store's session (the first one
// establishes it), in which case it acknowledges the connect request,
// sent at a.sent, and carries the negotiated timeout.
func (s *Store) connectAcked(a ack) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil || a.session == 0 || a.timeout <= 0 {
		return false
	}
	switch s.timedID {
	case 0:
		s.timedID = a.session
	case a.session:
	default:
		return false // another session: not ours to time
	}
	s.negotiated = a.timeout
	s.resetProofsLocked(a.sent, time.Now())
	s.ackLocked(a.sent)
	return true
}

// heard records that the server answered a request of this session, and
// moves the deadline when the answer proves that the leader counted the
// session (see quorum.go).
func (s *Store) heard(a ack) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended == nil {
		s.proveLocked(a, time.Now())
	}
}

// ackLocked moves the session's deadline to sent + the negotiated timeout,
// if that is later than it is, and arms the timer that ends the session a
// guard before the deadline (see expireLocked). sent is when a request
// began to be sent that the leader has counted (see quorum.go). s.mu is
// held.
func (s *Store) ackLocked(sent time.Time) {
	if s.ended != nil {
		return
	}
	if sent.After(s.acked) {
		s.acked = sent
	}
	// The negotiated timeout may have changed: recompute from the latest
	// acknowledgement either way. The timeout is stored first: a reader
	// that sees the new deadline sees its timeout.
	s.timeout.Store(int64(s.negotiated))
	deadline := s.acked.Add(s.negotiated).Sub(s.base)
	s.deadline.Store(int64(deadline))
	if s.noTimer {
		return
	}
	// The timer first wakes at the earliest end the guard allows; onTimer
	// then looks at the guard of that moment.
	at := deadline - clockguard.Limit(s.negotiated)
	switch {
	case s.timer == nil:
		s.timer = time.AfterFunc(at-time.Since(s.base), s.onTimer)
		s.timerAt = at
	case at < s.timerAt:
		// Only a shorter timeout moves the deadline earlier.
		s.timer.Reset(at - time.Since(s.base))
		s.timerAt = at
	}
}

// end returns when the session ends on the client, in time since base: the
// deadline less the guard (see package clockguard), which is for the
// client's own delays (a timer that fires late, a goroutine that wakes
// late, on a loaded machine). It is 0 before the first connect response.
func (s *Store) end() time.Duration {
	d := s.deadline.Load()
	if d == 0 {
		return 0
	}
	return time.Duration(d) - clockguard.Guard(time.Duration(s.timeout.Load()))
}

// onTimer ends the session if its end has passed, or sets the timer again:
// for the earliest end the guard allows, if the deadline has moved since,
// or else for the end the guard sets now.
func (s *Store) onTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return
	}
	s.expireLocked()
	if s.ended == nil {
		at := time.Duration(s.deadline.Load()) - clockguard.Limit(s.negotiated)
		if now := time.Since(s.base); at <= now {
			at = max(s.end(), now)
		}
		s.timer.Reset(at - time.Since(s.base))
		s.timerAt = at
	}
}

// expire ends the session if its end has passed. Everything that reads the
// session's state calls it first, so a process that was stopped past the
// end (SIGSTOP, a VM pause) sees it on its first read, whether or not the
// timer has run yet.
func (s *Store) expire() {
	e := s.end()
	if e == 0 || time.Since(s.base) < e {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
}

// expireLocked is expire with s.mu held.
func (s *Store) expireLocked() {
	e := s.end()
	if s.ended != nil || e == 0 || time.Since(s.base) < e {
		return
	}
	s.endLocked(fmt.Errorf("%w: the leader has counted nothing from session %#x for the negotiated session timeout (%v) less the guard for this process's delays (%v): it has expired the session, or will",
		store.ErrSessionExpired, s.timedID, s.negotiated, clockguard.Guard(s.negotiated).Round(time.Millisecond)))
}

// SessionTimeout returns the session timeout the server granted, which
// may differ from the one asked for with WithSessionTimeout: the server
// clamps it to its own bounds. The Store's session deadline is counted in
// it (see the package doc).
func (s *Store) SessionTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.negotiated
}

// dial is the client's dialer. It wraps each connection in a link (over
// TLS with WithTLS), bounds the dial and the handshake, and once the
// session has ended hands out a standIn instead of connecting: the client
// would otherwise open a new session, and act for a session that is not
// this Store's.
func (s *Store) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if c := s.standInIfEnded(); c != nil {
		return c, nil
	}
	s.mu.Lock()
	bound := s.requested
	if s.negotiated > 0 {
		bound = s.negotiated
	}
	s.mu.Unlock()
	handshakeBy := s.handshakeBound(time.Now(), bound)
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(s.ctx, network, addr)
	if err == nil && s.tls != nil {
		raw := conn
		if conn, err = s.handshake(raw, addr, handshakeBy); err != nil {
			raw.Close()
		}
	}
	if err != nil {
		if c := s.standInIfEnded(); c != nil {
			return c, nil
		}
		s.noteConnErr(err)
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		conn.Close()
		return s.standInLocked(), nil
	}
	l := &link{Conn: conn, s: s, handshakeBy: handshakeBy}
	l.t.z = &s.zxids
	l.t.rounds = &s.rounds
	s.links[l] = struct{}{}
	// Until its answer comes, that is all there is to say.
	s.lastConnErr = fmt.Errorf("%s accepted the connection but has not completed ZooKeeper's handshake (is it a ZooKeeper server?)", addr)
	return l, nil
}

// handshakeBound returns when a handshake begun at now is given up: after
// the session timeout divided by the number of servers, as ZooKeeper's Java
// client does, and, once the session has a deadline, after half the time
// left to it at most. A server may accept a connection and never answer
// its handshake (ZooKeeper 3.8, starting up, leaves open a connection it
// failed to close: TestServerRestart met it), and with one server the
// Java client's bound is the whole session: the client would wait on
// that connection until the session ended, however soon the server could
// have taken another.
func (s *Store) handshakeBound(now time.Time, timeout time.Duration) time.Time {
	by := now.Add(timeout / time.Duration(s.nservers))
	if e := s.end(); e != 0 {
		left := e - now.Sub(s.base)
		by = minTime(by, now.Add(left/2))
	}
	return by
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (s *Store) standInIfEnded() net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended == nil {
		return nil
	}
	return s.standInLocked()
}

// standInLocked returns a new standIn and tells the monitor that the client
// has reached the dialer after the session ended. s.mu is held.
func (s *Store) standInLocked() net.Conn {
	s.standInOnce.Do(func() { close(s.atStandIn) })
	return newStandIn()
}

func (s *Store) dropLink(l *link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.links, l)
}

// closeLinks closes every connection to a server. The client, wherever it
// waits on one (a handshake, a reply), fails at once.
func (s *Store) closeLinks() {
	s.mu.Lock()
	links := make([]*link, 0, len(s.links))
	for l := range s.links {
		links = append(links, l)
	}
	s.mu.Unlock()
	for _, l := range links {
		l.Close()
	}
}

// Reconnection pacing: after trying every server in turn without getting
// a session, the client pauses before the next round, from
// minReconnectPause doubling to maxReconnectPause.
const (
	minReconnectPause = 50 * time.Millisecond
	maxReconnectPause = time.Second
)

// hosts is the client's zk.HostProvider: the servers in the given order,
// tried in turn, with a pause between rounds that the end of the session
// cuts short. It never reports a finished round to the client (which would
// pause a second on its own, out of the Store's reach, and fail the
// requests queued meanwhile): calls made while disconnected wait for the
// reconnection, bounded by their ctx and by the session.
type hosts struct {
	s *Store

	mu      sync.Mutex
	servers []string
	next    int           // index of the next server to try
	tried   int           // servers tried since the last session or pause
	pause   time.Duration // before the next round
}

func (h *hosts) Init(servers []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.servers = servers
	h.pause = minReconnectPause
	return nil
}

func (h *hosts) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.servers)
}

func (h *hosts) Next() (string, bool) {
	h.mu.Lock()
	var pause time.Duration
	if h.tried == len(h.servers) {
		pause, h.tried = h.pause, 0
		h.pause = min(2*h.pause, maxReconnectPause)
	}
	server := h.servers[h.next]
	h.next = (h.next + 1) % len(h.servers)
	h.tried++
	h.mu.Unlock()
	if pause > 0 {
		t := time.NewTimer(pause)
		defer t.Stop()
		select {
		case <-t.C:
		case <-h.s.ctx.Done():
		}
	}
	return server, false
}

func (h *hosts) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tried = 0
	h.pause = minReconnectPause
}

// pause waits before the attempt-th retry of an undo or a lookup after a
// lost connection, and fails when the session ends first.
func (s *Store) pause(attempt int) error {
	d := min(10*time.Millisecond<<min(attempt, 7), time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.ctx.Done():
		return s.endErr()
	}
}

// onEvent follows the client's session state. The client calls it on its
// own goroutine, before it sends any request on a new connection.
func (s *Store) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		s.fire(ev)
		return
	}
	s.mu.Lock()
	var note string
	switch ev.State {
	case zk.StateHasSession:
		id := s.conn.SessionID()
		switch {
		case s.ended != nil:
		case s.id.Load() == 0:
			s.id.Store(id)
			s.connected = true
			close(s.up)
			close(s.established)
			note = "zkstore: session established"
		case id != s.id.Load():
			// The old session expired and the client made a new one.
			s.endLocked(fmt.Errorf("%w: the client got session %#x in its place", store.ErrSessionExpired, id))
		case !s.connected:
			s.connected = true
			s.down = make(chan struct{})
			close(s.up)
			note = "zkstore: reconnected"
		}
	case zk.StateExpired:
		s.endLocked(fmt.Errorf("%w: the server says so", store.ErrSessionExpired))
	case zk.StateDisconnected:
		if s.connected {
			s.connected = false
			close(s.down)
			s.up = make(chan struct{})
			note = "zkstore: connection lost; the session's ephemeral nodes are in doubt until it is regained"
		}
	}
	timeout := s.negotiated
	s.mu.Unlock()
	if note != "" {
		s.log.Info(note, "session", fmt.Sprintf("%#x", s.SessionID()), "server", ev.Server, "timeout", timeout)
	}
}

// endLocked ends the session with cause. s.mu is held.
func (s *Store) endLocked(cause error) {
	if s.ended != nil {
		return
	}
	s.ended = cause
	s.over.Store(true)
	s.cancel(cause)
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.connected {
		s.connected = false
		close(s.down)
	}
	close(s.stop)
}

// monitor shuts the client down once the session has ended, and waits for
// its goroutines to exit.
//
// A session closed while connected is closed on the server: the client
// sends a close request and waits up to a second for the answer (the
// server deletes the session's ephemeral nodes first). Otherwise the
// Store first closes its connections, so the client fails wherever it
// waits on one and redials, gets a standIn from the dialer, and closes at
// once through it.
func (s *Store) monitor() {
	defer close(s.stopped)
	<-s.stop
	s.mu.Lock()
	graceful, cause := s.graceful, s.ended
	s.mu.Unlock()
	if errors.Is(cause, store.ErrSessionExpired) {
		s.log.Warn("zkstore: session ended", "session", fmt.Sprintf("%#x", s.SessionID()), "cause", cause)
	} else {
		s.log.Debug("zkstore: session closed", "session", fmt.Sprintf("%#x", s.SessionID()))
	}
	if !graceful {
		s.closeLinks()
		// Every path of the client leads to the dialer once its
		// connection fails; the timer only guards against a client that
		// behaves otherwise, which would cost the wait below.
		t := time.NewTimer(time.Second)
		select {
		case <-s.atStandIn:
		case <-t.C:
		}
		t.Stop()
	}
	s.conn.Close()
	s.closeLinks()
	for range s.events {
	}
}

// endErr returns the error of calls made after the session ended, or nil.
func (s *Store) endErr() error {
	s.expire()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endErrLocked()
}

func (s *Store) endErrLocked() error {
	switch {
	case s.ended == nil:
		return nil
	case s.closed && s.ended != store.ErrClosed:
		return fmt.Errorf("%w after %w", store.ErrClosed, s.ended)
	}
	return s.ended
}
