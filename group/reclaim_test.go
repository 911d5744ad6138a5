package group_test

import (
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TestDirectoryReclaimed: once every member left, nothing of the group is
// left, on every store; a member joining afterwards makes it again.
func TestDirectoryReclaimed(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		ctx, root := ctxFor(t), dir(t)
		if _, err := sts[0].Create(ctx, root, nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		path := root + "/workers"
		for range 2 {
			a, c := join(t, sts[0], path, "a"), join(t, sts[1], path, "c")
			if err := a.Leave(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := sts[0].Get(ctx, path); err != nil {
				t.Errorf("Get(%q) while a member is left = %v; want the group", path, err)
			}
			if err := c.Leave(ctx); err != nil {
				t.Fatal(err)
			}
			backends.WaitChildren(t, sts[0], root, backends.Count(0))
		}
	})
}
