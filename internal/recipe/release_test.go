package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TestReleaseIdempotent: the first release reports a loss that came
// before it; a later one fails with holderr.ErrReleased and touches
// nothing, unless the first left the node's removal pending, which it then
// finishes.
func TestReleaseIdempotent(t *testing.T) {
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	ctx := t.Context()
	p := dir(t)
	acquire := func() (*recipe.Hold, store.Node) {
		t.Helper()
		h, err := recipe.Acquire(ctx, a, spec(nil, p, names.Lock, recipe.Predecessor))
		if err != nil {
			t.Fatal(err)
		}
		return h, h.Node()
	}

	// Lost before the release: reported once.
	h, n := acquire()
	if err := b.Delete(ctx, n.Path); err != nil {
		t.Fatal(err)
	}
	if lost, err := h.Release(ctx, errReleased); !errors.Is(lost, errDeleted) || err != nil {
		t.Fatalf("first Release = %v, %v; want %v, nil", lost, err, errDeleted)
	}
	if lost, err := h.Release(ctx, errReleased); lost != nil || err != holderr.ErrReleased {
		t.Fatalf("second Release = %v, %v; want nil, %v", lost, err, holderr.ErrReleased)
	}

	// Removal pending: the next release removes the node, and only the
	// one after it is a release again.
	h, n = acquire()
	a.Disconnect()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if lost, err := h.Release(cctx, errReleased); lost != nil || !errors.Is(err, recipe.ErrRemovalPending) {
		t.Fatalf("Release while disconnected = %v, %v; want nil, %v", lost, err, recipe.ErrRemovalPending)
	}
	if _, err := b.Get(ctx, n.Path); err != nil {
		t.Fatalf("Get after a pending release = %v; want the node still there", err)
	}
	a.Reconnect()
	if lost, err := h.Release(ctx, errReleased); lost != nil || err != nil {
		t.Fatalf("Release after the reconnection = %v, %v; want nil, nil", lost, err)
	}
	if _, err := b.Get(ctx, n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Get after the second release = %v; want %v", err, store.ErrNoNode)
	}
	if lost, err := h.Release(ctx, errReleased); lost != nil || err != holderr.ErrReleased {
		t.Fatalf("third Release = %v, %v; want nil, %v", lost, err, holderr.ErrReleased)
	}
}

// expiresOnDelete is a session whose client learns of its expiry from the
// reply to its next Delete, as a ZooKeeper client cut off while the server
// expired its session learns it when it reconnects to send the delete.
type expiresOnDelete struct{ *memstore.Store }

func (s expiresOnDelete) Delete(ctx context.Context, path string) error {
	s.Expire()
	return s.Store.Delete(ctx, path)
}

func (s expiresOnDelete) DeleteSeq(ctx context.Context, path string, seq int64) error {
	s.Expire()
	return s.Store.DeleteSeq(ctx, path, seq)
}

// TestReleaseLearnsExpiry: a lazy hold whose session expired unseen is
// reported lost by its release when the delete is what finds the expiry
// (the session's end took the node; the hold had nothing to release).
func TestReleaseLearnsExpiry(t *testing.T) {
	srv := memstore.NewServer()
	a := srv.Open()
	defer a.Close()
	ctx := t.Context()
	n, err := acquire(ctx, a, nil, dir(t), names.Lock, recipe.Predecessor)
	if err != nil {
		t.Fatal(err)
	}
	st := expiresOnDelete{a}
	h := recipe.NewHold(st, n, recipe.HoldOptions{Deleted: errDeleted, Lazy: true})
	if lost, err := h.Release(ctx, errReleased); !errors.Is(lost, store.ErrSessionExpired) || err != nil {
		t.Fatalf("Release = %v, %v; want %v, nil", lost, err, store.ErrSessionExpired)
	}
}

// TestReleaseCutShort: a release whose ctx ends while its delete is out
// sends the delete again within the grace. The node is gone when Release
// returns, and the hold is not reported lost, whether the first delete was
// applied (the retry finds the node gone: its own doing) or not.
func TestReleaseCutShort(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, applied := range []bool{true, false} {
			t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
				a, other := b.Open(t), b.Open(t)
				ctx := t.Context()
				n, err := acquire(ctx, a, nil, dir(t), names.Lock, recipe.Predecessor)
				if err != nil {
					t.Fatal(err)
				}
				st := &cutShort{Store: a, applied: applied, sent: make(chan struct{})}
				st.armed.Store(true)
				h := recipe.NewHold(st, n, recipe.HoldOptions{Deleted: errDeleted})
				rctx, cancel := context.WithCancel(ctx)
				defer cancel()
				go func() {
					select {
					case <-st.sent:
						cancel()
					case <-ctx.Done():
					}
				}()
				if lost, err := h.Release(rctx, errReleased); lost != nil || err != nil {
					t.Errorf("Release cut short by its ctx = %v, %v; want nil, nil", lost, err)
				}
				if st.armed.Load() {
					t.Fatal("the release sent no delete")
				}
				if _, err := other.Get(ctx, n.Path); !errors.Is(err, store.ErrNoNode) {
					t.Errorf("Get after the release = %v; want %v", err, store.ErrNoNode)
				}
			})
		}
	})
}

// cutShort is a session whose next delete, once armed, is cut short by
// its ctx's end: sent and applied (applied) or not sent at all, the caller
// learns only that ctx ended.
type cutShort struct {
	store.Store
	applied bool
	armed   atomic.Bool
	sent    chan struct{} // closed when the cut delete is under way
}

func (s *cutShort) Unwrap() store.Store { return s.Store }

func (s *cutShort) Delete(ctx context.Context, path string) error {
	return s.cut(ctx, func(ctx context.Context) error { return s.Store.Delete(ctx, path) })
}

func (s *cutShort) DeleteSeq(ctx context.Context, path string, seq int64) error {
	sd, _ := store.Find[store.SeqDeleter](s.Store) // Find calls this only where the store has it
	return s.cut(ctx, func(ctx context.Context) error { return sd.DeleteSeq(ctx, path, seq) })
}

func (s *cutShort) cut(ctx context.Context, del func(context.Context) error) error {
	if !s.armed.CompareAndSwap(true, false) {
		return del(ctx)
	}
	if s.applied {
		if err := del(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
	close(s.sent)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return fmt.Errorf("cutShort: ctx not done after %v", timeout)
	}
}
