package queue

import (
	"container/heap"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
)

// index is what a consumer knows of a queue: its items, in delivery order,
// and which of them are claimed. Finding the head costs O(log n), so a take
// never sorts or walks the backlog. It is not safe for concurrent use.
//
// The heap is cleaned lazily: an item deleted or claimed since it was
// pushed stays in it until it reaches the top, where it is dropped (gone)
// or parked until its claim goes (claimed).
type index struct {
	items  map[string]names.Entry   // live items by node name
	heap   entryHeap                // items that may be available
	inHeap map[string]bool          // names in heap
	claims map[string]bool          // claimed item ids
	parked map[string][]names.Entry // items taken off the heap while claimed, by id
}

func newIndex() *index {
	return &index{
		items:  map[string]names.Entry{},
		inHeap: map[string]bool{},
		claims: map[string]bool{},
		parked: map[string][]names.Entry{},
	}
}

// build makes an index from listings of the items and claims directories.
func build(items, claims []store.Child) *index {
	x := newIndex()
	for _, c := range claims {
		x.claims[c.Name] = true
	}
	for _, k := range items {
		if e, ok := names.ParseItem(k.Name, k.Seq); ok {
			x.items[e.Name] = e
			if x.claims[e.ID] {
				x.parked[e.ID] = append(x.parked[e.ID], e)
			} else {
				x.heap = append(x.heap, e)
				x.inHeap[e.Name] = true
			}
		}
	}
	heap.Init(&x.heap)
	return x
}

// add records a new item node.
func (x *index) add(name string, seq int64) {
	e, ok := names.ParseItem(name, seq)
	if !ok {
		return
	}
	x.items[name] = e
	x.push(e)
}

func (x *index) push(e names.Entry) {
	if x.claims[e.ID] {
		x.parked[e.ID] = append(x.parked[e.ID], e)
		return
	}
	if !x.inHeap[e.Name] {
		heap.Push(&x.heap, e)
		x.inHeap[e.Name] = true
	}
}

// remove records that the item node name is gone.
func (x *index) remove(name string) { delete(x.items, name) }

// claim records that the item id is claimed.
func (x *index) claim(id string) { x.claims[id] = true }

// unclaim records that the claim of id is gone: its item is available
// again, in its old place.
func (x *index) unclaim(id string) {
	delete(x.claims, id)
	ps := x.parked[id]
	delete(x.parked, id)
	for _, e := range ps {
		if _, live := x.items[e.Name]; live {
			x.push(e)
		}
	}
}

// head returns up to n available items from the head of the queue, in
// order, all of the head's priority.
func (x *index) head(n int) []names.Entry {
	var out []names.Entry
	for len(x.heap) > 0 && len(out) < n {
		e := x.heap[0]
		if _, live := x.items[e.Name]; !live {
			x.pop()
			continue
		}
		if x.claims[e.ID] {
			x.pop()
			x.parked[e.ID] = append(x.parked[e.ID], e)
			continue
		}
		if len(out) > 0 && e.Prio != out[0].Prio {
			break
		}
		x.pop()
		out = append(out, e)
	}
	for _, e := range out {
		heap.Push(&x.heap, e)
		x.inHeap[e.Name] = true
	}
	return out
}

func (x *index) pop() {
	e := heap.Pop(&x.heap).(names.Entry)
	delete(x.inHeap, e.Name)
}

// available reports whether some item can be taken.
func (x *index) available() bool { return len(x.head(1)) > 0 }

// size returns the number of items, claimed or not.
func (x *index) size() int { return len(x.items) }

// entryHeap is a min-heap of entries in delivery order.
type entryHeap []names.Entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return compareEntries(h[i], h[j]) < 0 }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(names.Entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
