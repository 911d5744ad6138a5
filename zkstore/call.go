package zkstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/corral-go/corral/store"
	"github.com/go-zookeeper/zk"
)

// Every request of the Store goes through call: it is admitted while the
// session lives, waits for a connection under its ctx before anything is
// sent, and, when its ctx ends with the request on the wire, leaves the
// outcome to an undo. fail maps the client's errors to the store's
// sentinels.

// begin admits a call that will run on a goroutine of the Store, or returns
// why not.
func (s *Store) begin() error {
	s.expire()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.endErrLocked(); err != nil {
		return err
	}
	s.calls.Add(1)
	return nil
}

// waitConnected blocks until the client is connected with this session, or
// the session ended.
func (s *Store) waitConnected() error {
	s.mu.Lock()
	up := s.up
	s.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-s.ctx.Done():
		return s.endErr()
	}
}

// waitUp waits until the client is connected with this session, ctx ends
// (its error) or the session ends (its end).
func (s *Store) waitUp(ctx context.Context) error {
	s.expire()
	s.mu.Lock()
	up := s.up
	s.mu.Unlock()
	select {
	case <-up:
		return nil
	default:
	}
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		if err := s.endErr(); err != nil {
			return err
		}
		return ctx.Err()
	case <-s.ctx.Done():
		return s.endErr()
	}
}

// call runs f, one or more blocking client requests, and returns its result,
// or ctx.Err() if ctx ends first. A result that arrives after the session
// ended is replaced by the session's end.
//
// When ctx ends first, f goes on in its goroutine (which the Store owns:
// Close waits for it), and its caller's gone reports true to tell it the
// caller has left. Once f returns, its result is passed to undo, if not
// nil, which cleans up after it for as long as the session lives. The
// caller waits for that up to UndoWait, so that on a working connection
// whatever the abandoned call made is gone when it returns.
func call[T any](s *Store, ctx context.Context, f func(left *caller) (T, error), undo func(T, error)) (T, error) {
	if err := s.admit(ctx); err != nil {
		var zero T
		return zero, err
	}
	return admitted(s, ctx, f, undo)
}

// admitted is call once the call is admitted.
func admitted[T any](s *Store, ctx context.Context, f func(left *caller) (T, error), undo func(T, error)) (T, error) {
	if ctx.Done() == nil {
		// Nothing can cancel the call: no goroutine needed.
		defer s.calls.Done()
		v, err := f(nil)
		return settle(s, v, err)
	}
	return start(s, f, undo).wait(ctx)
}

// admit readies a call: it fails with ctx's error, or the session's end,
// or waits for a connection under ctx, and then admits the call (begin),
// whose end the caller reports with s.calls.Done.
func (s *Store) admit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A request handed to the client while it is disconnected waits in its
	// queue and goes out on the next connection, however long after its
	// caller left; a create would then make a node its caller gave up on
	// long before. So the wait for the connection is made here, where ctx
	// calls it off with nothing sent.
	if err := s.waitUp(ctx); err != nil {
		return err
	}
	return s.begin()
}

// A caller is the side of a call that may leave before its result (see
// call). A nil *caller never leaves.
type caller struct{ state atomic.Int32 }

// The states of a call: f runs, f has returned and its result is kept for
// the caller, the caller has left.
const (
	running int32 = iota
	finished
	abandoned
)

// gone reports whether the caller has left.
func (c *caller) gone() bool { return c != nil && c.state.Load() == abandoned }

// A job is one call of f, admitted (see admit), that runs on a goroutine
// of the Store. It is one allocation, with the channel that signals its
// end: the job is what goRun hands over, and its fields are written only
// by that goroutine before done closes, read by the caller after.
type job[T any] struct {
	caller
	s    *Store
	f    func(*caller) (T, error)
	undo func(T, error)
	v    T
	err  error
	done chan struct{} // closed once v and err are kept, or undo is done
}

// start runs f, a call admitted with admit, on a goroutine of the Store.
func start[T any](s *Store, f func(*caller) (T, error), undo func(T, error)) *job[T] {
	j := &job[T]{s: s, f: f, undo: undo, done: make(chan struct{})}
	s.goRun(j)
	return j
}

func (j *job[T]) run() {
	defer j.s.calls.Done()
	defer close(j.done)
	v, err := j.f(&j.caller)
	if j.state.CompareAndSwap(running, finished) {
		j.v, j.err = v, err
		return
	}
	if j.undo != nil {
		j.undo(v, err)
	}
}

// wait returns the job's result as call does, or ctx.Err() if ctx ends
// first.
func (j *job[T]) wait(ctx context.Context) (T, error) {
	select {
	case <-j.done:
		return settle(j.s, j.v, j.err)
	case <-ctx.Done():
	}
	if !j.state.CompareAndSwap(running, abandoned) {
		// The result won the race: keep it rather than undo it.
		<-j.done
		return settle(j.s, j.v, j.err)
	}
	if j.undo != nil {
		t := time.NewTimer(UndoWait)
		defer t.Stop()
		select {
		case <-j.done:
		case <-t.C:
		}
	}
	var zero T
	return zero, ctx.Err()
}

// settle is the result of a call: v and err, unless the session ended
// before it arrived.
func settle[T any](s *Store, v T, err error) (T, error) {
	if err == nil {
		if end := s.endErr(); end != nil {
			var zero T
			return zero, end
		}
	}
	return v, err
}

// fail wraps err, from a call on path, onto the store's sentinels.
func (s *Store) fail(op, path string, err error) error {
	if end := s.endErr(); end != nil {
		return fmt.Errorf("zkstore: %s %s: %w", op, store.ShortPath(path), end)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, store.ErrInvalidPath) || errors.Is(err, store.ErrDisconnected) ||
		errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrSessionExpired) ||
		errors.Is(err, store.ErrAuth) || errors.Is(err, store.ErrPermission) {
		return fmt.Errorf("zkstore: %s %s: %w", op, store.ShortPath(path), err)
	}
	if sentinel := sentinelOf(err); sentinel != nil {
		return fmt.Errorf("zkstore: %s %s: %w (%w)", op, store.ShortPath(path), sentinel, err)
	}
	return fmt.Errorf("zkstore: %s %s: %w", op, store.ShortPath(path), err)
}

func sentinelOf(err error) error {
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return store.ErrNoNode
	case errors.Is(err, zk.ErrNodeExists):
		return store.ErrNodeExists
	case errors.Is(err, zk.ErrNotEmpty):
		return store.ErrNotEmpty
	case errors.Is(err, zk.ErrBadVersion):
		return store.ErrBadVersion
	case errors.Is(err, zk.ErrNoChildrenForEphemerals):
		return store.ErrEphemeralParent
	case errors.Is(err, zk.ErrInvalidPath), errors.Is(err, zk.ErrBadArguments):
		return store.ErrInvalidPath
	case errors.Is(err, zk.ErrSessionExpired):
		return store.ErrSessionExpired
	case errors.Is(err, zk.ErrNoAuth):
		return store.ErrPermission
	case errors.Is(err, zk.ErrAuthFailed):
		return store.ErrAuth
	case errors.Is(err, zk.ErrInvalidACL):
		return store.ErrInvalidArgument
	case isConnErr(err):
		return store.ErrDisconnected
	}
	return nil
}

// isConnErr reports whether err means the connection failed, leaving the
// outcome of a request unknown.
func isConnErr(err error) bool {
	var ne net.Error
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}
