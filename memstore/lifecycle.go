package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-go/corral/store"
)

// A session ends in two halves, as on a real store. Its client half ends
// the session for its process: its calls fail, its watches report the
// end, its Context is cancelled, and with it every hold derived from it.
// Its server half frees what the session held for every other session:
// its ephemeral nodes go, and other sessions' watches on them fire.
//
// A real client ends its session on its own clock before the server can
// (see Sessions in store's doc), so a hold's context ends before its node
// can be granted to another session: Expire keeps that order, with the
// server's margin between the halves. Close ends both halves in one step.
// A frozen process (Freeze) ends in the other order: the server expires
// it while the process sees nothing, and the process learns of the end on
// Thaw.

// DefaultExpiryMargin is the time, unless WithExpiryMargin says otherwise,
// between the two halves of an expiry (Expire): the session's Context
// ends, then, this much later, its ephemeral nodes go. It stands for the
// guard a real store keeps between its client's session deadline and the
// server's (zkstore's is a twentieth of the session timeout: 100 ms at
// 2 s), and gives a goroutine that watches a hold's context the time to
// see it end (stop its work) before the hold's node passes to another
// session.
const DefaultExpiryMargin = 50 * time.Millisecond

// DefaultSessionTimeout is the time, unless WithSessionTimeout says
// otherwise, after which the server expires a frozen session (see
// Store.Freeze).
const DefaultSessionTimeout = time.Second

// Option configures a Server.
type Option func(*options)

type options struct {
	margin  time.Duration
	timeout time.Duration
}

// WithExpiryMargin sets the time between the end of an expiring session's
// Context and the removal of its ephemeral nodes (see DefaultExpiryMargin
// and Store.Expire). A margin of 0 ends both in one step; a negative one
// counts as 0.
func WithExpiryMargin(d time.Duration) Option {
	return func(o *options) { o.margin = max(d, 0) }
}

// WithSessionTimeout sets the time after which the server expires a
// frozen session (see Store.Freeze), counted from the freeze: the
// session's last contact. A timeout of 0 or less keeps
// DefaultSessionTimeout.
func WithSessionTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// endClient ends the client half of a live session for cause (see above)
// and reports whether it did: false when that half had ended already.
func (s *Server) endClient(st *Store, cause error) bool {
	if st.ended != nil {
		return false
	}
	st.ended = cause
	for w := range st.watches {
		s.deliver(w, store.Event{Err: cause})
	}
	for f := range st.follows {
		s.endFollow(f, cause)
	}
	s.endTrees(st, func(string) error { return cause })
	if !st.disconnected {
		close(st.disc)
	}
	st.cancel(cause)
	return true
}

// endServer ends the server half of a session: its ephemeral nodes go. It
// is idempotent.
func (s *Server) endServer(st *Store) {
	if st.freed == nil {
		return
	}
	paths := make([]string, 0, len(st.ephemerals))
	for p := range st.ephemerals {
		paths = append(paths, p)
	}
	for _, p := range paths {
		_ = s.delete(p) // ephemerals have no children
	}
	delete(s.sessions, st.id)
	close(st.freed)
	st.freed = nil
	if st.expiry != nil {
		st.expiry.Stop()
		st.expiry = nil
	}
}

// Expire ends the session as a server would after a long partition, in
// the order a real store keeps: first the session's Context is cancelled
// (with store.ErrSessionExpired as its cause), so every hold derived from
// it ends, its watches fail and its calls fail with
// store.ErrSessionExpired; then, the server's expiry margin later
// (WithExpiryMargin), its ephemeral nodes go and other sessions' watches
// on them fire. Expire blocks for that margin and returns once the nodes
// are gone.
//
// On a frozen session (Freeze) Expire is the server's expiry alone, as
// when the session's timeout passes: its ephemeral nodes go at once, and
// the session learns of the end on Thaw. Expire on an ended session
// does nothing more, beyond waiting until its nodes are gone.
func (st *Store) Expire() {
	s := st.srv
	s.mu.Lock()
	if st.frozen {
		s.expireFrozen(st)
		s.mu.Unlock()
		return
	}
	first := s.endClient(st, store.ErrSessionExpired)
	freed := st.freed
	s.mu.Unlock()
	if freed == nil {
		return
	}
	if !first {
		<-freed // the first expiry, or a Close, frees them
		return
	}
	if s.opts.margin > 0 {
		t := time.NewTimer(s.opts.margin)
		select {
		case <-t.C:
		case <-freed: // a Close meanwhile
			t.Stop()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endServer(st)
}

// expireFrozen is the server's expiry of the frozen session st: its
// ephemeral nodes go; its client half waits for Thaw.
func (s *Server) expireFrozen(st *Store) {
	if st.expiredAtServer {
		return
	}
	st.expiredAtServer = true
	s.endServer(st)
}

// Freeze pauses the session's process, as SIGSTOP or a stopped VM would:
// from now on its calls block (until Thaw, or their ctx ends), its watches
// and follows deliver nothing, and nothing it holds changes for it; its
// Context is not cancelled, whatever happens at the server, since the
// process cannot look. Other sessions go on: the server keeps the session
// alive for its timeout (WithSessionTimeout) after the freeze and then
// expires it, as Expire on a frozen session does at once: its ephemeral
// nodes go, and its holds may be granted to others, while it still
// believes it holds them. Thaw resumes it. Freeze on a frozen or ended
// session does nothing. It does not block.
func (st *Store) Freeze() {
	s := st.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.ended != nil || st.frozen {
		return
	}
	st.frozen = true
	st.thawed = make(chan struct{})
	st.expiry = time.AfterFunc(s.opts.timeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if st.frozen {
			s.expireFrozen(st)
		}
	})
}

// Thaw resumes a frozen session: what its watches and follows saw while
// it was frozen is delivered, and its blocked calls go on. If the server
// expired the session meanwhile, the session sees the end now, as a
// resumed process does on its first read of its session clock: its
// Context is cancelled with store.ErrSessionExpired, its watches and
// follows report it, and its calls, the blocked ones included, fail with
// it. Thaw on a session that is not frozen does nothing. It does not
// block.
func (st *Store) Thaw() {
	s := st.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	s.thaw(st)
}

// thaw ends st's freeze, if it is frozen: see Thaw.
func (s *Server) thaw(st *Store) {
	if !st.frozen {
		return
	}
	st.frozen = false
	close(st.thawed)
	if st.expiry != nil {
		st.expiry.Stop()
		st.expiry = nil
	}
	held := st.held
	st.held = nil
	for _, h := range held {
		h.w.ch <- h.ev
		close(h.w.ch)
	}
	for f := range st.follows {
		if f.changes.Len() > 0 {
			f.changes.Wake()
		}
	}
	for f := range st.trees {
		if f.changes.Len() > 0 {
			f.changes.Wake()
		}
	}
	if st.expiredAtServer {
		s.endClient(st, store.ErrSessionExpired)
	}
}

// heldEvent is an event of a frozen session's watch, delivered on Thaw.
type heldEvent struct {
	w  *watch
	ev store.Event
}

// awaitThaw waits, with srv.mu held on entry and on return, until st is
// not frozen or ctx ends: a frozen process's call blocks.
func (st *Store) awaitThaw(ctx context.Context, op, p string) error {
	for st.frozen {
		thawed := st.thawed
		st.srv.mu.Unlock()
		var err error
		select {
		case <-thawed:
		case <-ctx.Done():
			err = fmt.Errorf("memstore: %s %q: %w", op, store.ShortPath(p), ctx.Err())
		}
		st.srv.mu.Lock()
		if err != nil {
			return err
		}
	}
	return nil
}
