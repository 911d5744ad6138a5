package memstore_test

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
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
