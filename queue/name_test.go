package queue

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/corral-go/corral/store"
)

func TestPriorityEncodingSorts(t *testing.T) {
	prios := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 40, -1000, -2, -1, 0, 1, 2, 1000, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	const id = "0123456789abcdef"
	for i := 1; i < len(prios); i++ {
		lo, hi := itemName(prios[i-1], id), itemName(prios[i], id)
		// A higher priority sorts first by name too (not relied on, but
		// it keeps listings readable).
		if !(hi < lo) {
			t.Errorf("itemName(%d) = %q, itemName(%d) = %q; want the second first", prios[i-1], lo, prios[i], hi)
		}
	}
	for _, p := range prios {
		for _, order := range []int64{math.MinInt64, -1, 0, 7, math.MaxInt64} {
			for _, count := range []int{0, 1, 12345} {
				for _, suffix := range []string{store.FormatSeq(42), "d123456789012345", "ffffffffffffffff"} {
					name := returnName(p, order, id, count) + suffix
					e, ok := parseItem(name, 42)
					if !ok || e.prio != p || e.order != order || e.id != id || e.count != count {
						t.Errorf("parseItem(%q) = %+v, %v; want prio %d, order %d, id %s, count %d", name, e, ok, p, order, id, count)
					}
				}
			}
		}
		for _, suffix := range []string{"3f2a", "d123456789012345", store.FormatSeq(99)} {
			name := itemName(p, id) + suffix
			if e, ok := parseItem(name, 99); !ok || e.prio != p || e.order != 99 || e.id != id || e.count != 0 {
				t.Errorf("parseItem(%q) = %+v, %v; want prio %d, order 99, id %s", name, e, ok, p, id)
			}
		}
	}
}

// Names written before items had ids are items, named by their whole name.
func TestParseLegacyNames(t *testing.T) {
	for _, tt := range []struct {
		name  string
		prio  int64
		order int64
	}{
		{"qi-7fffffffffffffff-0000000005", 0, 5},
		{"qi-7fffffffffffffff-3f2a9c0011223344", 0, 5},
		{"qi-7ffffffffffffffe-r8000000000000002-0000000009", 1, 2},
	} {
		e, ok := parseItem(tt.name, 5)
		if !ok || e.prio != tt.prio || e.order != tt.order || e.id != tt.name {
			t.Errorf("parseItem(%q) = %+v, %v; want prio %d, order %d, id the name", tt.name, e, ok, tt.prio, tt.order)
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

func TestIndexOrder(t *testing.T) {
	id := func(i int) string { return "000000000000000" + string(rune('a'+i)) }
	kids := []store.Child{
		{Name: "lock-0000000001", Seq: 1},
		{Name: itemName(0, id(2)) + "0000000002", Seq: 2},
		{Name: itemName(-5, id(3)) + "0000000003", Seq: 3},
		{Name: itemName(9, id(4)) + "0000000004", Seq: 4},
		{Name: itemName(0, id(5)) + "0000000005", Seq: 5},
		{Name: returnName(0, 1, id(6), 1) + "0000000006", Seq: 6}, // put back at order 1
		{Name: itemName(9, id(7)) + "0000000007", Seq: 7},
	}
	x := build(kids, []store.Child{{Name: id(5)}}) // claimed
	var got []string
	for {
		h := x.head(1)
		if len(h) == 0 {
			break
		}
		got = append(got, h[0].name)
		x.remove(h[0].name)
	}
	want := []string{kids[3].Name, kids[6].Name, kids[5].Name, kids[1].Name, kids[2].Name}
	if !slices.Equal(got, want) {
		t.Errorf("index order = %q; want %q", got, want)
	}
	// Released, the claimed item comes back in its place.
	x = build(kids, []store.Child{{Name: id(5)}})
	if h := x.head(16); len(h) != 2 || h[0].name != kids[3].Name || h[1].name != kids[6].Name {
		t.Errorf("head(16) = %v; want the two items of priority 9", h)
	}
	x.remove(kids[3].Name)
	x.remove(kids[6].Name)
	x.remove(kids[5].Name)
	x.remove(kids[1].Name)
	x.unclaim(id(5))
	if h := x.head(16); len(h) != 1 || h[0].name != kids[4].Name {
		t.Errorf("head(16) after unclaim = %v; want %q", h, kids[4].Name)
	}
	x.add(itemName(100, id(8))+"0000000008", 8)
	if h := x.head(1); len(h) != 1 || h[0].prio != 100 {
		t.Errorf("head(1) after adding priority 100 = %v; want it", h)
	}
	if x.size() != 3 {
		t.Errorf("size() = %d; want 3", x.size())
	}
}

func TestHex16AndBatchIDs(t *testing.T) {
	for _, k := range []uint64{0, 1, 0xabc, 1 << 63, ^uint64(0)} {
		if got, want := hex16(k), fmt.Sprintf("%016x", k); got != want {
			t.Errorf("hex16(%#x) = %q; want %q", k, got, want)
		}
	}
	if got := newIDs(0); got != nil {
		t.Errorf("newIDs(0) = %q; want nil", got)
	}
	ids := newIDs(100)
	for i := 1; i < len(ids); i++ {
		// Items of a batch can share a Seq: their names, by id, keep
		// them in batch order.
		if itemName(0, ids[i-1]) >= itemName(0, ids[i]) {
			t.Fatalf("newIDs: name of id %d %q not before that of id %d %q", i-1, ids[i-1], i, ids[i])
		}
	}
}
