package zkstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
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
