package etcdstore

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

// A call ends with its ctx or, with the session's cause, when the session
// ends, so no call outlives the session it was made on; each of its
// requests is one attempt, given up after the attempt timeout.
//
// A call of one request or a few in turn (enter, then do for each) gives
// each attempt a context (attemptCtx) that ends at the first of the call's
// ctx, the attempt timeout and the session's end. Its Done channel is that
// of a context of the Store's, a child of the session's context (so the
// session's end cancels it with the session's cause) with a timer for the
// attempt timeout, taken from a pool and given back when the attempt ends
// with neither fired: after the first attempts, one costs no context of
// the context package, no timer, and no list of children for the contexts
// gRPC derives from it per request (they register with the pooled one, as
// with any context of the context package: see attemptCtx.Value). The
// call's ctx is followed with context.AfterFunc, only when it can end. The
// errors tell the session's end from the attempt's: do and fail check the
// session first. A call that also waits between its requests waits on the
// session as well (s.sleep); one that waits on more (a follow's Sync)
// takes a context that follows the session: begin.

// enter checks that the session is alive, for a call made with ctx.
//
// While the client is disconnected, enter first renews the lease (one
// attempt, within ctx): a call that succeeds after a disconnection has seen
// the session alive, and Disconnected has been reset, by the time it
// returns.
func (s *Store) enter(ctx context.Context) error {
	if err := s.sessionErr(); err != nil {
		return err
	}
	if !s.isDisconnected() {
		return nil
	}
	a, err := s.startAttempt(ctx)
	if err != nil {
		return err
	}
	err = s.renew(a.ctx)
	a.end()
	if err != nil {
		if serr := s.sessionErr(); serr != nil {
			return serr
		}
		if ctx.Err() != nil {
			return classify(ctx, err)
		}
		return fmt.Errorf("%w: renew lease: %w", store.ErrDisconnected, err)
	}
	return nil
}

// begin is enter, and returns a context for the whole call: it ends with
// ctx or, with the session's cause, when the session ends.
func (s *Store) begin(ctx context.Context) (context.Context, func(), error) {
	if err := s.enter(ctx); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	return cctx, func() { stop(); cancel(nil) }, nil
}

func (s *Store) isDisconnected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discClosed
}

// do sends one request of a call made with ctx, as one attempt: it gives
// the request up after the attempt timeout (ErrDisconnected), or when the
// session ends (the session's error), and turns a reply that arrives after
// the session's end (its deadline less the guard) into the session's error.
func do[T any](s *Store, ctx context.Context, rpc func(context.Context) (T, error)) (T, error) {
	var zero T
	a, err := s.startAttempt(ctx)
	if err != nil {
		return zero, err
	}
	v, err := rpc(a.ctx)
	timedOut := a.ctx.Err() == context.DeadlineExceeded
	a.end()
	if serr := s.sessionErr(); serr != nil {
		// The session ended while the request was out: it cancelled
		// the attempt, or its reply came too late to prove anything.
		return zero, serr
	}
	if err != nil && ctx.Err() == nil && timedOut {
		s.log.Debug("etcdstore: attempt given up", "timeout", s.attempt, "err", err)
		err = fmt.Errorf("%w: no reply within the attempt timeout (%v): %w", store.ErrDisconnected, s.attempt, err)
	}
	return v, err
}

// attempt is one request in flight (see the top of this file).
type attempt struct {
	ctx *attemptCtx
	s   *Store
}

// startAttempt returns the context of one attempt of a call made with ctx:
// it ends with ctx, after the attempt timeout, or when the session ends.
// The caller ends it with end. It fails with the session's error once the
// session has ended.
func (s *Store) startAttempt(ctx context.Context) (attempt, error) {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		return attempt{}, s.sessionErr()
	}
	w := s.attemptCtxs.take()
	s.mu.Unlock()
	if w == nil {
		w = s.newWatch()
	} else {
		w.timer.Reset(s.attempt)
	}
	w.call = ctx
	if ctx.Done() != nil {
		w.stopCall = context.AfterFunc(ctx, w.callEnded)
		if ctx.Err() != nil {
			// Ended already: the attempt too, now, not once
			// AfterFunc's goroutine has run (the request would go
			// out meanwhile).
			w.callEnded()
		}
	}
	return attempt{ctx: &attemptCtx{call: ctx, w: w}, s: s}, nil
}

