package partition_test

import (
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/partition"
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
		ma := join(t, sts[0], path, 4, "a")
		mb := join(t, sts[1], path, 4, "b")
		recvSet(t, ma, func(set []*partition.Shard) bool { return len(set) == 2 })
		recvSet(t, mb, func(set []*partition.Shard) bool { return len(set) == 2 })
		for _, m := range []*partition.Member{ma, mb} {
			if err := m.Leave(ctx); err != nil {
				t.Fatalf("Leave = %v", err)
			}
		}
		backends.WaitChildren(t, sts[0], root, backends.Count(0))
	})
}
