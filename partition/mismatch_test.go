package partition_test

import (
	"context"
	"errors"
	"fmt"
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
		a := join(t, sts[0], path, 4, "a")
		set := recvSet(t, a, func(set []*partition.Shard) bool { return len(set) == 4 })
		releaseOnDone(set)

		m, err := partition.Join(ctx, sts[1], path, 8, "b")
		if !errors.Is(err, partition.ErrMismatch) || m != nil {
			t.Fatalf("Join with 8 shards beside a member with 4 = %v, %v; want nil, ErrMismatch", m, err)
		}
		t.Logf("refused: %v", err)
		for _, d := range []string{partition.MembersDir(path), partition.ShardCountDir(path)} {
			if kids, err := sts[0].Children(ctx, d); err != nil || len(kids) != 1 {
				t.Errorf("Children(%s) after the refused join = %v, %v; want a's node alone", d, kids, err)
			}
		}
		for _, s := range set {
			if err := s.Context().Err(); err != nil {
				t.Errorf("a's %v ended (%v) by the refused join", s, context.Cause(s.Context()))
			}
		}
		c := join(t, sts[2], path, 4, "c")
		releaseOnDone(recvSet(t, c, func(set []*partition.Shard) bool { return len(set) == 2 }))
		for _, m := range []*partition.Member{a, c} {
			go drain(m)
			if err := m.Leave(ctx); err != nil {
				t.Fatalf("Leave = %v", err)
			}
		}
		// Nobody is left: a new number of shards is welcome.
		m = join(t, sts[1], path, 8, "b")
		releaseOnDone(recvSet(t, m, func(set []*partition.Shard) bool { return len(set) == 8 }))
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
					go drain(m)
					if err := m.Leave(ctx); err != nil {
						t.Errorf("Leave = %v", err)
					}
				}
			}
			if kids, err := sts[0].Children(ctx, partition.ShardCountDir(path)); err != nil && !errors.Is(err, store.ErrNoNode) || len(kids) != 0 {
				t.Errorf("round %d: shard-count nodes left: %v, %v", i, kids, err)
			}
		}
	})
}

// drain releases every shard m is given, once it ends, until m stops.
func drain(m *partition.Member) {
	for set := range m.Shards() {
		releaseOnDone(set)
	}
}

// releaseOnDone releases each shard of set once it ends, as its work
// would.
func releaseOnDone(set []*partition.Shard) {
	for _, s := range set {
		go func() {
			<-s.Done()
			_ = s.Release(context.Background())
		}()
	}
}
