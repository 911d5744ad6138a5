package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// A Grant answered late yields a live session with a deadline well ahead,
// never one already past or about to pass: a Grant held before the server
// (a restarting server) longer than the TTL and longer than a third of it,
// and a reply held on its way back longer than a third of the TTL.
func TestOpenSlowGrant(t *testing.T) {
	c := etcdserver.Start(t, 1)
	const ttl = 2 * time.Second
	// Attempts longer than the delays, so that the slow Grant is waited
	// for rather than given up.
	b := etcdbackend.New(c, etcdstore.WithTTL(ttl), etcdstore.WithAttemptTimeout(timeout))
	for _, tc := range []struct {
		name  string
		delay time.Duration
		reply bool
	}{
		{"request past the TTL", ttl + 500*time.Millisecond, false},
		{"request", ttl * 3 / 4, false},
		{"reply", ttl * 3 / 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t)
			hold := func(ctx context.Context, method string) {
				if method != "/etcdserverpb.Lease/LeaseGrant" {
					return
				}
				timer := time.NewTimer(tc.delay)
				defer timer.Stop()
				select {
				case <-timer.C:
				case <-ctx.Done():
				}
			}
			var hooks etcdbackend.Hooks
			if tc.reply {
				hooks.Reply = hold
			} else {
				hooks.Request = hold
			}
			a := b.OpenHooked(t, hooks)
			if left := time.Until(etcdstore.Deadline(a)); left < ttl/2 {
				t.Errorf("Open after a Grant %s held %v: deadline in %v; want at least %v", tc.name, tc.delay, left, ttl/2)
			}
			if err := a.Context().Err(); err != nil {
				t.Fatalf("Open after a Grant %s held %v returned an ended session: %v", tc.name, tc.delay, context.Cause(a.Context()))
			}
			if _, err := a.Create(ctx, "/slowgrant/"+tc.name, nil, store.Ephemeral); err != nil {
				t.Errorf("Create after a slow Grant = %v", err)
			}
			resp, err := c.Client(t).TimeToLive(ctx, a.Lease())
			if err != nil || resp.TTL <= 0 {
				t.Errorf("TimeToLive = %v, %v; want the lease alive", resp, err)
			}
		})
	}
}

// Calls made with a 1 s ctx while the session's connections are refused or
// frozen return within the ctx, plus one attempt timeout for a Create,
// which waits that long for its undo; and an abandoned create leaves no
// node once the link is back and its undo is done (both sequential kinds:
// a persistent node outlives the session, so only the undo removes it).
func TestOutageCallsReturnWithinCtx(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	raw := c.Client(t)
	const callTimeout = time.Second
	const slack = 500 * time.Millisecond // a loaded race build
	type op struct {
		name  string
		extra time.Duration // beyond the ctx, documented
		call  func(ctx context.Context, s *etcdstore.Store, dir string) error
	}
	create := func(mode store.Mode) func(ctx context.Context, s *etcdstore.Store, dir string) error {
		return func(ctx context.Context, s *etcdstore.Store, dir string) error {
			_, err := s.Create(ctx, dir+"/new/n-", []byte("x"), mode)
			return err
		}
	}
	ops := []op{
		{"ExistsW", 0, func(ctx context.Context, s *etcdstore.Store, dir string) error {
			_, _, _, err := s.ExistsW(ctx, dir+"/x")
			return err
		}},
		{"ChildrenW", 0, func(ctx context.Context, s *etcdstore.Store, dir string) error {
			_, _, err := s.ChildrenW(ctx, dir)
			return err
		}},
		{"Delete", 0, func(ctx context.Context, s *etcdstore.Store, dir string) error {
			return s.Delete(ctx, dir+"/x")
		}},
		{"Create", etcdstore.DefaultAttemptTimeout, create(store.EphemeralSequential)},
		{"CreatePersistent", etcdstore.DefaultAttemptTimeout, create(store.Sequential)},
	}
	faults := []struct {
		name  string
		apply func(testing.TB, store.Store)
	}{{"refuse", b.Disconnect}, {"freeze", b.Freeze}}

	var mu sync.Mutex
	worst := map[string]time.Duration{}
	t.Run("calls", func(t *testing.T) {
		for _, f := range faults {
			for _, o := range ops {
				t.Run(f.name+"/"+o.name, func(t *testing.T) {
					t.Parallel()
					ctx := ctxFor(t)
					s := open(t, b)
					dir := fmt.Sprintf("/outage/%s/%s", f.name, o.name)
					must[store.Node](t)(s.Create(ctx, dir+"/x", nil, store.Persistent))
					must[store.Node](t)(s.Create(ctx, dir+"/new", nil, store.Persistent))
					f.apply(t, s)
					cctx, cancel := context.WithTimeout(ctx, callTimeout)
					start := time.Now()
					err := o.call(cctx, s, dir)
					elapsed := time.Since(start)
					cancel()
					if err == nil {
						t.Errorf("%s during %s = nil; want an error", o.name, f.name)
					}
					over := elapsed - callTimeout
					if over > o.extra+slack {
						t.Errorf("%s during %s returned after %v; want at most %v + %v (+ %v slack)", o.name, f.name, elapsed, callTimeout, o.extra, slack)
					}
					mu.Lock()
					worst[o.name] = max(worst[o.name], over)
					mu.Unlock()
					b.Reconnect(t, s)
					etcdstore.WaitUndos(s)
					if resp, err := raw.Get(ctx, dir+"/new/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
						t.Errorf("nodes left by a create abandoned during %s: %v, %v", f.name, resp, err)
					}
					if err := s.Context().Err(); err != nil {
						t.Errorf("session ended by a short %s: %v", f.name, context.Cause(s.Context()))
					}
				})
			}
		}
	})
	for _, o := range ops {
		t.Logf("%-16s worst overrun of a %v ctx: %v (allowed %v)", o.name, callTimeout, worst[o.name], o.extra)
	}
}

