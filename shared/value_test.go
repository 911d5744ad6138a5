package shared_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// testDir returns a path of t's own, new in every run (the real servers
// outlive a run of -count).
func testDir(t *testing.T) string {
	return fmt.Sprintf("/shared/%s-%08x", strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()), rand.Uint32())
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantSnap(t *testing.T, what string, got shared.Snapshot, err error, data string, version int64) {
	t.Helper()
	if err != nil || string(got.Data) != data || got.Version != version {
		t.Errorf("%s = %q at version %d, %v; want %q at version %d", what, got.Data, got.Version, err, data, version)
	}
}

// TestValue: get, set and compare-and-set on every store, with the errors
// of a version that moved and of data too large.
func TestValue(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx := ctxFor(t)
		sts := backends.Open(t, b, 2)
		p := testDir(t) + "/config"
		v, w := shared.NewValue(sts[0], p), shared.NewValue(sts[1], p)

		got, err := v.Get(ctx)
		if err != nil || got.Data != nil || got.Version != shared.NoVersion {
			t.Fatalf("Get(never set) = %+v, %v; want no data at NoVersion", got, err)
		}
		got, err = v.CompareAndSet(ctx, []byte("a"), shared.NoVersion)
		wantSnap(t, "CompareAndSet(a, NoVersion)", got, err, "a", 0)
		_, err = w.CompareAndSet(ctx, []byte("b"), shared.NoVersion)
		if !errors.Is(err, shared.ErrVersionMoved) || !errors.Is(err, store.ErrBadVersion) {
			t.Errorf("CompareAndSet(NoVersion) of a value set = %v; want ErrVersionMoved", err)
		}
		got, err = w.CompareAndSet(ctx, []byte("b"), 0)
		wantSnap(t, "CompareAndSet(b, 0)", got, err, "b", 1)
		_, err = v.CompareAndSet(ctx, []byte("c"), 0)
		if !errors.Is(err, shared.ErrVersionMoved) {
			t.Errorf("CompareAndSet(stale version 0) = %v; want ErrVersionMoved", err)
		}
		got, err = v.Get(ctx)
		wantSnap(t, "Get", got, err, "b", 1)
		got, err = v.Set(ctx, []byte("d"))
		wantSnap(t, "Set(d)", got, err, "d", 2)
		got, err = w.Set(ctx, nil)
		wantSnap(t, "Set(nil)", got, err, "", 3)

		_, err = v.Set(ctx, make([]byte, store.MaxDataSize+1))
		if !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("Set(too large) = %v; want ErrTooLarge", err)
		}
		_, err = v.CompareAndSet(ctx, nil, -2)
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("CompareAndSet(version -2) = %v; want ErrInvalidArgument", err)
		}
		// A value deleted under a compare-and-set: the version moved.
		if err := sts[1].Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		_, err = v.CompareAndSet(ctx, []byte("e"), 3)
		if !errors.Is(err, shared.ErrVersionMoved) {
			t.Errorf("CompareAndSet of a deleted value = %v; want ErrVersionMoved", err)
		}
		got, err = v.Set(ctx, []byte("f"))
		wantSnap(t, "Set(f) of a deleted value", got, err, "f", 0)
	})
}

// TestValueKindMismatch: a value on another recipe's path is refused.
func TestValueKindMismatch(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx := ctxFor(t)
		st := backends.Open(t, b, 1)[0]
		lock := testDir(t) + "/lock"
		m := sync.NewMutex(st, lock)
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer m.Unlock(ctx)
		q := testDir(t) + "/queue"
		// A Put stores only the settings it was given (a delivery here):
		// then the queue has its config node.
		if err := queue.New(st, q, queue.WithDelivery(queue.AtMostOnce)).Put(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
		contender := m.Guard().Path
		for _, p := range []string{lock, q, q + "/config", contender} {
			if _, err := shared.NewValue(st, p).Get(ctx); !errors.Is(err, shared.ErrKindMismatch) {
				t.Errorf("Value(%q).Get = %v; want ErrKindMismatch", p, err)
			}
			if _, err := shared.NewValue(st, p).Set(ctx, []byte("x")); !errors.Is(err, shared.ErrKindMismatch) {
				t.Errorf("Value(%q).Set = %v; want ErrKindMismatch", p, err)
			}
			if _, err := shared.NewCounter(st, p).Add(ctx, 1); !errors.Is(err, shared.ErrKindMismatch) {
				t.Errorf("Counter(%q).Add = %v; want ErrKindMismatch", p, err)
			}
		}
	})
}

// TestWatch: a watcher sends the value now, then every change, and stops
// with its ctx, Close or the session.
func TestWatch(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx := ctxFor(t)
		sts := backends.Open(t, b, 2)
		p := testDir(t) + "/v"
		v := shared.NewValue(sts[1], p)
		w := shared.NewValue(sts[0], p).Watch(ctx)
		defer w.Close()
		next := func(what string) shared.Snapshot {
			t.Helper()
			select {
			case s, ok := <-w.Snapshots():
				if !ok {
					t.Fatalf("%s: watcher stopped: %v", what, w.Err())
				}
				return s
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, ctx.Err())
			}
			return shared.Snapshot{}
		}
		if s := next("first"); s.Version != shared.NoVersion || s.Data != nil {
			t.Errorf("first snapshot = %+v; want never set", s)
		}
		for i, data := range []string{"a", "b", "c"} {
			if _, err := v.Set(ctx, []byte(data)); err != nil {
				t.Fatal(err)
			}
			// Changes may be merged, never reordered: wait for this one.
			for {
				s := next(data)
				if s.Version == int64(i) && string(s.Data) == data {
					break
				}
				if s.Version > int64(i) {
					t.Fatalf("snapshot %+v after setting %q at version %d", s, data, i)
				}
			}
		}
		_ = w.Close()
		if _, ok := <-w.Snapshots(); ok {
			t.Error("Snapshots not closed after Close")
		}
		if err := w.Err(); !errors.Is(err, shared.ErrWatcherClosed) {
			t.Errorf("Err after Close = %v; want ErrWatcherClosed", err)
		}
		w2 := shared.NewValue(sts[0], p).Watch(ctx)
		defer w2.Close()
		if s := <-w2.Snapshots(); string(s.Data) != "c" {
			t.Errorf("first snapshot of a second watcher = %+v; want c", s)
		}
		_ = sts[0].Close()
		select {
		case <-w2.Done():
		case <-ctx.Done():
			t.Fatal("watcher did not stop with its session")
		}
		if err := w2.Err(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Err after the session's Close = %v; want ErrClosed", err)
		}
	})
}
