package queue

import (
	"math"
	"slices"
	"testing"

	"github.com/corral-go/corral/store"
)

func TestPriorityEncodingSorts(t *testing.T) {
	prios := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 40, -1000, -2, -1, 0, 1, 2, 1000, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	for i := 1; i < len(prios); i++ {
		lo, hi := itemName(prios[i-1], 0, false), itemName(prios[i], 0, false)
		// A higher priority sorts first by name too (not relied on, but
		// it keeps listings readable).
		if !(hi < lo) {
			t.Errorf("itemName(%d) = %q, itemName(%d) = %q; want the second first", prios[i-1], lo, prios[i], hi)
		}
	}
	for _, p := range prios {
		for _, order := range []int64{math.MinInt64, -1, 0, 7, math.MaxInt64} {
			name := itemName(p, order, true) + store.FormatSeq(42)
			e, ok := parseItem(name, 42)
			if !ok || e.prio != p || e.order != order {
				t.Errorf("parseItem(%q) = %+v, %v; want prio %d, order %d", name, e, ok, p, order)
			}
		}
		name := itemName(p, 0, false) + "3f2a"
		if e, ok := parseItem(name, 99); !ok || e.prio != p || e.order != 99 {
			t.Errorf("parseItem(%q) = %+v, %v; want prio %d, order 99", name, e, ok, p)
		}
	}
}

func TestParseItemRejectsForeignNames(t *testing.T) {
	for _, name := range []string{"", "items", "lock-0000000001", "qi-", "qi-zzzzzzzzzzzzzzzz-0000000001", "qi-0123", "694d9b6a1f2c3e01"} {
		if e, ok := parseItem(name, 1); ok {
			t.Errorf("parseItem(%q) = %+v, true; want false", name, e)
		}
	}
}

func TestSortedItems(t *testing.T) {
	kids := []store.Child{
		{Name: "lock-0000000001", Seq: 1},
		{Name: itemName(0, 0, false) + "0000000002", Seq: 2},
		{Name: itemName(-5, 0, false) + "0000000003", Seq: 3},
		{Name: itemName(9, 0, false) + "0000000004", Seq: 4},
		{Name: itemName(0, 0, false) + "0000000005", Seq: 5},
		{Name: itemName(0, 1, true) + "0000000006", Seq: 6}, // put back at order 1
		{Name: itemName(9, 0, false) + "0000000007", Seq: 7},
	}
	var got []string
	for _, e := range sortedItems(kids, map[string]bool{kids[4].Name: true}) {
		got = append(got, e.name)
	}
	want := []string{kids[3].Name, kids[6].Name, kids[5].Name, kids[1].Name, kids[2].Name}
	if !slices.Equal(got, want) {
		t.Errorf("sortedItems = %q; want %q", got, want)
	}
}
