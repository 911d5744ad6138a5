package zkstore_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// changesUntil takes the changes of f until one of path comes whose node
// has data want ("" with gone: its deletion), and fails after a while.
func changesUntil(t *testing.T, f store.TreeFollow, path, want string, gone bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		cs, ready, err := f.Changes()
		for _, c := range cs {
			if c.Node.Path == path && (gone && c.Type == store.EventDeleted || !gone && c.Type != store.EventDeleted && string(c.Node.Data) == want) {
				return
			}
		}
		if err != nil {
			t.Fatalf("follow ended waiting for %s=%q: %v", path, want, err)
		}
		select {
		case <-ready:
		case <-timeout:
			t.Fatalf("no change of %s to %q in 20s", path, want)
		}
	}
}

// sessionWatches returns the paths the server holds data watches on for
// st's session, waiting up to a while for it to hold exactly want of them.
func sessionWatches(t *testing.T, srv *zkserver.Server, st store.Store, want int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ws, err := zkserver.SessionWatches(srv.Addr(), st.SessionID())
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == want || time.Now().After(deadline) {
			return ws
		}
		// The server's table, read through a four-letter word: no event
		// to wait on.
		time.Sleep(20 * time.Millisecond)
	}
}

// A follow of a tree holds one watch on the server, whatever the number of
// nodes it follows, and none once stopped.
func TestFollowTreeOneWatch(t *testing.T) {
	srv, b := server(t)
	st, other := b.Open(t), b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	for i := range 50 {
		must[store.Node](t)(other.Create(ctx, fmt.Sprintf("%s/n%d/m", dir, i), []byte("v"), store.Persistent))
	}
	f, nodes, err := st.(*zkstore.Store).FollowTree(ctx, dir, store.MaxPathDepth, 1000)
	if err != nil || len(nodes) != 101 {
		t.Fatalf("FollowTree = %d nodes, %v; want 101", len(nodes), err)
	}
	for i := range 50 {
		p := fmt.Sprintf("%s/n%d/m", dir, i)
		must[store.Node](t)(other.Set(ctx, p, []byte("w"), store.AnyVersion))
		changesUntil(t, f, p, "w", false)
	}
	if ws := sessionWatches(t, srv, st, 1); !slices.Equal(ws, []string{dir}) {
		t.Errorf("server watches of the session = %v; want the one on %s", ws, dir)
	}
	f.Stop()
	if ws := sessionWatches(t, srv, st, 0); len(ws) != 0 {
		t.Errorf("server watches after Stop = %v; want none", ws)
	}
}

