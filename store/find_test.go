package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// plain hides every optional capability of the store it wraps.
type plain struct{ store.Store }

// through is a store.Wrapper that implements no capability itself.
type through struct{ store.Store }

func (w through) Unwrap() store.Store { return w.Store }

// own is a store.Wrapper that implements NodeWatcher itself.
type own struct{ through }

func (own) NodeW(context.Context, string) (store.Stat, <-chan store.Event, error) {
	return store.Stat{}, nil, errors.ErrUnsupported
}

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

	// Through a Wrapper: what the wrapped store has, no more and no less;
	// the wrapper's own where it implements it.
	ownMs := own{through{ms}}
	for _, tt := range []struct {
		name string
		st   store.Store
		want store.NodeWatcher // nil: not found
	}{
		{"through(memstore)", through{ms}, ms},
		{"through(plain)", through{plain{ms}}, nil},
		{"own(memstore)", ownMs, ownMs},
		{"own(plain)", own{through{plain{ms}}}, nil},
		{"through(own(memstore))", through{ownMs}, ownMs},
		{"own(own(plain))", own{through{own{through{plain{ms}}}}}, nil},
		{"through(nil)", through{}, nil},
	} {
		got, ok := store.Find[store.NodeWatcher](tt.st)
		if ok != (tt.want != nil) || got != tt.want {
			t.Errorf("Find[NodeWatcher](%s) = %T, %v; want %T, %v", tt.name, got, ok, tt.want, tt.want != nil)
		}
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
