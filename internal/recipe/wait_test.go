package recipe_test

import (
	"context"
	"errors"
	gosync "sync"
	"testing"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

type waitResult struct {
	i       int
	touched bool
	err     error
}

// waitAny runs recipe.WaitAny on ws in a goroutine.
func waitAny(ctx context.Context, st store.Store, ws []recipe.Watch) <-chan waitResult {
	got := make(chan waitResult, 1)
	go func() {
		i, touched, err := recipe.WaitAny(ctx, st, ws)
		got <- waitResult{i, touched, err}
	}()
	return got
}

// stillWaiting fails t if got has a result already.
func stillWaiting(t *testing.T, got <-chan waitResult, after string) {
	t.Helper()
	select {
	case r := <-got:
		t.Fatalf("WaitAny = %d, %v, %v after %s; want it to wait", r.i, r.touched, r.err, after)
	default:
	}
}

// await returns the result of got, bounded by ctx.
func await(t *testing.T, ctx context.Context, got <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-ctx.Done():
		t.Fatal("WaitAny did not return")
		return waitResult{}
	}
}

// TestWaitAny: WaitAny returns for the node that went, or was touched when
// asked to watch for that, and not for a data change of a node it waits
// for to go.
func TestWaitAny(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		defer st.Close()
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		d := dir(t)
		mk := func(name string) store.Node {
			n, err := st.Create(ctx, d+"/"+name, nil, store.Persistent)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		a, c := mk("a"), mk("c")

		// Several nodes: the index of the one deleted.
		got := waitAny(ctx, st, []recipe.Watch{{Path: a.Path, Seq: a.Seq}, {Path: c.Path, Seq: c.Seq}})
		for range 2 {
			if _, err := st.Set(ctx, a.Path, []byte("x"), store.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
		stillWaiting(t, got, "a data change of a node waited for to go")
		if err := st.Delete(ctx, c.Path); err != nil {
			t.Fatal(err)
		}
		if r := await(t, ctx, got); r.i != 1 || r.touched || r.err != nil {
			t.Errorf("WaitAny(a, c) after c's delete = %d, %v, %v; want 1, false, nil", r.i, r.touched, r.err)
		}

		// A touch, when watched for.
		c = mk("c")
		ws := []recipe.Watch{{Path: a.Path, Seq: a.Seq}, {Path: c.Path, Seq: c.Seq, Touch: true, Version: c.Version}}
		got = waitAny(ctx, st, ws)
		if _, err := st.Set(ctx, c.Path, []byte("touch"), store.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if r := await(t, ctx, got); r.i != 1 || !r.touched || r.err != nil {
			t.Errorf("WaitAny after c's touch = %d, %v, %v; want 1, true, nil", r.i, r.touched, r.err)
		}

		// A touch before the wait, known by the version seen.
		ws = []recipe.Watch{{Path: c.Path, Seq: c.Seq, Touch: true, Version: c.Version}}
		if i, touched, err := recipe.WaitAny(ctx, st, ws); i != 0 || !touched || err != nil {
			t.Errorf("WaitAny(touched before) = %d, %v, %v; want 0, true, nil", i, touched, err)
		}
		if ws[0].Version == c.Version || ws[0].Version < 0 {
			t.Errorf("Version after a touch found before the watch = %d; want the node's new version", ws[0].Version)
		}

		// Another node at the name, or none, counts as gone.
		ws = []recipe.Watch{{Path: a.Path, Seq: a.Seq + 1}}
		if i, _, err := recipe.WaitAny(ctx, st, ws); i != 0 || err != nil {
			t.Errorf("WaitAny(Seq %d) of the node with Seq %d = %d, %v; want 0, nil", a.Seq+1, a.Seq, i, err)
		}
		ws = []recipe.Watch{{Path: a.Path, Seq: a.Seq}, {Path: d + "/missing"}}
		if i, _, err := recipe.WaitAny(ctx, st, ws); i != 1 || err != nil {
			t.Errorf("WaitAny(a, missing) = %d, %v; want 1, nil", i, err)
		}

		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		ws = []recipe.Watch{{Path: a.Path, Seq: a.Seq}, {Path: c.Path, Seq: c.Seq}}
		if _, _, err := recipe.WaitAny(cctx, st, ws); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitAny(cancelled) = %v; want context.Canceled", err)
		}
	})
}

// seesDisconnection is a store whose seen channel is closed once a caller
// has asked Disconnected and found the connection lost.
type seesDisconnection struct {
	store.Store
	seen chan struct{}
	once gosync.Once
}

func (s *seesDisconnection) Disconnected() <-chan struct{} {
	ch := s.Store.Disconnected()
	select {
	case <-ch:
		s.once.Do(func() { close(s.seen) })
	default:
	}
	return ch
}

// TestConfirm: a grant is confirmed at once while connected; while the
// connection is lost it waits, and then checks that the node is still
// there; after the session's end it fails with the session's cause.
func TestConfirm(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect")
		}
		st, other := b.Open(t), b.Open(t)
		defer other.Close()
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		n, err := acquire(ctx, st, nil, dir(t), names.Lock, recipe.Predecessor)
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		if err := recipe.Confirm(ctx, st, n); err != nil {
			t.Fatalf("Confirm(connected) = %v; want nil", err)
		}

		for _, deleted := range []bool{false, true} {
			disc := st.Disconnected()
			d.Disconnect(t, st)
			select {
			case <-disc:
			case <-ctx.Done():
				t.Fatal("Disconnected() not closed")
			}
			obs := &seesDisconnection{Store: st, seen: make(chan struct{})}
			got := make(chan error, 1)
			go func() { got <- recipe.Confirm(ctx, obs, n) }()
			select {
			case err := <-got:
				t.Fatalf("Confirm(disconnected) = %v before the reconnection; want it to wait", err)
			case <-obs.seen: // it knows: what comes now, it must find out
			case <-ctx.Done():
				t.Fatal("Confirm did not look at the connection")
			}
			if deleted {
				if err := other.Delete(ctx, n.Path); err != nil {
					t.Fatal(err)
				}
			}
			d.Reconnect(t, st)
			var want error
			if deleted {
				want = store.ErrNoNode
			}
			select {
			case err := <-got:
				if (want == nil) != (err == nil) || !errors.Is(err, want) {
					t.Errorf("Confirm after the reconnection (node deleted: %v) = %v; want %v", deleted, err, want)
				}
			case <-ctx.Done():
				t.Fatal("Confirm did not return after the reconnection")
			}
		}

		st.Close()
		if err := recipe.Confirm(ctx, st, n); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Confirm(closed session) = %v; want store.ErrClosed", err)
		}
	})
}
