package store_test

import (
	"errors"
	"testing"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// plain hides every optional capability of the store it wraps.
type plain struct{ store.Store }

func TestFind(t *testing.T) {
	ms := memstore.New()
	defer ms.Close()
	if _, ok := store.Find[store.NodeWatcher](ms); !ok {
		t.Errorf("Find[NodeWatcher](memstore) = false; want true")
	}
	if _, ok := store.Find[store.NodeWatcher](plain{ms}); ok {
		t.Errorf("Find[NodeWatcher](plain) = true; want false")
	}
	if _, ok := store.Find[store.NodeWatcher](nil); ok {
		t.Errorf("Find[NodeWatcher](nil) = true; want false")
	}
}

func TestImplicitDirs(t *testing.T) {
	ms := memstore.New()
	if _, err := ms.Create(t.Context(), "/a/b/c", nil, store.Persistent); err != nil {
		t.Fatal(err)
	}
	// memstore has no implicit directories: its parents are nodes.
	if dirs, err := store.ImplicitDirs(t.Context(), plain{ms}, "/a"); err != nil || dirs != nil {
		t.Errorf("ImplicitDirs(plain) = %v, %v; want none", dirs, err)
	}
	if _, err := store.ImplicitDirs(t.Context(), nil, "/a"); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("ImplicitDirs(nil store) = %v; want ErrInvalidArgument", err)
	}
	_ = ms.Close()
	if _, err := store.ImplicitDirs(t.Context(), plain{ms}, "/a"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("ImplicitDirs(closed) = %v; want ErrClosed", err)
	}
}
