package etcdstore

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/store"
)

// begin checks that the session is alive and returns a context for one
// call: it ends with ctx or, with the session's cause, when the session
// ends, so no call outlives the session it was made on.
//
// While the client is disconnected, begin first renews the lease (one
// attempt, within ctx): a call that succeeds after a disconnection has seen
// the session alive, and Disconnected has been reset, by the time it
// returns.
func (s *Store) begin(ctx context.Context) (context.Context, func(), error) {
	if err := s.sessionErr(); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	done := func() { stop(); cancel(nil) }
	if s.isDisconnected() {
		rctx, rcancel := context.WithTimeout(cctx, s.attempt)
		err := s.renew(rctx)
		rcancel()
		if err != nil {
			done()
			if serr := s.sessionErr(); serr != nil {
				return nil, nil, serr
			}
			if ctx.Err() != nil {
				return nil, nil, classify(ctx, err)
			}
			return nil, nil, fmt.Errorf("%w: renew lease: %w", store.ErrDisconnected, err)
		}
	}
	return cctx, done, nil
}

func (s *Store) isDisconnected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discClosed
}

// do sends one request of a call made with ctx, as one attempt: it gives
// the request up after the attempt timeout, and turns a reply that arrives
// after the session's deadline into the session's end.
func do[T any](s *Store, ctx context.Context, rpc func(context.Context) (T, error)) (T, error) {
	actx, cancel := context.WithTimeout(ctx, s.attempt)
	defer cancel()
	v, err := rpc(actx)
	switch {
	case err == nil:
		if serr := s.sessionErr(); serr != nil {
			var zero T
			return zero, serr
		}
	case ctx.Err() == nil && actx.Err() != nil:
		s.log.Debug("etcdstore: attempt given up", "timeout", s.attempt, "err", err)
		err = fmt.Errorf("%w: no reply within the attempt timeout (%v): %w", store.ErrDisconnected, s.attempt, err)
	}
	return v, err
}
