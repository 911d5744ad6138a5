package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// Every error an etcd client call can fail with matches exactly one
// sentinel of the contract, so no caller ever meets an error it cannot
// tell apart: the errors etcd documents (as the client turns them into
// rpctypes errors), every gRPC code, and errors with no code.
func TestClassifyEveryError(t *testing.T) {
	sentinels := []error{
		store.ErrDisconnected, store.ErrSessionExpired, store.ErrClosed, store.ErrAuth,
		store.ErrPermission, store.ErrTooLarge, store.ErrInvalidArgument,
	}
	cases := []struct {
		err  error
		want error
	}{
		// What the issue saw once from an etcd 3.4 member: the server's
		// own deadline, which it sends with no code of its own.
		{status.Error(codes.Unknown, "context deadline exceeded"), store.ErrDisconnected},
		{status.Error(codes.Unknown, "raft proposal dropped"), store.ErrDisconnected},
		{errors.New("etcdclient: no available endpoints"), store.ErrDisconnected},
		{context.DeadlineExceeded, store.ErrDisconnected},
		{fmt.Errorf("wrapped: %w", store.ErrDisconnected), store.ErrDisconnected},
		{status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (5 vs. 4)"), store.ErrTooLarge},
		{rpctypes.Error(rpctypes.ErrGRPCRequestTooLarge), store.ErrTooLarge},
		{rpctypes.Error(rpctypes.ErrGRPCLeaseNotFound), store.ErrSessionExpired},
		{rpctypes.Error(rpctypes.ErrGRPCLeaseTTLTooLarge), store.ErrInvalidArgument},
		{rpctypes.Error(rpctypes.ErrGRPCTooManyOps), store.ErrInvalidArgument},
		{rpctypes.Error(rpctypes.ErrGRPCPermissionDenied), store.ErrPermission},
		{rpctypes.Error(rpctypes.ErrGRPCInvalidAuthToken), store.ErrAuth},
		{rpctypes.Error(rpctypes.ErrGRPCAuthFailed), store.ErrAuth},
		{rpctypes.Error(rpctypes.ErrGRPCNoSpace), store.ErrDisconnected},
		{rpctypes.Error(rpctypes.ErrGRPCRequestTooManyRequests), store.ErrDisconnected},
		{rpctypes.Error(rpctypes.ErrGRPCNotLeader), store.ErrDisconnected},
		{rpctypes.Error(rpctypes.ErrGRPCNotCapable), store.ErrDisconnected},
		{rpctypes.Error(rpctypes.ErrGRPCNoLeader), store.ErrDisconnected},
		{rpctypes.Error(rpctypes.ErrGRPCTimeout), store.ErrDisconnected},
		{rpctypes.Error(rpctypes.ErrGRPCCorrupt), store.ErrDisconnected},
		{rpctypes.Error(rpctypes.ErrGRPCCompacted), store.ErrInvalidArgument},
	}
	for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
		cases = append(cases, struct{ err, want error }{status.Error(code, "some reason"), nil})
	}
	for _, tc := range cases {
		got := etcdstore.Classify(t.Context(), tc.err)
		var matched []error
		for _, s := range sentinels {
			if errors.Is(got, s) {
				matched = append(matched, s)
			}
		}
		if len(matched) != 1 {
			t.Errorf("Classify(%v) = %v, matching %v; want exactly one sentinel", tc.err, got, matched)
			continue
		}
		if tc.want != nil && matched[0] != tc.want {
			t.Errorf("Classify(%v) = %v; want %v", tc.err, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("Classify(%v) = %v; want it to wrap the client's error", tc.err, got)
		}
	}
}

// An ended ctx wins over what the client said.
func TestClassifyEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := status.Error(codes.Unknown, "context deadline exceeded")
	if got := etcdstore.Classify(ctx, err); !errors.Is(got, context.Canceled) || !errors.Is(got, err) {
		t.Errorf("Classify(cancelled ctx, %v) = %v; want context.Canceled wrapping it", err, got)
	}
}

// Open retries, within its ctx, the requests it makes (the read of the
// adapter's keys, the lease grant) when they fail with an error that leaves
// the outcome unknown, including gRPC's Unknown code with a server's
// "context deadline exceeded", and opens a working session.
func TestOpenRetriesUnknownDeadline(t *testing.T) {
	c := etcdserver.Start(t, 1)
	var mu sync.Mutex
	failed := map[string]int{}
	fail := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		n := failed[method]
		failed[method]++
		mu.Unlock()
		if n < 2 && (method == "/etcdserverpb.KV/Range" || method == "/etcdserverpb.Lease/LeaseGrant") {
			return status.Error(codes.Unknown, "context deadline exceeded")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cfg := c.ClientConfig()
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(fail))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := ctxFor(t)
	s, err := etcdstore.Open(ctx, cli)
	if err != nil {
		t.Fatalf("Open = %v; want a session after the transient failures", err)
	}
	defer s.Close()
	mu.Lock()
	grants := failed["/etcdserverpb.Lease/LeaseGrant"]
	mu.Unlock()
	if grants < 3 {
		t.Errorf("Open sent %d grants; want the 2 that failed and one more", grants)
	}
	if _, err := s.Create(ctx, "/open-retried", nil, store.Ephemeral); err != nil {
		t.Errorf("Create after Open = %v", err)
	}
}

// A ctx cancelled with a cause, its cause passed on from a ctx derived
// from it: the caller gets ctx.Err() as from the other stores, not the
// cause (the misuse property test met etcd's Create answering a cancelled
// ctx with its cause, where ZooKeeper and memstore gave context.Canceled).
func TestClassifyContextCause(t *testing.T) {
	cause := errors.New("the caller's cause")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	got := etcdstore.Classify(ctx, context.Cause(ctx))
	if !errors.Is(got, context.Canceled) || errors.Is(got, cause) {
		t.Errorf("Classify(ctx cancelled with %v, its cause) = %v; want context.Canceled, not the cause", cause, got)
	}
}
