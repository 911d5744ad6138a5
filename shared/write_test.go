package shared_test

import (
	"errors"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// rawHold is a hold made by hand: an ephemeral sequential node of its
// session, as every recipe's holder has.
type rawHold struct{ g store.Guard }

func (h rawHold) Guard() store.Guard { return h.g }

func holdOn(t *testing.T, st store.Store, dir string) rawHold {
	t.Helper()
	n, err := st.Create(t.Context(), dir+"/lock-", nil, store.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	return rawHold{store.Guard{Path: n.Path, Seq: n.Seq}}
}

// TestGuardedWrites: writes under a hold apply while it is held, on any
// session, and are refused with ErrLost, writing nothing, once its
// session has ended; a hold of nothing is refused before any I/O.
func TestGuardedWrites(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx := ctxFor(t)
		sts := backends.Open(t, b, 3)
		holder, writer := sts[0], sts[1]
		dir := testDir(t)
		h := holdOn(t, holder, dir+"/lock")
		v := shared.NewValue(writer, dir+"/state/v")

		got, err := v.SetWhile(ctx, h, []byte("a"))
		wantSnap(t, "SetWhile(held)", got, err, "a", 0)
		got, err = v.CompareAndSetWhile(ctx, h, []byte("b"), 0)
		wantSnap(t, "CompareAndSetWhile(held)", got, err, "b", 1)
		_, err = v.CompareAndSetWhile(ctx, h, []byte("c"), 0)
		if !errors.Is(err, shared.ErrVersionMoved) {
			t.Errorf("CompareAndSetWhile(stale) = %v; want ErrVersionMoved", err)
		}
		nodes, err := shared.Write(ctx, writer, h, []store.Op{
			store.SetOp(dir+"/state/v", []byte("c"), 1),
			store.CreateOp(dir+"/state/w", []byte("w")),
		})
		if err != nil || len(nodes) != 2 || nodes[0].Version != 2 {
			t.Fatalf("Write(held) = %+v, %v", nodes, err)
		}
		_, err = shared.Write(ctx, writer, h, []store.Op{
			store.SetOp(dir+"/state/v", []byte("no"), 2),
			store.CreateOp(dir+"/state/w", []byte("again")),
		})
		var we *store.WriteError
		if !errors.As(err, &we) || we.Op != 1 || !errors.Is(err, store.ErrNodeExists) {
			t.Errorf("Write(second op refused) = %v; want the WriteError of op 1, ErrNodeExists", err)
		}

		_, err = v.SetWhile(ctx, rawHold{}, []byte("x"))
		if !errors.Is(err, shared.ErrNotHeld) {
			t.Errorf("SetWhile(zero guard) = %v; want ErrNotHeld", err)
		}
		_, err = shared.Write(ctx, writer, nil, []store.Op{store.SetOp(dir+"/state/v", nil, store.AnyVersion)})
		if !errors.Is(err, shared.ErrNotHeld) {
			t.Errorf("Write(nil hold) = %v; want ErrNotHeld", err)
		}

		b.Expire(t, holder)
		_, err = v.SetWhile(ctx, h, []byte("late"))
		if !errors.Is(err, shared.ErrLost) || !errors.Is(err, store.ErrGuardFailed) {
			t.Errorf("SetWhile(lost hold) = %v; want ErrLost", err)
		}
		_, err = shared.Write(ctx, writer, h, []store.Op{store.DeleteOp(dir+"/state/w", store.AnyVersion)})
		if !errors.Is(err, shared.ErrLost) {
			t.Errorf("Write(lost hold) = %v; want ErrLost", err)
		}
		got, err = v.Get(ctx)
		wantSnap(t, "Get after refused writes", got, err, "c", 2)
		if _, err := writer.Get(ctx, dir+"/state/w"); err != nil {
			t.Errorf("Get(w) after a refused delete = %v", err)
		}

		// The next holder's writes stand.
		next := holdOn(t, sts[2], dir+"/lock")
		got, err = v.SetWhile(ctx, next, []byte("next"))
		wantSnap(t, "SetWhile(next holder)", got, err, "next", 3)
		// A guarded create makes its missing directory first.
		got, err = shared.NewValue(writer, dir+"/new/dir/v").SetWhile(ctx, next, []byte("n"))
		wantSnap(t, "SetWhile(missing directory)", got, err, "n", 0)
	})
}