// A create applied by the server whose reply is lost, on a link that then
// stays down until its caller has given up, leaves no node once the link is
// back: the undo is retried until it goes through. Sequential nodes of both
// kinds (a persistent one outlives the session, so only the undo removes
// it; an ephemeral one is checked while its session lives). A create
// transaction sent before the undo and reaching the server after it (held
// in the network) fails: the undo moved the session's create fence.
func TestAbandonedCreateUndoneAfterOutage(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	raw := c.Client(t)
	for _, mode := range []store.Mode{store.EphemeralSequential, store.Sequential} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t)
			var armed atomic.Bool
			var s *etcdstore.Store
			down := make(chan struct{})
			s = b.OpenHooked(t, etcdbackend.Hooks{Reply: func(ctx context.Context, method string) {
				// Runs after LoseNextCreateReply has thrown the
				// reply away and cut the connection.
				if method == "/etcdserverpb.KV/Txn" && armed.CompareAndSwap(true, false) {
					b.Disconnect(t, s)
					close(down)
				}
			}})
			dir := "/abandon-outage/" + mode.String()
			must[store.Node](t)(s.Create(ctx, dir, nil, store.Persistent))
			late := etcdstore.StaleCreate(s, dir+"/late", []byte("x"), mode)
			armed.Store(true)
			b.LoseNextCreateReply(t, s)
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := s.Create(cctx, dir+"/n-", []byte("x"), mode)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Create cut off = %v; want DeadlineExceeded", err)
			}
			waitDone(t, "link down", down)
			if resp, err := raw.Get(ctx, dir+"/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("the lost create made %v, %v; want one node", resp, err)
			}
			b.Reconnect(t, s)
			etcdstore.WaitUndos(s)
			if resp, err := raw.Get(ctx, dir+"/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
				t.Errorf("nodes left by the abandoned create: %v, %v", resp, err)
			}
			if resp, err := late(ctx); err != nil || resp.Succeeded {
				t.Errorf("create sent before the undo, applied after it = %v, %v; want a failed compare", resp, err)
			}
			if resp, err := raw.Get(ctx, dir+"/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
				t.Errorf("nodes left by a create that reached the server after the undo: %v, %v", resp, err)
			}
			if err := s.Context().Err(); err != nil {
				t.Errorf("session ended: %v", context.Cause(s.Context()))
			}
		})
	}
}
