package partition_test

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TestMismatch: a member that joins with another number of shards than the
// members there is refused with ErrMismatch, leaves no node behind and
// disturbs nobody; once they have all left, the next member's number
// counts.
func TestMismatch(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		path := dir(t)
		ctx := ctxFor(t)
		f := newFence()
		defer f.check(t)
		tick := make(chan struct{}, 1)
		a := join(t, sts[0], path, 4, "a")
		wa := work(a, f, tick)
		waitBalanced(t, tick, []*worker{wa}, 4)
		held := wa.shards()

		m, err := partition.Join(ctx, sts[1], path, 8, "b")
		if !errors.Is(err, partition.ErrMismatch) || m != nil {
			t.Fatalf("Join with 8 shards beside a member with 4 = %v, %v; want nil, ErrMismatch", m, err)
		}
		t.Logf("refused: %v", err)
		if kids, err := sts[0].Children(ctx, partition.MembersDir(path)); err != nil || len(kids) != 1 {
			t.Errorf("members after the refused join = %v, %v; want a's node alone", kids, err)
		}
		if got := wa.shards(); !maps.Equal(got, held) {
			t.Errorf("a works on %v after the refused join; want %v, undisturbed", got, held)
		}
		wc := work(join(t, sts[2], path, 4, "c"), f, tick)
		waitBalanced(t, tick, []*worker{wa, wc}, 4)
		for _, w := range []*worker{wa, wc} {
			if err := w.m.Leave(ctx); err != nil {
				t.Fatalf("Leave = %v", err)
			}
			<-w.done
		}
		// Nobody is left: a new number of shards is welcome.
		wb := work(join(t, sts[1], path, 8, "b"), f, tick)
		waitBalanced(t, tick, []*worker{wb}, 8)
	})
}

// TestMismatchRace: of two members that join at once with different
// numbers of shards, never both are admitted.
func TestMismatchRace(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		ctx := ctxFor(t)
		for i := range 5 {
			path := fmt.Sprintf("%s/%d", dir(t), i)
			ms := make([]*partition.Member, 2)
			errs := make([]<-chan error, 2)
			for j, k := range []int{4, 8} {
				errs[j] = backends.Async(func() (err error) {
					ms[j], err = partition.Join(ctx, sts[j], path, k, fmt.Sprint("m", j))
					return err
				})
			}
			var admitted int
			for j := range errs {
				err := recv(t, "Join", errs[j])
				switch {
				case err == nil:
					admitted++
				case !errors.Is(err, partition.ErrMismatch):
					t.Errorf("Join = %v; want nil or ErrMismatch", err)
				}
			}
			if admitted == 2 {
				t.Errorf("round %d: members with 4 and 8 shards both admitted", i)
			}
			for _, m := range ms {
				if m != nil {
					if err := m.Leave(ctx); err != nil {
						t.Errorf("Leave = %v", err)
					}
				}
			}
			if kids, err := sts[0].Children(ctx, partition.MembersDir(path)); err != nil && !errors.Is(err, store.ErrNoNode) || len(kids) != 0 {
				t.Errorf("round %d: member nodes left: %v, %v", i, kids, err)
			}
		}
	})
}
