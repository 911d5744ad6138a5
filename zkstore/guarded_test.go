package zkstore_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// TestCreateIfGuardGoneLeavesNoParent: CreateIf makes the missing parent
// of its node; when the guard is gone by the time it sends the create
// again, it fails with ErrNoNode and takes back the parent it made, which
// no node would fill.
func TestCreateIfGuardGoneLeavesNoParent(t *testing.T) {
	srv, b := server(t)
	other := b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	st, p, _ := openHooked(t, ctx, srv.Addr(), zkstore.WithReclaimDelay(0))
	guard := must[store.Node](t)(other.Create(ctx, dir+"/guard", nil, store.Persistent))
	// The link freezes as the parent's create goes out: the guard goes
	// meanwhile.
	frozen := make(chan struct{})
	var once sync.Once
	p.SetHook(tcpproxy.LengthPrefixed, func(m tcpproxy.Message) tcpproxy.Action {
		if _, op, ok := zkserver.RequestHeader(m.Data); ok && m.Index > 0 && m.Dir == tcpproxy.Upstream && op == zkserver.OpCreateContainer {
			once.Do(func() {
				p.Freeze()
				close(frozen)
			})
		}
		return tcpproxy.Forward
	})
	done := make(chan error, 1)
	go func() {
		_, err := st.CreateIf(ctx, dir+"/p/n", nil, store.Ephemeral, guard.Path)
		done <- err
	}()
	select {
	case <-frozen:
	case err := <-done:
		t.Fatalf("CreateIf with its parent missing = %v before it made the parent", err)
	}
	if err := other.Delete(ctx, guard.Path); err != nil {
		t.Fatal(err)
	}
	p.Restore()
	if err := <-done; !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("CreateIf with its guard gone = %v; want ErrNoNode", err)
	}
	if _, err := other.Get(ctx, dir+"/p"); !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Get(%s/p) after CreateIf failed = %v; want ErrNoNode", dir, err)
	}
}
