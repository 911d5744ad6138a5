package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, backends.Memory())
}

// TestDisconnected pins down what memstore does while a session is cut off:
// calls fail with ErrDisconnected, watches stay set, the session survives.
func TestDisconnected(t *testing.T) {
	ctx := t.Context()
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	n, err := a.Create(ctx, "/d/e", nil, store.Ephemeral)
	if err != nil {
		t.Fatal(err)
	}
	_, _, ev, err := a.ExistsW(ctx, n.Path)
	if err != nil {
		t.Fatal(err)
	}
	a.Disconnect()
	if _, err := a.Get(ctx, n.Path); !errors.Is(err, store.ErrDisconnected) {
		t.Errorf("Get while disconnected = %v; want ErrDisconnected", err)
	}
	if _, err := b.Get(ctx, n.Path); err != nil {
		t.Errorf("ephemeral node of a disconnected session: Get = %v; want it to exist", err)
	}
	if _, err := b.Set(ctx, n.Path, []byte("x"), store.AnyVersion); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ev:
		if e.Type != store.EventDataChanged {
			t.Errorf("watch of a disconnected session: %+v; want data-changed", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch of a disconnected session did not fire")
	}
	a.Reconnect()
	if _, err := a.Get(ctx, n.Path); err != nil {
		t.Errorf("Get after Reconnect = %v", err)
	}
}

// TestLostReplyOutcomeUnknown: a lost reply on anything but an ephemeral
// sequential create is reported as ErrDisconnected, though the node exists.
func TestLostReplyOutcomeUnknown(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	defer st.Close()
	disc := st.Disconnected()
	st.LoseNextCreateReply()
	_, err := st.Create(ctx, "/q/item-", []byte("x"), store.Sequential)
	if !errors.Is(err, store.ErrDisconnected) {
		t.Fatalf("Create with a lost reply = %v; want ErrDisconnected", err)
	}
	select {
	case <-disc:
	default:
		t.Error("Disconnected() not closed by the lost reply")
	}
	kids, err := st.Children(ctx, "/q")
	if err != nil || len(kids) != 1 {
		t.Errorf("Children = %v, %v; want the one node the lost create made", kids, err)
	}
}

// TestPanicLeavesTreeUnlocked pins down that a call that panics (here on a
// nil ctx, Go's convention) leaves the tree every session shares unlocked:
// another session's calls and Close still return. Without the unlock on
// every path the first panic wedged the whole server.
func TestPanicLeavesTreeUnlocked(t *testing.T) {
	var nilCtx context.Context
	calls := map[string]func(st *memstore.Store) error{
		"Create": func(st *memstore.Store) error { _, err := st.Create(nilCtx, "/p/a", nil, store.Persistent); return err },
		"Get":    func(st *memstore.Store) error { _, err := st.Get(nilCtx, "/p"); return err },
		"Set":    func(st *memstore.Store) error { _, err := st.Set(nilCtx, "/p", nil, store.AnyVersion); return err },
		"ExistsW": func(st *memstore.Store) error {
			_, _, _, err := st.ExistsW(nilCtx, "/p")
			return err
		},
		"ChildrenW":   func(st *memstore.Store) error { _, _, err := st.ChildrenW(nilCtx, "/p"); return err },
		"Delete":      func(st *memstore.Store) error { return st.Delete(nilCtx, "/p/x") },
		"GetDelete":   func(st *memstore.Store) error { _, err := st.GetDelete(nilCtx, "/p/x"); return err },
		"DeleteFront": func(st *memstore.Store) error { return st.DeleteFront(nilCtx, "/p/x", 1) },
		"FollowChildren": func(st *memstore.Store) error {
			_, _, err := st.FollowChildren(nilCtx, "/p")
			return err
		},
		"CreateIf": func(st *memstore.Store) error {
			_, err := st.CreateIf(nilCtx, "/p/b", nil, store.Persistent, "/p")
			return err
		},
		"queue.Put": func(st *memstore.Store) error {
			return queue.New(st, "/q").Put(nilCtx, []byte("x"))
		},
		"queue.Take": func(st *memstore.Store) error {
			_, err := queue.New(st, "/q").Take(nilCtx)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			srv := memstore.NewServer()
			a, b := srv.Open(), srv.Open()
			if _, err := b.Create(t.Context(), "/p", nil, store.Persistent); err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s(nil ctx) did not panic", name)
					}
				}()
				_ = call(a)
			}()
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := b.Get(ctx, "/p")
				done <- errors.Join(err, a.Close(), b.Close())
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("after a recovered panic: Get and Close = %v; want nil", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("after a recovered panic of %s: another session's Get and Close did not return: the tree stays locked", name)
			}
		})
	}
}
