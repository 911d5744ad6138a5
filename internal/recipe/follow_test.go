package recipe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// dataFollower follows the data of the node at path ("" while it is
// missing), counting its changes.
func dataFollower(st store.Store, path string, changes *int) recipe.Follower[string] {
	return recipe.Follower[string]{
		Read: func(ctx context.Context) (string, []<-chan store.Event, error) {
			exists, _, ev, err := st.ExistsW(ctx, path)
			if err != nil || !exists {
				return "", []<-chan store.Event{ev}, err
			}
			n, err := st.Get(ctx, path)
			if errors.Is(err, store.ErrNoNode) {
				return "", []<-chan store.Event{ev}, nil // the watch fires for it
			}
			return string(n.Data), []<-chan store.Event{ev}, err
		},
		Equal:   func(a, b string) bool { return a == b },
		Changed: func(context.Context, string, bool) { *changes++ },
	}
}

// next receives the next value of l, or fails the test after a while.
func next[T any](t *testing.T, l *runner.Loop[T]) T {
	t.Helper()
	select {
	case v, ok := <-l.C():
		if !ok {
			t.Fatalf("follow stopped: %v", l.Err(nil))
		}
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no value in 10 s")
	}
	panic("unreachable")
}

// TestFollow: the first value is sent at once and every change after it,
// in order, on every store; a value equal to the one sent is not sent
// again; a value not yet taken when it is stale is replaced by the newer
// one; the follow ends with ctx's cause.
func TestFollow(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		path := dir(t) + "/node"
		var changes int
		ctx, cancel := context.WithCancelCause(t.Context())
		l := runner.Start(ctx, func(ctx context.Context, out chan<- string) error {
			return recipe.Follow(ctx, st, out, dataFollower(st, path, &changes))
		})
		defer l.Close(nil)
		if got := next(t, l); got != "" {
			t.Fatalf("first value = %q; want \"\" (no node)", got)
		}
		if _, err := st.Create(t.Context(), path, []byte("a"), store.Persistent); err != nil {
			t.Fatal(err)
		}
		if got := next(t, l); got != "a" {
			t.Fatalf("after create: %q; want a", got)
		}
		// Not received while b and c are set: only c comes.
		for _, v := range []string{"b", "c"} {
			if _, err := st.Set(t.Context(), path, []byte(v), store.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
		for got := next(t, l); got != "c"; got = next(t, l) {
			if got != "b" {
				t.Fatalf("after sets: %q; want b (at most) and then c", got)
			}
		}
		// The same data again: a change of the node, not of the value.
		if _, err := st.Set(t.Context(), path, []byte("c"), store.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Set(t.Context(), path, []byte("d"), store.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if got := next(t, l); got != "d" {
			t.Fatalf("after c, d: %q; want d (c was sent already)", got)
		}
		errStop := errors.New("stop")
		cancel(errStop)
		<-l.Done()
		if err := l.Err(nil); !errors.Is(err, errStop) {
			t.Errorf("Err = %v; want the ctx's cause %v", err, errStop)
		}
		if changes < 4 {
			t.Errorf("Changed called %d times; want one per value read that differs (at least 4)", changes)
		}
	})
}

// TestFollowRidesOut: a read that meets a lost connection is tried again
// once it is back; the session's end stops the follow with its cause.
func TestFollowRidesOut(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		path := dir(t) + "/node"
		var changes int
		l := runner.Start(t.Context(), func(ctx context.Context, out chan<- string) error {
			return recipe.Follow(ctx, st, out, dataFollower(st, path, &changes))
		})
		defer l.Close(nil)
		next(t, l)
		dc, ok := b.(storetest.Disconnector)
		if !ok {
			t.Fatalf("backend %T cannot disconnect", b)
		}
		dc.Disconnect(t, st)
		other := b.Open(t)
		if _, err := other.Create(t.Context(), path, []byte("x"), store.Persistent); err != nil {
			t.Fatal(err)
		}
		dc.Reconnect(t, st)
		for got := next(t, l); got != "x"; got = next(t, l) {
		}
		b.Expire(t, st)
		select {
		case <-l.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("follow did not stop at the session's end")
		}
		if err := l.Err(nil); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("Err = %v; want %v", err, store.ErrSessionExpired)
		}
	})
}

// TestFollowFailed: a read that fails for good stops the follow with its
// error, through Failed.
func TestFollowFailed(t *testing.T) {
	st := backends.Memory().Open(t)
	errBad := errors.New("bad")
	l := runner.Start(t.Context(), func(ctx context.Context, out chan<- int) error {
		return recipe.Follow(ctx, st, out, recipe.Follower[int]{
			Read:   func(context.Context) (int, []<-chan store.Event, error) { return 0, nil, errBad },
			Failed: func(err error) error { return fmt.Errorf("wrapped: %w", err) },
		})
	})
	<-l.Done()
	if err := l.Err(nil); !errors.Is(err, errBad) || err.Error() != "wrapped: bad" {
		t.Errorf("Err = %v; want wrapped: bad", err)
	}
}

// TestFollowWatches: with several watches any one of them makes the value
// stale; Copy gives the receiver its own value; MinInterval merges the
// changes that come faster.
func TestFollowWatches(t *testing.T) {
	st := backends.Memory().Open(t)
	d := dir(t)
	a, c := d+"/a", d+"/c"
	for _, p := range []string{a, c} {
		if _, err := st.Create(t.Context(), p, nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	var starts []time.Time // of each read; the follow's goroutine's until it stopped
	l := runner.Start(t.Context(), func(ctx context.Context, out chan<- []byte) error {
		return recipe.Follow(ctx, st, out, recipe.Follower[[]byte]{
			Read: func(ctx context.Context) ([]byte, []<-chan store.Event, error) {
				starts = append(starts, time.Now())
				var v []byte
				var evs []<-chan store.Event
				for _, p := range []string{a, c} {
					_, _, ev, err := st.ExistsW(ctx, p)
					if err != nil {
						return nil, nil, err
					}
					n, err := st.Get(ctx, p)
					if err != nil {
						return nil, nil, err
					}
					v, evs = append(v, n.Data...), append(evs, ev)
				}
				return v, evs, nil
			},
			Equal:       bytes.Equal,
			Copy:        bytes.Clone,
			MinInterval: 50 * time.Millisecond,
		})
	})
	defer l.Close(nil)
	first := next(t, l)
	if len(first) != 0 {
		t.Fatalf("first = %q; want empty", first)
	}
	if _, err := st.Set(t.Context(), c, []byte("1"), store.AnyVersion); err != nil {
		t.Fatal(err)
	}
	got := next(t, l)
	if string(got) != "1" {
		t.Fatalf("after a set of the second node: %q; want 1", got)
	}
	got[0] = 'x' // the receiver's own
	if _, err := st.Set(t.Context(), a, []byte("2"), store.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if got := next(t, l); string(got) != "21" {
		t.Fatalf("after a set of the first node: %q; want 21", got)
	}
	l.Close(nil)
	for i := 1; i < len(starts); i++ {
		if d := starts[i].Sub(starts[i-1]); d < 50*time.Millisecond {
			t.Errorf("read %d began %v after the one before; want MinInterval (50 ms) at least", i, d)
		}
	}
}
