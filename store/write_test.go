package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// TestValidateWrite: the checks of a guarded write before any I/O, and
// the values that make one.
func TestValidateWrite(t *testing.T) {
	g := store.Guard{Path: "/l/lock-0000000001", Seq: 1}
	big := make([]byte, store.MaxDataSize)
	for _, tt := range []struct {
		name   string
		guards []store.Guard
		ops    []store.Op
		want   error
	}{
		{"guard alone", []store.Guard{g}, nil, nil},
		{"op alone", nil, []store.Op{store.CreateOp("/a", []byte("x"))}, nil},
		{"siblings", []store.Guard{g}, []store.Op{store.SetOp("/a", nil, 0), store.SetOp("/ab", nil, 0), store.DeleteOp("/a2/b", 3)}, nil},
		{"guard on an op's node", []store.Guard{g}, []store.Op{store.DeleteOp(g.Path, store.AnyVersion)}, nil},
		{"most", nil, manyOps(store.MaxWriteOps), nil},
		{"nothing", nil, nil, store.ErrInvalidArgument},
		{"zero guard", []store.Guard{{}}, nil, store.ErrInvalidArgument},
		{"guard path", []store.Guard{{Path: "/a/", Seq: 1}}, nil, store.ErrInvalidPath},
		{"guard root", []store.Guard{{Path: "/", Seq: 0}}, nil, store.ErrInvalidPath},
		{"guard Seq", []store.Guard{{Path: "/a", Seq: -5}}, nil, store.ErrInvalidArgument},
		{"zero op", nil, []store.Op{{}}, store.ErrInvalidArgument},
		{"op path", nil, []store.Op{store.CheckOp("a", 0)}, store.ErrInvalidPath},
		{"op root", nil, []store.Op{store.CreateOp("/", nil)}, store.ErrInvalidPath},
		{"version", nil, []store.Op{store.DeleteOp("/a", -7)}, store.ErrInvalidArgument},
		{"create version", nil, []store.Op{{Type: store.OpCreate, Path: "/a", Version: store.AnyVersion}}, store.ErrInvalidArgument},
		{"check data", nil, []store.Op{{Type: store.OpCheck, Path: "/a", Data: []byte{}}}, store.ErrInvalidArgument},
		{"twice", nil, []store.Op{store.SetOp("/a", nil, 0), store.DeleteOp("/a", 0)}, store.ErrInvalidArgument},
		{"below", nil, []store.Op{store.CreateOp("/a/b/c", nil), store.CreateOp("/a/b", nil)}, store.ErrInvalidArgument},
		{"data", nil, []store.Op{store.SetOp("/a", append(big, 1), 0)}, store.ErrTooLarge},
		{"size", []store.Guard{{Path: "/" + strings.Repeat("g", 4000), Seq: 1}}, []store.Op{store.SetOp("/a", big, 0), store.SetOp("/b", big[:13<<10], 0)}, store.ErrTooLarge},
		{"too many", nil, manyOps(store.MaxWriteOps + 1), store.ErrTooLarge},
	} {
		if err := store.ValidateWrite(tt.guards, tt.ops); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("ValidateWrite(%s) = %v; want %v", tt.name, err, tt.want)
		}
	}
	for typ, want := range map[store.OpType]string{store.OpCheck: "check", store.OpCreate: "create", store.OpSet: "set", store.OpDelete: "delete", 0: "OpType(0)", 42: "OpType(42)"} {
		if got := typ.String(); got != want {
			t.Errorf("OpType(%d).String() = %q; want %q", typ, got, want)
		}
	}
}

func manyOps(n int) []store.Op {
	ops := make([]store.Op, n)
	for i := range ops {
		ops[i] = store.CheckOp("/c"+strings.Repeat("x", i), store.AnyVersion)
	}
	return ops
}

// hidden is a Store with no capability beyond the contract.
type hidden struct{ store.Store }

// TestWrite: the helper finds the capability, refuses a nil store or one
// without it, and its errors name the guard or op that refused.
func TestWrite(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	defer st.Close()
	ops := []store.Op{store.CreateOp("/a", []byte("x"))}
	if _, err := store.Write(ctx, nil, nil, ops); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Write(nil store) = %v; want ErrInvalidArgument", err)
	}
	if _, err := store.Write(ctx, st, nil, nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Write(nothing) = %v; want ErrInvalidArgument", err)
	}
	if _, err := store.Write(ctx, hidden{st}, nil, ops); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Write(store without GuardedWriter) = %v; want ErrUnsupported", err)
	}
	got, err := store.Write(ctx, st, nil, ops)
	if err != nil || len(got) != 1 || got[0].Path != "/a" || string(got[0].Data) != "x" {
		t.Fatalf("Write(create) = %+v, %v", got, err)
	}
	guards := []store.Guard{{Path: "/lock", Seq: 1}}
	_, err = store.Write(ctx, st, guards, []store.Op{store.SetOp("/a", nil, 0)})
	var we *store.WriteError
	if !errors.As(err, &we) || we.Guard != 0 || we.Op != -1 || !errors.Is(err, store.ErrGuardFailed) || !strings.Contains(we.Error(), "guard 0") {
		t.Errorf("Write(missing guard) = %v; want the WriteError of guard 0", err)
	}
	_, err = store.Write(ctx, st, nil, []store.Op{store.CheckOp("/a", 0), store.CreateOp("/b", nil), store.SetOp("/c", nil, 0)})
	if !errors.As(err, &we) || we.Guard != -1 || we.Op != 2 || !errors.Is(err, store.ErrNoNode) || !strings.Contains(we.Error(), "op 2") || we.Unwrap() == nil {
		t.Errorf("Write(missing node) = %v; want the WriteError of op 2, wrapping ErrNoNode", err)
	}
	if e := store.GuardRefused(guards, 0); e.Guard != 0 || !errors.Is(e, store.ErrGuardFailed) {
		t.Errorf("GuardRefused = %v", e)
	}
	if e := store.OpRefused(ops, 0, store.ErrNodeExists); e.Op != 0 || !errors.Is(e, store.ErrNodeExists) {
		t.Errorf("OpRefused = %v", e)
	}
}