// newWatch returns a watch whose timer runs for the attempt timeout.
func (s *Store) newWatch() *watch {
	w := new(watch)
	w.ctx, w.cancel = context.WithCancelCause(s.ctx)
	w.timer = time.AfterFunc(s.attempt, func() { w.cancel(errAttemptTimeout) })
	w.callEnded = func() { w.cancel(context.Cause(w.call)) }
	return w
}

// end ends the attempt: its watch goes back to the pool unless it fired
// (or may still fire), which no later attempt may then inherit.
func (a attempt) end() {
	w := a.ctx.w
	// Both stopped, whatever the first says.
	called := w.stopCall != nil && !w.stopCall()
	fired := !w.timer.Stop()
	w.stopCall = nil
	if called || fired || w.ctx.Err() != nil {
		w.cancel(nil) // out of the session's context's children
		return
	}
	a.s.mu.Lock()
	a.s.attemptCtxs.give(w)
	a.s.mu.Unlock()
}

// errAttemptTimeout is the cause of an attempt given up after the attempt
// timeout.
var errAttemptTimeout = fmt.Errorf("etcdstore: attempt timeout: %w", context.DeadlineExceeded)

// watch is the part of an attempt's context that the Store keeps for the
// next attempt: a context that the session's end cancels, the timer of the
// attempt timeout, and the attempt's following of its call's ctx.
type watch struct {
	ctx       context.Context // a child of the session's context
	cancel    context.CancelCauseFunc
	timer     *time.Timer // cancels ctx after the attempt timeout
	call      context.Context
	callEnded func()      // cancels ctx with call's cause; made once
	stopCall  func() bool // stops the following of call, or nil
}

// attemptCtx is the context of one attempt: the values and the deadline of
// its call's ctx, and the Done channel of its watch. The attempt timeout is
// the client's alone: it is not the context's deadline, which gRPC sends
// to the server as a header that the server parses, and arms a timer for,
// on every request (a request the server has proposed runs to its end
// whatever that timer says). A new attemptCtx is made per attempt (one
// allocation): gRPC keeps the contexts it derives from it for a while
// after the request returns, and they refer to their parent, where the
// watch goes on to serve the next attempt.
type attemptCtx struct {
	call context.Context
	w    *watch
}

func (a *attemptCtx) Deadline() (time.Time, bool) { return a.call.Deadline() }

func (a *attemptCtx) Done() <-chan struct{} { return a.w.ctx.Done() }

// Err is the call's error once its ctx has ended, DeadlineExceeded after
// the attempt timeout, and Canceled after the session's end.
func (a *attemptCtx) Err() error {
	if a.w.ctx.Err() == nil {
		return nil
	}
	if context.Cause(a.w.ctx) == errAttemptTimeout {
		return context.DeadlineExceeded
	}
	if err := a.call.Err(); err != nil {
		return err
	}
	return context.Canceled
}

// Value returns the call's values, except for the key with which the
// context package looks for a context of its own among a context's parents
// (a *int of its own): to that it answers with the watch's context, whose
// Done channel is this one's. A context derived from this one (gRPC's, per
// request) is then registered with the watch's context, as with any context
// of the package, instead of following this one with a goroutine.
func (a *attemptCtx) Value(key any) any {
	if _, ok := key.(*int); ok {
		if v := a.w.ctx.Value(key); v == any(a.w.ctx) {
			return v
		}
	}
	return a.call.Value(key)
}

// attemptCtxs is the pool of watches of attempts that ended with neither
// fired; under s.mu. It keeps at most maxIdleWatches.
type attemptCtxs struct {
	idle []*watch
}

const maxIdleWatches = 64

func (p *attemptCtxs) take() *watch {
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	w := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return w
}

func (p *attemptCtxs) give(w *watch) {
	if len(p.idle) >= maxIdleWatches {
		w.cancel(nil)
		return
	}
	p.idle = append(p.idle, w)
}

// sleep waits for d, ctx's end (and returns its cause) or, once the
// session is open, the session's end (and returns its error). Open's own
// retries, made before there is a session, wait on ctx alone.
func (s *Store) sleep(ctx context.Context, d time.Duration) error {
	var ended <-chan struct{} // nil, which never delivers, before the session opens
	if s.ctx != nil {
		ended = s.ctx.Done()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-ended:
		return s.sessionErr()
	}
}

// txn sends one transaction as KV.Do does, which builds its request's
// slices at their size: the Txn builder grows them one operation at a
// time, and allocates itself besides.
func (s *Store) txn(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := s.kv.Do(ctx, clientv3.OpTxn(cmps, then, els))
	if err != nil {
		return nil, err
	}
	return resp.Txn(), nil
}
