package queue

import (
	"cmp"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
)

// newID returns a fresh item id. Items are named by internal/names
// (ItemName, ReturnName, ParseItem).
func newID() string { return names.ID(rand.Uint64()) }

// newIDs returns n fresh item ids in increasing order: consecutive numbers
// from a random start. Items of a batch may share a Seq (etcd gives every
// key of a transaction the same revision); their names, which differ
// first in the id, then keep them in batch order.
func newIDs(n int) []string {
	if n == 0 {
		return nil
	}
	start := rand.Uint64N(math.MaxUint64 - uint64(n) + 1)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = names.ID(start + uint64(i))
	}
	return ids
}

// compareEntries orders items for delivery: higher priority first, then by
// order (FIFO), then by name so the order is total.
func compareEntries(a, b names.Entry) int {
	if c := cmp.Compare(b.Prio, a.Prio); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Order, b.Order); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// hasID reports whether the listing kids holds an item with the given id,
// under a name made from prefix.
func hasID(kids []store.Child, prefix, id string) bool {
	for _, k := range kids {
		if strings.HasPrefix(k.Name, prefix) {
			if e, ok := names.ParseItem(k.Name, k.Seq); ok && e.ID == id {
				return true
			}
		}
	}
	return false
}
