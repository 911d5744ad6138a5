package zkstore_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// TestDirectWatch: NodeW sets its watch as a direct request, and the watch
// keeps the client's promises across a lost connection, which the client
// does not know of: a change made while disconnected is reported after the
// reconnection, none is reported when nothing changed (and the watch goes
// on), and a watch whose read was never answered reports the lost
// connection, after which a wait watches again.
func TestDirectWatch(t *testing.T) {
	srv, b := server(t)
	other := b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	st, p, h := openHooked(t, ctx, srv.Addr())
	watch := func(path string) <-chan store.Event {
		t.Helper()
		waitDirectUp(t, st)
		before := zkstore.Directs(st)
		_, ch, err := st.NodeW(ctx, path)
		if err != nil {
			t.Fatalf("NodeW(%s) = %v", path, err)
		}
		if zkstore.Directs(st) == before {
			t.Fatalf("NodeW(%s) sent no direct request", path)
		}
		return ch
	}
	quiet := func(ch <-chan store.Event, what string) {
		t.Helper()
		select {
		case ev := <-ch:
			t.Fatalf("%s: event %+v before any change", what, ev)
		default:
		}
	}
	expect := func(ch <-chan store.Event, want store.EventType, what string) {
		t.Helper()
		select {
		case ev := <-ch:
			if ev.Err != nil || ev.Type != want {
				t.Fatalf("%s: event %+v; want %v", what, ev, want)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no event", what)
		}
	}
	reconnect := func(change func()) {
		t.Helper()
		disc := st.Disconnected()
		p.Refuse()
		select {
		case <-disc:
		case <-ctx.Done():
			t.Fatal("client never noticed the outage")
		}
		if change != nil {
			change()
		}
		p.Restore()
		zkbackend.WaitConnected(t, ctx, st)
	}
	n := func(name string) string {
		return must[store.Node](t)(other.Create(ctx, dir+"/"+name, []byte("v0"), store.Persistent)).Path
	}
	set := func(path string) {
		if _, err := other.Set(ctx, path, []byte("v1"), -1); err != nil {
			t.Fatal(err)
		}
	}
	del := func(path string) {
		if err := other.Delete(ctx, path); err != nil {
			t.Fatal(err)
		}
	}

	// Set on the server, fired by a deletion and by a data change.
	a, c := n("a"), n("c")
	chA, chC := watch(a), watch(c)
	if w, err := zkserver.SessionWatches(srv.Addr(), st.SessionID()); err != nil || !slices.Contains(w, a) {
		t.Fatalf("the server watches %v, %v; want %s among them", w, err, a)
	}
	del(a)
	expect(chA, store.EventDeleted, "deleted")
	set(c)
	expect(chC, store.EventDataChanged, "data set")

	// Across reconnections: nothing changed (and the watch goes on to
	// report a later deletion), the data changed, the node went.
	same, changed, gone := n("same"), n("changed"), n("gone")
	chSame, chChanged, chGone := watch(same), watch(changed), watch(gone)
	reconnect(func() { set(changed); del(gone) })
	expect(chChanged, store.EventDataChanged, "data set while disconnected")
	expect(chGone, store.EventDeleted, "deleted while disconnected")
	quiet(chSame, "unchanged across a reconnection")
	reconnect(nil)
	quiet(chSame, "unchanged across two reconnections")
	del(same)
	expect(chSame, store.EventDeleted, "deleted after two reconnections")

	// The read's answer is lost with its connection: the call reports the
	// lost connection, and a new wait is served.
	lost := n("lost")
	h.drop.Store(true)
	res := make(chan error, 1)
	go func() {
		_, _, err := st.NodeW(ctx, lost)
		res <- err
	}()
	select {
	case <-h.dropped:
	case <-ctx.Done():
		t.Fatal("no direct answer was dropped")
	}
	h.drop.Store(false)
	p.Cut()
	select {
	case err := <-res:
		if !errors.Is(err, store.ErrDisconnected) {
			t.Fatalf("NodeW with its answer lost = %v; want ErrDisconnected", err)
		}
	case <-ctx.Done():
		t.Fatal("NodeW with its answer lost never returned")
	}
	zkbackend.WaitConnected(t, ctx, st)
	// The Store set the watch again on the client's path, and the wait
	// joins it.
	_, chLost, err := st.NodeW(ctx, lost)
	if err != nil {
		t.Fatal(err)
	}
	del(lost)
	expect(chLost, store.EventDeleted, "deleted, watched again after a lost answer")

	// The session's end reaches a direct watch.
	last := watch(n("last"))
	st.Close()
	select {
	case ev := <-last:
		if !errors.Is(ev.Err, store.ErrClosed) {
			t.Fatalf("a direct watch at Close: %+v; want ErrClosed", ev)
		}
	case <-ctx.Done():
		t.Fatal("a direct watch never reported Close")
	}
}

// TestDirectWatchSessionExpires: a direct watch whose connection stays
// down past the session timeout reports the session's expiry (the outages
// shorter than the timeout are TestDirectWatch's).
func TestDirectWatchSessionExpires(t *testing.T) {
	_, b := server(t)
	st, proxies := b.OpenWithProxies(t, zkstore.WithSessionTimeout(time.Second))
	other := b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	path := must[store.Node](t)(other.Create(ctx, dir+"/n", nil, store.Persistent)).Path
	waitDirectUp(t, st)
	before := zkstore.Directs(st)
	_, ch, err := st.NodeW(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if zkstore.Directs(st) == before {
		t.Fatal("NodeW sent no direct request")
	}
	proxies[0].Refuse()
	select {
	case ev := <-ch:
		if !errors.Is(ev.Err, store.ErrSessionExpired) {
			t.Fatalf("a direct watch past the session timeout: %+v; want ErrSessionExpired", ev)
		}
	case <-ctx.Done():
		t.Fatal("a direct watch never reported the session's expiry")
	}
}
