package partition_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
)

// assign is partition.Assign of good input.
func assign(t *testing.T, ids []string, k int) []string {
	t.Helper()
	owners, err := partition.Assign(ids, k)
	if err != nil {
		t.Fatalf("Assign(%d ids, %d) = %v", len(ids), k, err)
	}
	return owners
}

func ids(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("member-%d", i)
	}
	return s
}

// loads counts the shards each id owns.
func loads(owners []string) map[string]int {
	l := map[string]int{}
	for _, o := range owners {
		l[o]++
	}
	return l
}

func moved(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestAssignBalanced: every shard has a live owner, and every member owns
// ⌊K/M⌋ or ⌈K/M⌉ shards, whatever the order of the ids.
func TestAssignBalanced(t *testing.T) {
	for _, k := range []int{1, 7, 16, 64, 1024} {
		for m := 1; m <= 40; m++ {
			if k == 1024 && m%7 != 0 && m != 1 && m != 32 {
				continue // the large case at a few sizes
			}
			ms := ids(m)
			owners := assign(t, ms, k)
			rev := slices.Clone(ms)
			slices.Reverse(rev)
			if got := assign(t, append(rev, ms[0]), k); !slices.Equal(got, owners) {
				t.Fatalf("K=%d M=%d: Assign depends on the order or repetition of ids", k, m)
			}
			lo, hi := k/m, (k+m-1)/m
			l := loads(owners)
			for _, id := range ms {
				if l[id] < lo || l[id] > hi {
					t.Errorf("K=%d M=%d: %s owns %d; want %d..%d", k, m, id, l[id], lo, hi)
				}
			}
			for i, o := range owners {
				if !slices.Contains(ms, o) {
					t.Fatalf("K=%d M=%d: shard %d owned by %q, not a member", k, m, i, o)
				}
			}
		}
	}
	if got := assign(t, nil, 4); !slices.Equal(got, []string{"", "", "", ""}) {
		t.Errorf("Assign(nil, 4) = %q; want no owners", got)
	}
}

// TestAssignStable: a member that joins or leaves moves close to the
// shards that must move (K/M, give or take the rounding), and one that
// comes back gets its shards back.
func TestAssignStable(t *testing.T) {
	for _, k := range []int{64, 1024} {
		for _, m := range []int{2, 3, 8, 32} {
			ms := ids(m + 1)
			before := assign(t, ms[:m], k)
			after := assign(t, ms, k) // ms[m] joins
			must := k / (m + 1)       // what the newcomer must get
			got := moved(before, after)
			// The bound on loads moves some shards between the old
			// members too; allow as many again as must move.
			if got > 2*must+2 {
				t.Errorf("K=%d M=%d->%d: %d shards moved; want about %d", k, m, m+1, got, must)
			}
			t.Logf("K=%d M=%d->%d: %d moved, %d must", k, m, m+1, got, must)
			if back := assign(t, ms[:m], k); !slices.Equal(back, before) {
				t.Errorf("K=%d M=%d: the assignment after a leave differs from the one before the join", k, m)
			}
		}
	}
}

// TestAssignMisuse: a number of shards no partition can have, or an empty
// id, is refused as Join refuses it, with no allocation of its size.
func TestAssignMisuse(t *testing.T) {
	cases := []struct {
		name string
		ids  []string
		k    int
	}{
		{"no shards", []string{"a"}, 0},
		{"negative", []string{"a"}, -1},
		{"too many", []string{"a"}, partition.MaxShards + 1},
		{"huge", ids(8), 1 << 62},
		{"empty id", []string{"a", ""}, 4},
		{"empty id alone", []string{""}, 4},
	}
	for _, c := range cases {
		owners, err := partition.Assign(c.ids, c.k)
		if !errors.Is(err, store.ErrInvalidArgument) || owners != nil {
			t.Errorf("%s: Assign(%q, %d) = %q, %v; want nil, ErrInvalidArgument", c.name, c.ids, c.k, owners, err)
		}
	}
}

// BenchmarkAssign measures Assign at the largest number of shards a
// partition may have and 64 members (and smaller sizes beside it): time
// and bytes per call (-benchmem), which every member spends on every
// change of the member list.
func BenchmarkAssign(b *testing.B) {
	for _, size := range [][2]int{{8, 1024}, {64, 1024}, {64, partition.MaxShards}, {256, partition.MaxShards}} {
		m, k := size[0], size[1]
		b.Run(fmt.Sprintf("M=%d/K=%d", m, k), func(b *testing.B) {
			ms := ids(m)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := partition.Assign(ms, k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
