package etcdstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/testcert"
	"github.com/corral-go/corral/store"
)

// A cluster that cannot be reached makes Dial fail when its ctx ends, with
// an error that names the endpoints tried and says why they did not answer.
func TestDialUnreachable(t *testing.T) {
	refused := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	// silent accepts connections and never answers.
	silent := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var conns []net.Conn
		wg.Go(func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
		t.Cleanup(func() {
			l.Close()
			wg.Wait()
			for _, c := range conns {
				c.Close()
			}
		})
		return l.Addr().String()
	}
	// With TLS, Dial's probe of the endpoints meets the same failures,
	// which are no certificate refusal.
	ca := testcert.ForTest(t, "unreachable")
	for _, tc := range []struct {
		name     string
		endpoint func(*testing.T) string
		tls      *tls.Config
		why      string
	}{
		{"refused", refused, nil, "connection refused"},
		{"silent", silent, nil, "timed out"},
		{"refused TLS", refused, ca.ClientTLS(ca.MustClient(t, "alice")), "connection refused"},
		{"silent TLS", silent, ca.ClientTLS(ca.MustClient(t, "alice")), "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ep := tc.endpoint(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			s, err := etcdstore.Dial(ctx, clientv3.Config{Endpoints: []string{ep}, TLS: tc.tls})
			if err == nil {
				s.Close()
				t.Fatalf("Dial(%s) = nil error", ep)
			}
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrAuth) || !strings.Contains(err.Error(), ep) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("Dial(%s) = %v; want DeadlineExceeded, not ErrAuth, naming %s and saying %q", ep, err, ep, tc.why)
			}
			t.Logf("Dial(%s): %v", tc.name, err)
		})
	}
}

// Misuse is an error wrapping ErrInvalidArgument, never a panic.
func TestInvalidArguments(t *testing.T) {
	ctx := ctxFor(t)
	if _, err := etcdstore.Open(ctx, nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Open(nil client) = %v; want ErrInvalidArgument", err)
	}
	if _, err := etcdstore.Dial(ctx, clientv3.Config{}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Dial(no endpoints) = %v; want ErrInvalidArgument", err)
	}
	cfg := clientv3.Config{Endpoints: []string{"127.0.0.1:1"}}
	for _, opt := range []etcdstore.Option{etcdstore.WithTTL(0), etcdstore.WithAttemptTimeout(-time.Second), etcdstore.WithReclaimDelay(-time.Second)} {
		if _, err := etcdstore.Dial(ctx, cfg, opt); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Dial(bad option) = %v; want ErrInvalidArgument", err)
		}
	}
}

// Dial's client is silent unless the caller's Config or WithLogger says
// otherwise; WithLogger gets the Store's debug messages and the client's,
// all at debug level.
func TestDialLogger(t *testing.T) {
	c := etcdserver.Start(t, 1)
	ctx := ctxFor(t)
	cfg := c.ClientConfig()
	cfg.Logger = nil

	quiet, err := etcdstore.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	if quiet.TTL() <= 0 {
		t.Errorf("TTL() = %v; want the session's positive TTL", quiet.TTL())
	}
	if quiet.Client().GetLogger().Core().Enabled(zapcore.ErrorLevel) {
		t.Errorf("Dial's client logs by default")
	}

	own := zap.NewNop()
	withOwn := cfg
	withOwn.Logger = own
	s, err := etcdstore.Dial(ctx, withOwn, etcdstore.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Client().GetLogger() != own {
		t.Errorf("Dial replaced the Config's logger")
	}

	h := &captureHandler{mu: new(sync.Mutex), recs: new([]slog.Record)}
	logged, err := etcdstore.Dial(ctx, cfg, etcdstore.WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	defer logged.Close()
	// clientv3 warns about a call its caller cancelled.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := logged.Get(cancelled, "/x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get(cancelled) = %v; want Canceled", err)
	}
	var opened, client bool
	for _, r := range h.records() {
		if r.Level != slog.LevelDebug {
			t.Errorf("record %q at %v; want debug", r.Message, r.Level)
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		opened = opened || r.Message == "etcdstore: session opened"
		client = client || attrs["logger"] == "etcd-client" && attrs["etcd_level"] == "warn" && r.Message == "retrying of unary invoker failed"
	}
	if !opened || !client {
		t.Errorf("records: Store's session opened %v, client's warning at debug %v; want both", opened, client)
	}
}

// captureHandler keeps every record, at every level.
type captureHandler struct {
	mu    *sync.Mutex
	recs  *[]slog.Record
	attrs []slog.Attr
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, r)
	return nil
}

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &captureHandler{mu: h.mu, recs: h.recs, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], as...)}
}

func (h *captureHandler) WithGroup(string) slog.Handler { return h }

func (h *captureHandler) records() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), *h.recs...)
}
