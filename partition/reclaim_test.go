package partition_test

import (
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TestDirectoryReclaimed: once every member left and released its shards,
// nothing of the partition is left (members, shards, shard counts), on
// every store.
func TestDirectoryReclaimed(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		ctx, root := ctxFor(t), dir(t)
		if _, err := sts[0].Create(ctx, root, nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		path := root + "/orders"
		tick := make(chan struct{}, 1)
		ws := []*worker{work(join(t, sts[0], path, 4, "a"), newFence(), tick), work(join(t, sts[1], path, 4, "b"), newFence(), tick)}
		waitBalanced(t, tick, ws, 4)
		for _, w := range ws {
			if err := w.m.Leave(ctx); err != nil {
				t.Fatalf("Leave = %v", err)
			}
			<-w.done
		}
		backends.WaitChildren(t, sts[0], root, backends.Count(0))
	})
}
