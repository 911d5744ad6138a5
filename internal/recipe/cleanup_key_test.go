package recipe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// uncomparable is a Store an outside adapter might write: a value type
// that == cannot compare (it holds a slice).
type uncomparable struct {
	store.Store
	_ []int
}

// TestCleanerUncomparableStore hands a node of a non-comparable Store to
// its session's cleaner: the registry must neither panic nor lose the
// node (Flush finds and removes it).
func TestCleanerUncomparableStore(t *testing.T) {
	ms := memstore.New()
	defer ms.Close()
	st := uncomparable{Store: ms}
	n, err := st.Create(t.Context(), "/cleaner/n", nil, store.Persistent)
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	recipe.RemoveLater(st, n.Path, 0)
	if err := recipe.Flush(t.Context(), st, "/cleaner"); err != nil {
		t.Fatalf("Flush = %v; want nil", err)
	}
	select {
	case <-recipe.Pending(st, n):
	case <-t.Context().Done():
		t.Fatal("Pending never closed")
	}
	if _, err := ms.Get(t.Context(), n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Get(%q) after Flush = %v; want ErrNoNode", n.Path, err)
	}
}

// TestCleanerStoreNotComparable: the session's cleaner (Remove's hand-over,
// Flush, Pending) works for a Store whose value cannot be a map key, where
// keying the cleaners by the Store value would panic.
func TestCleanerStoreNotComparable(t *testing.T) {
	srv := memstore.NewServer()
	inner := srv.Open()
	defer inner.Close()
	st := uncomparable{Store: inner}
	ctx, d := t.Context(), dir(t)
	n, err := acquire(ctx, st, nil, d, names.Lock, recipe.Predecessor)
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	inner.Disconnect()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := recipe.Remove(cctx, st, nil, n); !errors.Is(err, recipe.ErrRemovalPending) {
		t.Fatalf("Remove(disconnected) = %v; want %v", err, recipe.ErrRemovalPending)
	}
	select {
	case <-recipe.Pending(st, n):
		t.Fatal("Pending closed while the removal waits for the connection")
	default:
	}
	inner.Reconnect()
	select {
	case <-recipe.Pending(st, n):
	case <-time.After(10 * time.Second):
		t.Fatal("cleaner still pending 10s after the reconnection")
	}
	if _, err := inner.Get(ctx, n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get(removed node) = %v; want ErrNoNode", err)
	}
	if err := recipe.Flush(ctx, st, d); err != nil {
		t.Errorf("Flush = %v", err)
	}
}
