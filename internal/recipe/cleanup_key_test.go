package recipe_test

import (
	"errors"
	"testing"

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
