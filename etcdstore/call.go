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
// A call of one request or a few in turn (enter, then do for each) makes
// one context per attempt, a child of the caller's ctx with the attempt's
// deadline, which the session's end cancels through the Store's list of
// attempts in flight (attempts): a slot in a slice under s.mu, taken and
// given back without allocating, where a context of the call that follows
// the session (context.AfterFunc on s.ctx) would cost each call a context,
// a registration in the session's context and the layer's own children.
// The errors tell the session's end from the attempt's: do and fail check
// the session first. A call that also waits between its requests waits on
// the session as well (s.sleep); one that waits on more (a follow's Sync)
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
// the session's deadline into the session's end.
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

// attempt is the context of one request in flight, which the session's end
// cancels (see attempts).
type attempt struct {
	ctx    context.Context
	cancel context.CancelFunc
	s      *Store
	slot   int
}

// startAttempt returns the context of one attempt of a call made with ctx:
// it ends with ctx, after the attempt timeout, or when the session ends.
// The caller ends it with end. It fails with the session's error once the
// session has ended.
func (s *Store) startAttempt(ctx context.Context) (attempt, error) {
	actx, cancel := context.WithTimeout(ctx, s.attempt)
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		cancel()
		return attempt{}, s.sessionErr()
	}
	slot := s.attempts.add(cancel)
	s.mu.Unlock()
	return attempt{ctx: actx, cancel: cancel, s: s, slot: slot}, nil
}

// end releases the attempt's context and its slot.
func (a attempt) end() {
	a.s.mu.Lock()
	a.s.attempts.remove(a.slot)
	a.s.mu.Unlock()
	a.cancel()
}

// attempts holds the cancel functions of the attempts in flight, by slot,
// so that the session's end cancels them all; under s.mu. It holds at
// most as many slots as attempts were ever in flight at once.
type attempts struct {
	cancels []context.CancelFunc // nil in a free slot
	free    []int
}

func (as *attempts) add(cancel context.CancelFunc) int {
	if n := len(as.free); n > 0 {
		slot := as.free[n-1]
		as.free = as.free[:n-1]
		as.cancels[slot] = cancel
		return slot
	}
	as.cancels = append(as.cancels, cancel)
	return len(as.cancels) - 1
}

func (as *attempts) remove(slot int) {
	as.cancels[slot] = nil
	as.free = append(as.free, slot)
}

// cancelAll cancels every attempt in flight; they end their slots
// themselves.
func (as *attempts) cancelAll() {
	for _, cancel := range as.cancels {
		if cancel != nil {
			cancel()
		}
	}
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
