package shared_test

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
)

// TestMisuse: nil and zero handles, a nil store, bad paths and a nil
// option are refused with a sentinel, never a panic or a hang.
func TestMisuse(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	defer st.Close()
	var nilValue *shared.Value
	var nilCounter *shared.Counter
	for _, tt := range []struct {
		name string
		v    *shared.Value
		c    *shared.Counter
		want error
	}{
		{"nil", nilValue, nilCounter, store.ErrInvalidArgument},
		{"zero", new(shared.Value), new(shared.Counter), store.ErrInvalidArgument},
		{"nil store", shared.NewValue(nil, "/a"), shared.NewCounter(nil, "/a"), store.ErrInvalidArgument},
		{"bad path", shared.NewValue(st, "a/"), shared.NewCounter(st, "a/"), store.ErrInvalidPath},
		{"root", shared.NewValue(st, "/"), shared.NewCounter(st, "/"), store.ErrInvalidPath},
		{"nil option", shared.NewValue(st, "/a", nil), shared.NewCounter(st, "/a", nil), store.ErrInvalidArgument},
	} {
		h := rawHold{}
		calls := map[string]func() error{
			"Value.Get":                func() error { _, err := tt.v.Get(ctx); return err },
			"Value.Set":                func() error { _, err := tt.v.Set(ctx, nil); return err },
			"Value.CompareAndSet":      func() error { _, err := tt.v.CompareAndSet(ctx, nil, 0); return err },
			"Value.SetWhile":           func() error { _, err := tt.v.SetWhile(ctx, h, nil); return err },
			"Value.CompareAndSetWhile": func() error { _, err := tt.v.CompareAndSetWhile(ctx, h, nil, 0); return err },
			"Value.Watch": func() error {
				w := tt.v.Watch(ctx)
				<-w.Done()
				if _, ok := <-w.Snapshots(); ok {
					return errors.New("a snapshot from a watcher that stopped")
				}
				return w.Err()
			},
			"Counter.Get": func() error { _, err := tt.c.Get(ctx); return err },
			"Counter.Add": func() error { _, err := tt.c.Add(ctx, 1); return err },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, tt.want) {
				t.Errorf("%s of a %s handle = %v; want %v", name, tt.name, err, tt.want)
			}
		}
		if p := tt.v.Path(); tt.name == "nil" && p != "" {
			t.Errorf("Path of a nil Value = %q", p)
		}
	}
	if _, err := shared.Write(ctx, nil, rawHold{}, nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Write(nil store) = %v; want ErrInvalidArgument", err)
	}
	if _, err := shared.Write(ctx, st, rawHold{}, nil, nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Write(nil option) = %v; want ErrInvalidArgument", err)
	}
	held := rawHold{store.Guard{Path: "/h", Seq: 1}}
	if _, err := shared.Write(ctx, st, held, []store.Op{store.SetOp("/", nil, 0)}); !errors.Is(err, store.ErrInvalidPath) {
		t.Errorf("Write(root) = %v; want ErrInvalidPath", err)
	}
	var w *shared.Watcher
	if _, ok := <-w.Snapshots(); ok || w.Close() != nil || !errors.Is(w.Err(), store.ErrInvalidArgument) {
		t.Error("a nil Watcher is not stopped")
	}
	<-w.Done()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := shared.NewValue(st, "/a").Set(cctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Set(cancelled ctx) = %v; want Canceled", err)
	}
	if _, err := shared.NewCounter(st, "/a").Add(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Add(cancelled ctx) = %v; want Canceled", err)
	}
	_ = st.Close()
	if _, err := shared.NewCounter(st, "/a").Add(ctx, 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Add(closed store) = %v; want ErrClosed", err)
	}
}
