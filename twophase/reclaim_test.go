package twophase_test

import (
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/twophase"
)

// TestDirectoryReclaimed: a decided transaction stays until every party
// forgot it, and then nothing of it is left, not even the directories above
// its header that Create made.
func TestDirectoryReclaimed(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		ctx, root := testCtx(t), txPath(t)
		if _, err := sts[0].Create(ctx, root, nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		path := root + "/orders/tx-1"
		c, err := twophase.Begin(ctx, sts[0], path, []string{"p"}, time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		p, err := twophase.Join(ctx, sts[1], path, "p")
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Vote(ctx, true); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("Wait = %v; want a commit", err)
		}
		if err := c.Forget(ctx); err != nil {
			t.Fatal(err)
		}
		// Decided but not collected by p: it stays.
		if _, err := sts[0].Get(ctx, path); err != nil {
			t.Fatalf("Get(%q) before the last Forget = %v; want the decision kept", path, err)
		}
		if err := p.Forget(ctx); err != nil {
			t.Fatal(err)
		}
		backends.WaitGone(t, sts[0], root+"/orders")
	})
}
