package etcdstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// holder holds the next request of the armed method until its ctx ends.
type holder struct {
	method string
	armed  atomic.Bool
	held   chan struct{}
}

func newHolder(method string) *holder {
	return &holder{method: method, held: make(chan struct{})}
}

func (h *holder) hook(ctx context.Context, method string) {
	if method != h.method || !h.armed.CompareAndSwap(true, false) {
		return
	}
	close(h.held)
	<-ctx.Done() // the attempt's context: the hook must return when it ends
}

// The calls of one request each (ExistsW: the read beside its watch), and a
// sequential Create (which retries by itself), with the method of their
// request.
var oneRequestCalls = []struct {
	name, method string
	call         func(ctx context.Context, s *etcdstore.Store, n store.Node) error
}{
	{"Get", "/etcdserverpb.KV/Range", func(ctx context.Context, s *etcdstore.Store, n store.Node) error {
		_, err := s.Get(ctx, n.Path)
		return err
	}},
	{"DeleteSeq", "/etcdserverpb.KV/Txn", func(ctx context.Context, s *etcdstore.Store, n store.Node) error {
		return s.DeleteSeq(ctx, n.Path, n.Seq)
	}},
	{"ChildrenUpTo", "/etcdserverpb.KV/Range", func(ctx context.Context, s *etcdstore.Store, n store.Node) error {
		_, _, err := s.ChildrenUpTo(ctx, store.Parent(n.Path), n.Seq, 2)
		return err
	}},
	{"ExistsW", "/etcdserverpb.KV/Range", func(ctx context.Context, s *etcdstore.Store, n store.Node) error {
		_, _, _, err := s.ExistsW(ctx, n.Path)
		return err
	}},
	{"CreateAndWindow", "/etcdserverpb.KV/Txn", func(ctx context.Context, s *etcdstore.Store, n store.Node) error {
		_, _, _, err := s.CreateAndWindow(ctx, store.Parent(n.Path)+"/c-", nil, store.EphemeralSequential, 2)
		return err
	}},
}

// A request held past the attempt timeout fails with ErrDisconnected, and
// the session goes on; a request held when the session ends fails at once
// with the session's error (expiry, or Close), not after the attempt
// timeout.
func TestCallEnds(t *testing.T) {
	c := etcdserver.Start(t, 1)
	const attempt = 300 * time.Millisecond
	t.Run("attempt timeout", func(t *testing.T) {
		for _, tc := range oneRequestCalls {
			if strings.HasPrefix(tc.name, "Create") {
				continue // retried by Create itself until ctx ends
			}
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := newHolder(tc.method)
				b := etcdbackend.New(c)
				s := b.OpenHooked(t, etcdbackend.Hooks{Request: h.hook}, etcdstore.WithAttemptTimeout(attempt))
				ctx := ctxFor(t)
				n := must[store.Node](t)(s.Create(ctx, "/calls/timeout/n-", nil, store.EphemeralSequential))
				h.armed.Store(true)
				start := time.Now()
				err := tc.call(ctx, s, n)
				elapsed := time.Since(start)
				if !errors.Is(err, store.ErrDisconnected) || !strings.Contains(err.Error(), "attempt timeout") {
					t.Errorf("%s held past the attempt timeout = %v; want ErrDisconnected for the attempt timeout", tc.name, err)
				}
				if elapsed < attempt {
					t.Errorf("%s returned after %v; want the attempt timeout (%v) first", tc.name, elapsed, attempt)
				}
				if err := s.Context().Err(); err != nil {
					t.Errorf("session ended by a given-up attempt: %v", context.Cause(s.Context()))
				}
				if err := tc.call(ctx, s, n); errors.Is(err, store.ErrDisconnected) {
					t.Errorf("%s after the given-up attempt = %v; want an answer", tc.name, err)
				}
			})
		}
	})
	ends := []struct {
		name string
		want error
		end  func(t *testing.T, b *etcdbackend.Backend, s *etcdstore.Store)
	}{
		{"expiry", store.ErrSessionExpired, func(t *testing.T, b *etcdbackend.Backend, s *etcdstore.Store) { b.Freeze(t, s) }},
		{"close", store.ErrClosed, func(t *testing.T, b *etcdbackend.Backend, s *etcdstore.Store) { go s.Close() }},
	}
	for _, e := range ends {
		t.Run("session "+e.name, func(t *testing.T) {
			for _, tc := range oneRequestCalls {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					h := newHolder(tc.method)
					b := etcdbackend.New(c, etcdstore.WithTTL(2*time.Second))
					s := b.OpenHooked(t, etcdbackend.Hooks{Request: h.hook}, etcdstore.WithAttemptTimeout(timeout))
					ctx := ctxFor(t)
					n := must[store.Node](t)(s.Create(ctx, "/calls/"+e.name+"/n-", nil, store.EphemeralSequential))
					h.armed.Store(true)
					got := make(chan error, 1)
					go func() { got <- tc.call(ctx, s, n) }()
					waitDone(t, tc.name+"'s request held", h.held)
					e.end(t, b, s)
					select {
					case err := <-got:
						if !errors.Is(err, e.want) {
							t.Errorf("%s when the session ends (%s) = %v; want %v", tc.name, e.name, err, e.want)
						}
					case <-time.After(timeout / 2):
						t.Fatalf("%s not done %v after the session's %s", tc.name, timeout/2, e.name)
					}
					if cause := context.Cause(s.Context()); !errors.Is(cause, e.want) {
						t.Errorf("session's cause = %v; want %v", cause, e.want)
					}
				})
			}
		})
	}
}

