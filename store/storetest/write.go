package storetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/corral-go/corral/store"
)

// guardedWrite tests store.GuardedWriter: writes applied all or none,
// under guards the server checks, with the first refusal named.
func (s *suite) guardedWrite(t *testing.T) {
	a, b := s.open(t), s.open(t)
	w, ok := a.(store.GuardedWriter)
	if !ok {
		t.Skip("no store.GuardedWriter")
	}
	ctx, dir := ctxFor(t), ns(t)
	h := req(t).node(b.Create(ctx, dir+"/lock/lock-", nil, store.EphemeralSequential))
	g := store.Guard{Path: h.Path, Seq: h.Seq}
	x, st := dir+"/state/x", dir+"/state"
	req(t).node(a.Create(ctx, x, []byte("x0"), store.Persistent))
	req(t).node(a.Create(ctx, st+"/gone", nil, store.Persistent))
	req(t).node(a.Create(ctx, st+"/checked", []byte("c"), store.Persistent))

	got, err := w.WriteIf(ctx, []store.Guard{g}, []store.Op{
		store.SetOp(x, []byte("x1"), 0),
		store.CreateOp(st+"/y", []byte("y")),
		store.DeleteOp(st+"/gone", store.AnyVersion),
		store.CheckOp(st+"/checked", 0),
	})
	if err != nil {
		t.Fatalf("WriteIf(held guard) = %v", err)
	}
	paths := []string{x, st + "/y", st + "/gone", st + "/checked"}
	for i, n := range got {
		if n.Path != paths[i] {
			t.Errorf("WriteIf result %d: Path %q; want %q", i, n.Path, paths[i])
		}
	}
	if len(got) != 4 || got[0].Version != 1 || string(got[0].Data) != "x1" || string(got[1].Data) != "y" || got[1].Version != 0 {
		t.Errorf("WriteIf = %+v; want x at version 1 with x1, y made with y", got)
	}
	wantData(ctx, t, a, x, "x1", 1)
	wantData(ctx, t, a, st+"/y", "y", 0)
	_, err = a.Get(ctx, st+"/gone")
	wantErr(t, "Get(deleted by WriteIf)", err, store.ErrNoNode)

	refusals := []struct {
		name    string
		guards  []store.Guard
		ops     []store.Op
		guard   int // the guard named, or -1
		op      int // the op named, or -1
		want    error
		touches string
	}{
		{"guard missing", []store.Guard{{Path: dir + "/lock/none", Seq: 1}}, []store.Op{store.SetOp(x, []byte("no"), 1)}, 0, -1, store.ErrGuardFailed, ""},
		{"guard of another Seq", []store.Guard{{Path: h.Path, Seq: h.Seq + 1}}, []store.Op{store.SetOp(x, []byte("no"), 1)}, 0, -1, store.ErrGuardFailed, ""},
		{"second guard", []store.Guard{g, {Path: dir + "/lock/none", Seq: 1}}, []store.Op{store.SetOp(x, []byte("no"), 1)}, 1, -1, store.ErrGuardFailed, ""},
		{"guard before op", []store.Guard{{Path: dir + "/lock/none", Seq: 1}}, []store.Op{store.SetOp(x, []byte("no"), 7)}, 0, -1, store.ErrGuardFailed, ""},
		{"set version", []store.Guard{g}, []store.Op{store.CreateOp(st+"/z", nil), store.SetOp(x, []byte("no"), 0)}, -1, 1, store.ErrBadVersion, st + "/z"},
		{"set missing", nil, []store.Op{store.CreateOp(st+"/z", nil), store.SetOp(st+"/none", nil, store.AnyVersion)}, -1, 1, store.ErrNoNode, st + "/z"},
		{"create exists", []store.Guard{g}, []store.Op{store.SetOp(x, []byte("no"), 1), store.CreateOp(st+"/y", nil)}, -1, 1, store.ErrNodeExists, ""},
		{"create no parent", nil, []store.Op{store.CreateOp(st+"/z", nil), store.CreateOp(dir+"/none/z", nil)}, -1, 1, store.ErrNoNode, st + "/z"},
		{"create under ephemeral", nil, []store.Op{store.CreateOp(h.Path+"/z", nil)}, -1, 0, store.ErrEphemeralParent, ""},
		{"delete not empty", nil, []store.Op{store.CreateOp(dir+"/lock2", nil), store.DeleteOp(st, store.AnyVersion)}, -1, 1, store.ErrNotEmpty, dir + "/lock2"},
		{"delete version", nil, []store.Op{store.DeleteOp(st+"/y", 3)}, -1, 0, store.ErrBadVersion, ""},
		{"delete missing", nil, []store.Op{store.DeleteOp(st+"/none", store.AnyVersion)}, -1, 0, store.ErrNoNode, ""},
		{"check version", []store.Guard{g}, []store.Op{store.SetOp(x, []byte("no"), 1), store.CheckOp(st+"/checked", 1)}, -1, 1, store.ErrBadVersion, ""},
		{"check missing", nil, []store.Op{store.CheckOp(st+"/none", store.AnyVersion)}, -1, 0, store.ErrNoNode, ""},
	}
	for _, tt := range refusals {
		_, err := w.WriteIf(ctx, tt.guards, tt.ops)
		var we *store.WriteError
		if !errors.Is(err, tt.want) || !errors.As(err, &we) || we.Guard != tt.guard || we.Op != tt.op {
			t.Errorf("WriteIf(%s) = %v; want a *store.WriteError of guard %d, op %d, wrapping %v", tt.name, err, tt.guard, tt.op, tt.want)
		}
		wantData(ctx, t, a, x, "x1", 1) // nothing written
		if tt.touches != "" {
			_, err := a.Get(ctx, tt.touches)
			wantErr(t, "Get("+tt.touches+") after WriteIf("+tt.name+")", err, store.ErrNoNode)
		}
	}

	// A set keeps an ephemeral node's owner; a write may delete its own
	// guard's node, releasing a hold with its last write.
	own := req(t).node(a.Create(ctx, dir+"/lock/lock-", nil, store.EphemeralSequential))
	got, err = w.WriteIf(ctx, []store.Guard{{Path: own.Path, Seq: own.Seq}}, []store.Op{store.SetOp(h.Path, []byte("h"), 0), store.DeleteOp(own.Path, 0)})
	if err != nil {
		t.Fatalf("WriteIf(set another's ephemeral, delete the guard's node) = %v", err)
	}
	if n := req(t).node(a.Get(ctx, h.Path)); string(n.Data) != "h" || n.Owner != b.SessionID() || got[0].Version != 1 {
		t.Errorf("ephemeral node after a guarded set: %+v (result %+v); want data h, version 1, owner %d", n, got[0], b.SessionID())
	}
	_, err = a.Get(ctx, own.Path)
	wantErr(t, "Get(guard's node deleted by its write)", err, store.ErrNoNode)

	// The hold's session ends: its guard refuses.
	s.b.Expire(t, b)
	_, err = w.WriteIf(ctx, []store.Guard{g}, []store.Op{store.SetOp(x, []byte("late"), store.AnyVersion)})
	wantErr(t, "WriteIf(guard of an expired session)", err, store.ErrGuardFailed)
	wantData(ctx, t, a, x, "x1", 1)

	// A delete that empties a directory Create made removes it.
	leaf := req(t).node(a.Create(ctx, dir+"/made/sub/leaf", nil, store.Persistent))
	if _, err := w.WriteIf(ctx, nil, []store.Op{store.DeleteOp(leaf.Path, store.AnyVersion)}); err != nil {
		t.Fatalf("WriteIf(delete) = %v", err)
	}
	s.gone(ctx, t, a, dir+"/made/sub", dir+"/made")
}

