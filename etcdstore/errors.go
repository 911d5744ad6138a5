package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral-go/corral/store"
)

// fail turns the error of a call made with ctx into the contract's terms:
// the session's end wins, then ctx's own end, then what the backend said.
func (s *Store) fail(ctx context.Context, op, p string, err error) error {
	if serr := s.sessionErr(); serr != nil {
		return fmt.Errorf("etcdstore: %s %q: %w", op, store.ShortPath(p), serr)
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The server no longer knows our lease: the session is over,
		// whatever the keepalive loop has seen so far.
		s.end(fmt.Errorf("%w: lease not found by %s", store.ErrSessionExpired, op))
		return fmt.Errorf("etcdstore: %s %q: %w", op, store.ShortPath(p), store.ErrSessionExpired)
	}
	err = classify(ctx, err)
	if errors.Is(err, store.ErrDisconnected) {
		s.probe()
	}
	return fmt.Errorf("etcdstore: %s %q: %w", op, store.ShortPath(p), err)
}

// classify wraps the sentinel an etcd client error means, so that every
// error a call can meet matches one: ctx's error when ctx ended; ErrAuth or
// ErrPermission for refused credentials or rights; ErrTooLarge for a
// request over the server's or gRPC's size limit; ErrInvalidArgument for a
// request the server refuses as malformed (etcd says InvalidArgument or
// OutOfRange: a lease TTL too large); ErrSessionExpired for a lease the
// server no longer knows. Everything else leaves the outcome unknown or
// says the cluster cannot serve the call now, which a later attempt may
// change, and is ErrDisconnected: lost connections, timeouts and
// cancellations that are not ctx's, no leader, a member that is not the
// leader or not ready (FailedPrecondition), too many requests or no space
// (ResourceExhausted), a proposal dropped between leaders, and every code
// etcd does not document for the call (Unknown, such as a server's own
// "context deadline exceeded", Internal, DataLoss, Unimplemented, and
// errors with no code at all).
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != ctx.Err() && errors.Is(err, cause) {
			// ctx's own cause, passed on from a ctx derived from it:
			// the caller gets ctx.Err(), as from the other stores,
			// and the cause only in the text.
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if matchesSentinel(err) {
		return err
	}
	code := codeOf(err)
	if sentinel := authSentinel(err, code); sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	switch {
	case errors.Is(err, rpctypes.ErrRequestTooLarge), isGRPCTooLarge(err, code):
		return fmt.Errorf("%w: %w", store.ErrTooLarge, err)
	case code == codes.InvalidArgument, code == codes.OutOfRange:
		return fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: %w", store.ErrSessionExpired, err)
	}
	return fmt.Errorf("%w: %w", store.ErrDisconnected, err)
}

// matchesSentinel reports whether err already matches a sentinel of the
// contract (an error the Store made itself).
func matchesSentinel(err error) bool {
	for _, s := range []error{
		store.ErrDisconnected, store.ErrSessionExpired, store.ErrClosed,
		store.ErrAuth, store.ErrPermission, store.ErrTooLarge, store.ErrInvalidArgument,
	} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// isGRPCTooLarge reports whether err is gRPC's own refusal of a message
// over its size limit, on either side (it has no error value to match).
func isGRPCTooLarge(err error, code codes.Code) bool {
	return code == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max")
}

// codeOf returns the gRPC code of an etcd client error.
func codeOf(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		// clientv3 turns the server's errors into EtcdError, which
		// keeps the gRPC code apart from status.
		return ee.Code()
	}
	return status.Code(err)
}
