package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// TestFollowTreeMisuse: FollowTree refuses what no store can follow,
// before any I/O, with a sentinel.
func TestFollowTreeMisuse(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	ctx := t.Context()
	for _, c := range []struct {
		name         string
		st           store.Store
		path         string
		depth, limit int
		want         error
	}{
		{"nil store", nil, "/a", 1, 1, store.ErrInvalidArgument},
		{"bad path", st, "a", 1, 1, store.ErrInvalidPath},
		{"negative depth", st, "/a", -1, 1, store.ErrInvalidArgument},
		{"depth past MaxPathDepth", st, "/a", store.MaxPathDepth + 1, 1, store.ErrInvalidArgument},
		{"no limit", st, "/a", 1, 0, store.ErrInvalidArgument},
	} {
		for _, hide := range []bool{false, true} {
			s := c.st
			if hide && s != nil {
				s = hidden{s}
			}
			f, nodes, err := store.FollowTree(ctx, s, c.path, c.depth, c.limit)
			if !errors.Is(err, c.want) || f != nil || nodes != nil {
				t.Errorf("FollowTree(%s, portable %v) = %v, %v, %v; want %v", c.name, hide, f, nodes, err, c.want)
			}
		}
		if err := store.ValidateTree(c.path, c.depth, c.limit); c.st != nil && !errors.Is(err, c.want) {
			t.Errorf("ValidateTree(%s) = %v; want %v", c.name, err, c.want)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := store.FollowTree(cancelled, hidden{st}, "/a", 1, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("portable FollowTree(cancelled ctx) = %v; want %v", err, context.Canceled)
	}
	closed := memstore.New()
	closed.Close()
	if _, _, err := store.FollowTree(ctx, hidden{closed}, "/a", 1, 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("portable FollowTree(closed store) = %v; want %v", err, store.ErrClosed)
	}
}

func TestDepth(t *testing.T) {
	for _, c := range []struct {
		root, p string
		d       int
		ok      bool
	}{
		{"/", "/", 0, true},
		{"/", "/a", 1, true},
		{"/", "/a/b", 2, true},
		{"/a", "/a", 0, true},
		{"/a", "/a/b/c", 2, true},
		{"/a", "/ab", 0, false},
		{"/a", "/b/a", 0, false},
		{"/a/b", "/a", 0, false},
	} {
		if d, ok := store.Depth(c.root, c.p); d != c.d || ok != c.ok {
			t.Errorf("Depth(%q, %q) = %d, %v; want %d, %v", c.root, c.p, d, ok, c.d, c.ok)
		}
	}
}
