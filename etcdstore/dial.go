package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/corral-go/corral/store"
)

// Dial creates a client from cfg and opens a session on it as [Open] does.
// The Store owns that client and closes it in Close. cfg's TLS, Username
// and Password are how a Store reaches a cluster that requires them; a
// wrong password or an unknown user fails with [store.ErrAuth].
//
// With cfg.TLS, Dial makes one TLS connection of its own to each endpoint
// beside the client's: when every endpoint has either refused a
// certificate (the client's, or the server's that cfg.TLS does not trust)
// or could not be reached, and at least one refused, Dial fails at once
// with [store.ErrAuth], naming each refusing endpoint and why, however
// long cfg.DialTimeout or ctx. gRPC alone would report the refusal only
// when a request's time is up (clientv3.New's authentication, with
// credentials, waits up to cfg.DialTimeout, lowered to what is left of
// ctx), and under TLS 1.3 often only as a broken pipe. An endpoint that
// cannot be reached is never a refusal: it is retried until ctx ends, as
// without TLS.
//
// Unless cfg sets Logger or LogConfig, the client logs through the logger
// of [WithLogger] (at debug level), or not at all: clientv3's default
// logger writes warnings to stderr, one for every call cancelled by its
// caller. An empty cfg.Endpoints fails with [store.ErrInvalidArgument].
// When ctx ends before a lease is granted, the error wraps ctx's error and
// says which endpoints were tried and why they did not answer (connection
// refused, name not found, connected but no reply, ...), and any
// certificate refusal seen ([store.ErrAuth]).
func Dial(ctx context.Context, cfg clientv3.Config, opts ...Option) (*Store, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("etcdstore: dial: %w: no endpoints", store.ErrInvalidArgument)
	}
	if cfg.Logger == nil && cfg.LogConfig == nil {
		cfg.Logger = clientLogger(o.logger)
	}
	if dl, ok := ctx.Deadline(); ok && cfg.DialTimeout > time.Until(dl) {
		// New blocks for up to DialTimeout (authenticating, with
		// credentials) and takes no ctx: keep it within Dial's.
		cfg.DialTimeout = max(time.Until(dl), time.Millisecond)
	}
	diag := new(dialDiag)
	cfg.DialOptions = append(slices.Clip(cfg.DialOptions), grpc.WithChainUnaryInterceptor(diag.intercept))
	// A probe that finds the certificate refused ends the client's dial
	// (and authentication, which takes no ctx but cfg.Context) and the
	// session's opening at once.
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	base := cfg.Context
	if base == nil {
		base = context.Background()
	}
	cctx, ccancel := context.WithCancel(base)
	cfg.Context = cctx
	probe := startProbe(ctx, cfg.TLS, cfg.Endpoints, func(error) {
		ocancel()
		ccancel()
	})
	s, err := dial(octx, cfg, o, diag)
	refusal, fired := probe.stop()
	switch {
	case err == nil && fired:
		// Every endpoint refused, or could not be reached, just as the
		// session opened: the client is cancelled.
		s.Close()
	case err == nil:
		s.closeClient = ccancel
		return s, nil
	case fired:
	case refusal != nil && !errors.Is(err, store.ErrAuth) && !errors.Is(err, store.ErrPermission):
		// Some endpoint refused the certificate and none was usable.
		ccancel()
		return nil, fmt.Errorf("etcdstore: dial %v: %w (%w)", cfg.Endpoints, refusal, err)
	default:
		ccancel()
		return nil, err
	}
	ccancel()
	return nil, fmt.Errorf("etcdstore: dial %v: %w", cfg.Endpoints, refusal)
}

// dial creates a client from cfg and opens a session on it; the Store owns
// the client.
func dial(ctx context.Context, cfg clientv3.Config, o options, diag *dialDiag) (*Store, error) {
	cli, err := clientv3.New(cfg)
	if err != nil {
		// With credentials, New authenticates at once, waiting up to
		// cfg.DialTimeout for a connection.
		if sentinel := authSentinel(err, codeOf(err)); sentinel != nil {
			return nil, fmt.Errorf("etcdstore: dial %v: %w: %w", cfg.Endpoints, sentinel, err)
		}
		if refusal := tlsRefusal(err, diag); refusal != nil {
			return nil, fmt.Errorf("etcdstore: dial %v: %w", cfg.Endpoints, refusal)
		}
		if p := diag.last.Load(); p != nil {
			return nil, fmt.Errorf("etcdstore: dial %v: %w (last error: %v)", cfg.Endpoints, err, *p)
		}
		return nil, fmt.Errorf("etcdstore: dial %v: %w", cfg.Endpoints, err)
	}
	s, err := open(ctx, cli, o, diag)
	if err != nil {
		cli.Close()
		return nil, err
	}
	s.ownClient = true
	return s, nil
}

// dialDiag keeps the last error of a request of a client made by Dial, as
// gRPC reported it: before clientv3 turns it into ctx's bare error, it
// holds why no connection could be used ("connection refused", ...).
type dialDiag struct {
	last atomic.Pointer[error]
}

func (d *dialDiag) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		last := err // on the heap only when there is one to keep
		d.last.Store(&last)
	}
	return err
}

// unreachable is the error of an Open whose ctx ended before a lease was
// granted: what was tried, what the connection was doing, the last error
// seen (gRPC's own when Dial made the client), wrapping ctx's error.
func unreachable(ctx context.Context, cli *clientv3.Client, diag *dialDiag, last error) error {
	if diag != nil {
		if p := diag.last.Load(); p != nil {
			last = *p
		}
	}
	why := "no reply"
	if conn := cli.ActiveConnection(); conn != nil {
		switch conn.GetState() {
		case connectivity.TransientFailure:
			why = "cannot connect"
		case connectivity.Idle, connectivity.Connecting:
			why = "no connection established (connect timed out)"
		case connectivity.Ready:
			why = "connected, but no reply (no leader, or a stalled server)"
		}
	}
	if last != nil {
		msg := last.Error()
		if st, ok := status.FromError(last); ok {
			msg = st.Message()
		}
		if msg != ctx.Err().Error() {
			why += ": " + msg
		}
	}
	return fmt.Errorf("etcdstore: open: no lease granted by %v: %s: %w", cli.Endpoints(), why, ctx.Err())
}

// clientLogger returns the logger Dial gives its client: l's handler behind
// a zap core, or a no-op logger when l discards everything.
func clientLogger(l *slog.Logger) *zap.Logger {
	h := l.Handler()
	if h == slog.DiscardHandler {
		return zap.NewNop()
	}
	return zap.New(slogCore{h: h}).Named("etcd-client")
}

// slogCore is a zapcore.Core that hands the client's entries to an
// slog.Handler, all at debug level (see WithLogger): a bridge of a few
// lines, where go.uber.org/zap/exp/zapslog would add a module for the same.
type slogCore struct {
	h slog.Handler
}

func (c slogCore) Enabled(zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slog.LevelDebug)
}

func (c slogCore) With(fs []zapcore.Field) zapcore.Core {
	return slogCore{h: c.h.WithAttrs(attrs(fs))}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slog.LevelDebug, e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(slog.String("etcd_level", e.Level.String()))
	r.AddAttrs(attrs(fs)...)
	return c.h.Handle(context.Background(), r)
}

func (slogCore) Sync() error { return nil }

// attrs turns zap fields into slog attributes, in the fields' order.
func attrs(fs []zapcore.Field) []slog.Attr {
	out := make([]slog.Attr, 0, len(fs))
	for _, f := range fs {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for k, v := range enc.Fields {
			out = append(out, slog.Any(k, v))
		}
	}
	return out
}