type callKey struct{}

// A request's context carries the call's values and deadline (not the
// attempt timeout's, which is the client's alone); a request held when the call's
// ctx ends fails at once with ctx's error, and the calls after it, which
// may reuse what the attempt left, are answered and see none of its end.
func TestCallCancelled(t *testing.T) {
	c := etcdserver.Start(t, 1)
	const attempt = 5 * time.Second
	for _, tc := range oneRequestCalls {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			type seen struct {
				value    any
				deadline time.Time
			}
			seenc := make(chan seen, 16)
			h := newHolder(tc.method)
			hook := func(ctx context.Context, method string) {
				if method == tc.method {
					d, _ := ctx.Deadline()
					select {
					case seenc <- seen{ctx.Value(callKey{}), d}:
					default:
					}
				}
				h.hook(ctx, method)
			}
			s := etcdbackend.New(c).OpenHooked(t, etcdbackend.Hooks{Request: hook}, etcdstore.WithAttemptTimeout(attempt))
			base := context.WithValue(ctxFor(t), callKey{}, tc.name)
			n := must[store.Node](t)(s.Create(base, "/calls/cancelled/n-", nil, store.EphemeralSequential))
			for len(seenc) > 0 {
				<-seenc
			}
			ctx, cancel := context.WithCancel(base)
			h.armed.Store(true)
			got := make(chan error, 1)
			go func() { got <- tc.call(ctx, s, n) }()
			waitDone(t, tc.name+"'s request held", h.held)
			cancel()
			select {
			case err := <-got:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("%s when its ctx is cancelled = %v; want %v", tc.name, err, context.Canceled)
				}
			case <-time.After(attempt / 2):
				t.Fatalf("%s not done %v after its ctx was cancelled", tc.name, attempt/2)
			}
			select {
			case sn := <-seenc:
				if sn.value != tc.name {
					t.Errorf("request's ctx value = %v; want the call's, %q", sn.value, tc.name)
				}
				if callDL, _ := base.Deadline(); !sn.deadline.Equal(callDL) {
					t.Errorf("request's deadline = %v; want the call's, %v", sn.deadline, callDL)
				}
			default:
				t.Errorf("no request of %s seen", tc.method)
			}
			// A call whose ctx has ended already sends nothing that
			// could still be answered: its request, if any, goes with a
			// context that has ended too. (A create's undo goes on the
			// session's context: see Abandoned creates.)
			var live atomic.Int32
			sawLive := func(ctx context.Context, method string) {
				if method == tc.method && ctx.Err() == nil {
					live.Add(1)
				}
			}
			ended := etcdbackend.New(c).OpenHooked(t, etcdbackend.Hooks{Request: sawLive}, etcdstore.WithAttemptTimeout(attempt))
			en := must[store.Node](t)(ended.Create(base, "/calls/ended/n-", nil, store.EphemeralSequential))
			live.Store(0)
			for i := range 20 {
				if err := tc.call(ctx, ended, en); !errors.Is(err, context.Canceled) {
					t.Errorf("%s #%d with a cancelled ctx = %v; want %v", tc.name, i, err, context.Canceled)
				}
			}
			if k := live.Load(); k > 0 && !strings.HasPrefix(tc.name, "Create") {
				t.Errorf("%s with a cancelled ctx sent %d requests on a live context; want none", tc.name, k)
			}
			for i := range 3 {
				if err := tc.call(base, s, n); err != nil && !errors.Is(err, store.ErrNodeExists) && !errors.Is(err, store.ErrNoNode) {
					t.Errorf("%s #%d after a cancelled one = %v; want an answer", tc.name, i, err)
				}
			}
			if err := s.Context().Err(); err != nil {
				t.Errorf("session ended by a cancelled call: %v", context.Cause(s.Context()))
			}
		})
	}
}
