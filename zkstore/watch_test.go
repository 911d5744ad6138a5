package zkstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// TestNodeWatchLeavesNoCreationWatch asks the server which watches a
// session holds: a NodeW on a missing node holds none, where an ExistsW on
// it holds one on the node's creation, which for a sequential node's name
// never comes; a NodeW that fired holds none either.
func TestNodeWatchLeavesNoCreationWatch(t *testing.T) {
	srv, b := server(t)
	st, other := b.Open(t), b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	watched := func() []string {
		t.Helper()
		paths, err := zkserver.SessionWatches(srv.Addr(), st.SessionID())
		if err != nil {
			t.Fatal(err)
		}
		return paths
	}
	nw := st.(store.NodeWatcher)
	gone := must[store.Node](t)(other.Create(ctx, dir+"/c-", nil, store.EphemeralSequential))
	if err := other.Delete(ctx, gone.Path); err != nil {
		t.Fatal(err)
	}
	if _, ch, err := nw.NodeW(ctx, gone.Path); !errors.Is(err, store.ErrNoNode) || ch != nil {
		t.Fatalf("NodeW(gone) = %v, %v; want no watch and %v", ch, err, store.ErrNoNode)
	}
	if w := watched(); slices.Contains(w, gone.Path) {
		t.Errorf("after NodeW(gone) the server watches %v; want no watch on %s", w, gone.Path)
	}

	// What NodeW avoids: the server keeps an ExistsW's watch on the
	// creation of the gone node, though its ctx ended.
	wctx, cancel := context.WithCancel(ctx)
	ok, _, ch, err := st.ExistsW(wctx, gone.Path)
	if err != nil || ok {
		t.Fatalf("ExistsW(gone) = %v, %v; want false", ok, err)
	}
	cancel()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal("ExistsW's watch never reported its ctx's end")
	}
	if w := watched(); !slices.Contains(w, gone.Path) {
		t.Fatalf("after ExistsW(gone) the server watches %v; want %s (else this test cannot tell)", w, gone.Path)
	}

	n := must[store.Node](t)(other.Create(ctx, dir+"/c-", nil, store.EphemeralSequential))
	_, ch, err = nw.NodeW(ctx, n.Path)
	if err != nil {
		t.Fatal(err)
	}
	if w := watched(); !slices.Contains(w, n.Path) {
		t.Errorf("NodeW(%s): the server watches %v; want the node", n.Path, w)
	}
	if err := other.Delete(ctx, n.Path); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != store.EventDeleted {
			t.Fatalf("NodeW event %+v; want deleted", ev)
		}
	case <-ctx.Done():
		t.Fatal("NodeW never reported the deletion")
	}
	if w := watched(); slices.Contains(w, n.Path) {
		t.Errorf("after the deletion the server watches %v; want no watch on %s", w, n.Path)
	}
}

// TestAbandonedWaitsShareOneWatch gives up a hundred waits of each kind on
// nodes that do not change: the client and the server hold one watch per
// path and kind, not one per wait, and a wait that joins a watch set
// before it still gets the change.
func TestAbandonedWaitsShareOneWatch(t *testing.T) {
	srv, b := server(t)
	st, other := b.Open(t), b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	zst := st.(*zkstore.Store)
	n := must[store.Node](t)(other.Create(ctx, dir+"/n", nil, store.Persistent))
	missing := dir + "/missing"
	base := zkstore.ClientWatches(zst)
	cw := st.(store.ChildrenWatcher)
	for i := range 100 {
		wctx, cancel := context.WithCancel(ctx)
		var chs []<-chan store.Event
		_, ch, err := st.(store.NodeWatcher).NodeW(wctx, n.Path)
		chs = append(chs, ch)
		_, _, ch2, err2 := st.ExistsW(wctx, missing)
		chs = append(chs, ch2)
		_, ch3, err3 := cw.ChildrenW(wctx, dir)
		chs = append(chs, ch3)
		if err := errors.Join(err, err2, err3); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		cancel()
		for _, ch := range chs {
			select {
			case ev := <-ch:
				if !errors.Is(ev.Err, context.Canceled) {
					t.Fatalf("round %d: event %+v; want the ctx's end", i, ev)
				}
			case <-ctx.Done():
				t.Fatalf("round %d: a watch never reported its ctx's end", i)
			}
		}
	}
	if got := zkstore.ClientWatches(zst) - base; got != 3 {
		t.Errorf("after 300 waits given up: %d client watches; want 3 (one per path and kind)", got)
	}
	paths, err := zkserver.SessionWatches(srv.Addr(), st.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	// wchc lists data and exists watches only; ClientWatches counted the
	// children watch.
	for _, p := range []string{n.Path, missing} {
		if c := count(paths, p); c != 1 {
			t.Errorf("the server watches %s %d times; want once (%v)", p, c, paths)
		}
	}

	// Two waits join the watch; both see the deletion.
	_, a, err := st.(store.NodeWatcher).NodeW(ctx, n.Path)
	if err != nil {
		t.Fatal(err)
	}
	_, c, err := store.WatchNode(ctx, st, n.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(ctx, n.Path); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan store.Event{a, c} {
		select {
		case ev := <-ch:
			if ev.Type != store.EventDeleted {
				t.Errorf("joined watch: event %+v; want deleted", ev)
			}
		case <-ctx.Done():
			t.Fatal("a joined watch never reported the deletion")
		}
	}
}

func count(paths []string, p string) int {
	n := 0
	for _, q := range paths {
		if q == p {
			n++
		}
	}
	return n
}

// TestJoinedWatchNoGap races a change against a wait that joins a watch
// set (and given up) before: when the wait's check saw the node before the
// change, the change is reported; when it saw it after, nothing is (the
// watch fired before the check, and its event is not the wait's).
func TestJoinedWatchNoGap(t *testing.T) {
	_, b := server(t)
	st, other := b.Open(t), b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	p := must[store.Node](t)(other.Create(ctx, dir+"/n", nil, store.Persistent)).Path
	abandon := func() {
		wctx, cancel := context.WithCancel(ctx)
		_, _, err := store.WatchNode(wctx, st, p)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	var missed, stale, before int
	for i := range 60 {
		abandon()
		set := make(chan error, 1)
		go func() {
			_, err := other.Set(ctx, p, []byte(strconv.Itoa(i)), store.AnyVersion)
			set <- err
		}()
		wctx, cancel := context.WithCancel(ctx)
		stat, ch, err := store.WatchNode(wctx, st, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-set; err != nil {
			t.Fatal(err)
		}
		if stat.Version == int64(i) {
			before++
			select {
			case ev := <-ch:
				if ev.Type != store.EventDataChanged {
					t.Errorf("round %d: event %+v; want data-changed", i, ev)
				}
			case <-time.After(5 * time.Second):
				missed++
			}
		} else {
			// Read after the change: the only change came before.
			if _, err := other.Get(ctx, p); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-ch:
				stale++
				t.Logf("round %d: event %+v for a change before the check", i, ev)
			default:
			}
		}
		cancel()
	}
	t.Logf("%d of 60 checks came before the change", before)
	if missed > 0 || stale > 0 {
		t.Errorf("%d changes after the check missed, %d events of changes before it", missed, stale)
	}
}