// wantData fails t unless the node at p has data and version.
func wantData(ctx context.Context, t *testing.T, st store.Store, p, data string, version int64) {
	t.Helper()
	n, err := st.Get(ctx, p)
	if err != nil || !bytes.Equal(n.Data, []byte(data)) || n.Version != version {
		t.Errorf("Get(%q) = %q at version %d, %v; want %q at version %d", p, n.Data, n.Version, err, data, version)
	}
}

// guardedWriteInvalid: a malformed guarded write is refused before any
// I/O, the same on every store.
func (s *suite) guardedWriteInvalid(t *testing.T) {
	a := s.open(t)
	w, ok := a.(store.GuardedWriter)
	if !ok {
		t.Skip("no store.GuardedWriter")
	}
	ctx, dir := ctxFor(t), ns(t)
	g := store.Guard{Path: dir + "/g", Seq: 1}
	many := slices.Repeat([]store.Op{store.CheckOp(dir+"/c", 0)}, store.MaxWriteOps+1)
	for i := range many {
		many[i].Path += strings.Repeat("x", i)
	}
	big := make([]byte, store.MaxDataSize)
	cases := []struct {
		name   string
		ctx    context.Context
		guards []store.Guard
		ops    []store.Op
		want   error
	}{
		{"nothing", ctx, nil, nil, store.ErrInvalidArgument},
		{"zero guard", ctx, []store.Guard{{}}, []store.Op{store.CheckOp(dir, 0)}, store.ErrInvalidArgument},
		{"guard without path", ctx, []store.Guard{{Seq: 3}}, nil, store.ErrInvalidPath},
		{"guard on root", ctx, []store.Guard{{Path: "/", Seq: 1}}, nil, store.ErrInvalidPath},
		{"guard negative Seq", ctx, []store.Guard{{Path: dir, Seq: -1}}, nil, store.ErrInvalidArgument},
		{"bad path", ctx, nil, []store.Op{store.SetOp("x", nil, 0)}, store.ErrInvalidPath},
		{"root", ctx, []store.Guard{g}, []store.Op{store.SetOp("/", nil, 0)}, store.ErrInvalidPath},
		{"unknown type", ctx, nil, []store.Op{{Type: 9, Path: dir}}, store.ErrInvalidArgument},
		{"zero op", ctx, nil, []store.Op{{}}, store.ErrInvalidArgument},
		{"version", ctx, nil, []store.Op{store.SetOp(dir, nil, -2)}, store.ErrInvalidArgument},
		{"create version", ctx, nil, []store.Op{{Type: store.OpCreate, Path: dir, Version: 1}}, store.ErrInvalidArgument},
		{"data on delete", ctx, nil, []store.Op{{Type: store.OpDelete, Path: dir, Data: []byte("x"), Version: store.AnyVersion}}, store.ErrInvalidArgument},
		{"same path", ctx, nil, []store.Op{store.SetOp(dir+"/a", nil, 0), store.CheckOp(dir+"/a", 0)}, store.ErrInvalidArgument},
		{"path below another", ctx, nil, []store.Op{store.DeleteOp(dir+"/a/b", 0), store.DeleteOp(dir+"/a", 0)}, store.ErrInvalidArgument},
		{"data too large", ctx, nil, []store.Op{store.SetOp(dir, append(big, 0), 0)}, store.ErrTooLarge},
		{"write too large", ctx, nil, []store.Op{store.SetOp(dir+"/a", big, 0), store.SetOp(dir+"/b", big[:32<<10], 0)}, store.ErrTooLarge},
		{"too many", ctx, nil, many, store.ErrTooLarge},
		{"cancelled", cancelled(), []store.Guard{g}, []store.Op{store.CreateOp(dir+"/a", nil)}, context.Canceled},
	}
	for _, tt := range cases {
		_, err := w.WriteIf(tt.ctx, tt.guards, tt.ops)
		wantErr(t, "WriteIf("+tt.name+")", err, tt.want)
	}
	if _, err := a.Get(ctx, dir+"/a"); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get(%q) after refused writes = %v; want ErrNoNode", dir+"/a", err)
	}
	_ = a.Close()
	_, err := w.WriteIf(ctx, []store.Guard{g}, []store.Op{store.CreateOp(dir+"/a", nil)})
	wantErr(t, "WriteIf after Close", err, store.ErrClosed)
}