// The guard of ZOOKEEPER-4466 (see recursive.go): on ZooKeeper 3.6 to 3.8
// a one-shot watch of the session on the root of a followed tree would
// turn the recursive watch into a one-shot one, and removing the recursive
// watch would take the one-shot watch along. Both kinds of watch work side
// by side, in either order, and the recursive one goes once unused.
func TestFollowTreeGuard(t *testing.T) {
	srv, b := server(t)
	ctx, dir := ctxFor(t), dirFor(t)
	for _, node := range []bool{false, true} {
		t.Run(fmt.Sprintf("NodeW=%v", node), func(t *testing.T) {
			st, other := b.Open(t).(*zkstore.Store), b.Open(t)
			root := fmt.Sprintf("%s/%v", dir, node)
			must[store.Node](t)(other.Create(ctx, root, []byte("0"), store.Persistent))
			watch := func() <-chan store.Event {
				t.Helper()
				if node {
					_, ev, err := st.NodeW(ctx, root)
					return must[<-chan store.Event](t)(ev, err)
				}
				_, _, ev, err := st.ExistsW(ctx, root)
				return must[<-chan store.Event](t)(ev, err)
			}
			fired := func(ev <-chan store.Event) {
				t.Helper()
				select {
				case e := <-ev:
					if e.Err != nil || e.Type != store.EventDataChanged {
						t.Errorf("one-shot watch on %s = %+v; want data changed", root, e)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("one-shot watch on %s did not fire in 20s", root)
				}
			}

			// A follow, then a one-shot watch on its root: the follow
			// still hears of the nodes below.
			f, _, err := st.FollowTree(ctx, root, store.MaxPathDepth, 100)
			if err != nil {
				t.Fatal(err)
			}
			ev := watch()
			must[store.Node](t)(other.Create(ctx, root+"/a", []byte("a"), store.Persistent))
			changesUntil(t, f, root+"/a", "a", false)
			must[store.Node](t)(other.Set(ctx, root, []byte("1"), store.AnyVersion))
			fired(ev)
			changesUntil(t, f, root, "1", false)
			must[store.Node](t)(other.Set(ctx, root+"/a", []byte("b"), store.AnyVersion))
			changesUntil(t, f, root+"/a", "b", false)

			// A one-shot watch, then the follow stops: the one-shot
			// watch still fires, and then the recursive one goes.
			ev = watch()
			f.Stop()
			// A read of the session's: whatever Stop sent the server
			// has handled before it answers.
			must[store.Node](t)(st.Get(ctx, root))
			must[store.Node](t)(other.Set(ctx, root, []byte("2"), store.AnyVersion))
			fired(ev)
			if ws := sessionWatches(t, srv, st, 0); len(ws) != 0 {
				t.Errorf("server watches once all fired = %v; want none", ws)
			}

			// A one-shot watch set before the follow starts.
			ev = watch()
			f, _, err = st.FollowTree(ctx, root, store.MaxPathDepth, 100)
			if err != nil {
				t.Fatal(err)
			}
			must[store.Node](t)(other.Set(ctx, root+"/a", []byte("c"), store.AnyVersion))
			changesUntil(t, f, root+"/a", "c", false)
			must[store.Node](t)(other.Set(ctx, root, []byte("3"), store.AnyVersion))
			fired(ev)
			changesUntil(t, f, root, "3", false)
			f.Stop()
			if ws := sessionWatches(t, srv, st, 0); len(ws) != 0 {
				t.Errorf("server watches after Stop = %v; want none", ws)
			}
		})
	}
}

// A lost connection ends a follow with ErrDisconnected (its watch went with
// the connection); a new follow after the reconnection holds the one new
// watch, again and again, with the client's watches set again beside it,
// free of go-zookeeper's lastZxid race under -race.
func TestFollowTreeReconnect(t *testing.T) {
	srv, b := server(t)
	st, _ := b.OpenWithProxies(t)
	other := b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	must[store.Node](t)(other.Create(ctx, dir+"/x", []byte("0"), store.Persistent))
	for round := range 5 {
		f, _, err := st.FollowTree(ctx, dir, 1, 100)
		if err != nil {
			t.Fatalf("round %d: FollowTree = %v", round, err)
		}
		_, _, ev, err := st.ExistsW(ctx, dir+"/x")
		if err != nil {
			t.Fatal(err)
		}
		b.Disconnect(t, st)
		timeout := time.After(20 * time.Second)
		for {
			_, ready, err := f.Changes()
			if err != nil {
				if !errors.Is(err, store.ErrDisconnected) {
					t.Fatalf("round %d: follow ended with %v; want %v", round, err, store.ErrDisconnected)
				}
				break
			}
			select {
			case <-ready:
			case <-timeout:
				t.Fatalf("round %d: follow still running 20s after the connection was cut", round)
			}
		}
		f.Stop()
		b.Reconnect(t, st)
		zkbackend.WaitConnected(t, ctx, st)
		v := fmt.Sprint(round + 1)
		must[store.Node](t)(other.Set(ctx, dir+"/x", []byte(v), store.AnyVersion))
		select {
		case e := <-ev:
			if e.Err != nil {
				t.Fatalf("round %d: ExistsW across the reconnection = %v", round, e.Err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: ExistsW did not fire", round)
		}
	}
	f, _, err := st.FollowTree(ctx, dir, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if ws := sessionWatches(t, srv, st, 1); !slices.Equal(ws, []string{dir}) {
		t.Errorf("server watches after the reconnections = %v; want the one on %s", ws, dir)
	}
}
