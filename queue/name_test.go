package queue

import (
	"math"
	"slices"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
)

func TestIndexOrder(t *testing.T) {
	id := func(i int) string { return "000000000000000" + string(rune('a'+i)) }
	kids := []store.Child{
		{Name: "lock-0000000001", Seq: 1},
		{Name: names.ItemName(0, id(2)) + "0000000002", Seq: 2},
		{Name: names.ItemName(-5, id(3)) + "0000000003", Seq: 3},
		{Name: names.ItemName(9, id(4)) + "0000000004", Seq: 4},
		{Name: names.ItemName(0, id(5)) + "0000000005", Seq: 5},
		{Name: names.ReturnName(0, 1, id(6), 1) + "0000000006", Seq: 6}, // put back at order 1
		{Name: names.ItemName(9, id(7)) + "0000000007", Seq: 7},
	}
	x := build(kids, []store.Child{{Name: id(5)}}) // claimed
	var got []string
	for {
		h := x.head(1)
		if len(h) == 0 {
			break
		}
		got = append(got, h[0].Name)
		x.remove(h[0].Name)
	}
	want := []string{kids[3].Name, kids[6].Name, kids[5].Name, kids[1].Name, kids[2].Name}
	if !slices.Equal(got, want) {
		t.Errorf("index order = %q; want %q", got, want)
	}
	// Released, the claimed item comes back in its place.
	x = build(kids, []store.Child{{Name: id(5)}})
	if h := x.head(16); len(h) != 2 || h[0].Name != kids[3].Name || h[1].Name != kids[6].Name {
		t.Errorf("head(16) = %v; want the two items of priority 9", h)
	}
	x.remove(kids[3].Name)
	x.remove(kids[6].Name)
	x.remove(kids[5].Name)
	x.remove(kids[1].Name)
	x.unclaim(id(5))
	if h := x.head(16); len(h) != 1 || h[0].Name != kids[4].Name {
		t.Errorf("head(16) after unclaim = %v; want %q", h, kids[4].Name)
	}
	x.add(names.ItemName(100, id(8))+"0000000008", 8)
	if h := x.head(1); len(h) != 1 || h[0].Prio != 100 {
		t.Errorf("head(1) after adding priority 100 = %v; want it", h)
	}
	if x.size() != 3 {
		t.Errorf("size() = %d; want 3", x.size())
	}
}

func TestBatchIDs(t *testing.T) {
	if got := newIDs(0); got != nil {
		t.Errorf("newIDs(0) = %q; want nil", got)
	}
	ids := newIDs(100)
	for i := 1; i < len(ids); i++ {
		// Items of a batch can share a Seq: their names, by id, keep
		// them in batch order.
		if names.ItemName(0, ids[i-1]) >= names.ItemName(0, ids[i]) {
			t.Fatalf("newIDs: name of id %d %q not before that of id %d %q", i-1, ids[i-1], i, ids[i])
		}
	}
}

func TestIDSource(t *testing.T) {
	s := newIDSource(10)
	if got := s.take(1); got != 10 {
		t.Errorf("take(1) from 10 = %d; want 10", got)
	}
	if got := s.take(5); got != 11 {
		t.Errorf("take(5) after it = %d; want 11", got)
	}
	if got := s.take(1); got != 16 {
		t.Errorf("take(1) after a block of 5 = %d; want 16", got)
	}
	// A block that would wrap past the largest id starts again from 0,
	// so that a batch's ids still count up; one that fits does not.
	s = newIDSource(math.MaxUint64 - 2)
	if got := s.take(3); got != math.MaxUint64-2 {
		t.Errorf("take(3) at MaxUint64-2 = %d; want MaxUint64-2", got)
	}
	s = newIDSource(math.MaxUint64 - 2)
	if got := s.take(4); got != 0 {
		t.Errorf("take(4) at MaxUint64-2 = %d; want 0 (it would wrap)", got)
	}
	if got := s.take(1); got != 4 {
		t.Errorf("take(1) after the wrapped block = %d; want 4", got)
	}
	// Concurrent takes get blocks that never meet.
	s = newIDSource(math.MaxUint64 - 1000)
	const workers, per = 8, 200
	got := make([][]uint64, workers)
	var wg gosync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range per {
				got[w] = append(got[w], s.take(3))
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, starts := range got {
		for _, st := range starts {
			for i := range uint64(3) {
				if seen[st+i] {
					t.Fatalf("id %d handed out twice", st+i)
				}
				seen[st+i] = true
			}
		}
	}
}

// TestConfigFixed: a config node fixes what it names, "unset" marks what
// it does not fix yet, and a node of an earlier version (no "unset" line)
// fixes every setting.
func TestConfigFixed(t *testing.T) {
	for _, c := range []config{
		{fixed: 0},
		{delivery: AtLeastOnce, fixed: fieldDelivery},
		{delivery: AtLeastOnce, visibility: time.Minute, fixed: fieldDelivery | fieldVisibility},
		{deadLetter: "/dlq", maxDeliveries: 3, fixed: fieldDeadLetter},
		{delivery: AtLeastOnce, visibility: time.Second, deadLetter: "/dlq", maxDeliveries: 2, fixed: allFields},
		{fixed: allFields},
	} {
		got, err := parseConfig(c.encode())
		if err != nil || got != c {
			t.Errorf("parseConfig(%q) = %+v, %v; want %+v", c.encode(), got, err, c)
		}
	}
	old := []byte(configHeader + "\ndelivery: at-least-once\n")
	if got, err := parseConfig(old); err != nil || got.fixed != allFields || got.delivery != AtLeastOnce {
		t.Errorf("parseConfig(%q) = %+v, %v; want at-least-once, every setting fixed", old, got, err)
	}
}
