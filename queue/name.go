package queue

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-go/corral/store"
)

// Item nodes are persistent sequential children of the items directory named
//
//	qi-<priority key>-                   (a fresh item)
//	qi-<priority key>-r<order key>-      (an item put back in its old place)
//
// followed by the store's sequence suffix (ZooKeeper and memstore: 10 digits;
// etcd: a hexadecimal suffix). Both keys are 16 hexadecimal digits. The
// priority key is an order-reversing bijection of the int64 priority, so
// that a smaller key is a higher priority over the whole range, negatives
// included. The order key of an item put back is the Seq of the original
// node, so the item keeps its place among the items of its priority.
//
// Items are ordered by (priority key, order, name), where order is the order
// key when there is one and the node's Seq otherwise. The raw name is never
// the order: the store's suffix differs from store to store.
const (
	itemMark = "qi-"
	keyLen   = 16
	signBit  = uint64(1) << 63
)

// prioKey maps priorities to keys that sort the other way round: higher
// priority, smaller key.
func prioKey(p int64) uint64 { return ^(uint64(p) ^ signBit) }

func keyPrio(k uint64) int64 { return int64(^k ^ signBit) }

// orderKey maps a Seq to a key that sorts as the Seq does, negative Seqs
// (ZooKeeper's counter after overflow) included.
func orderKey(seq int64) uint64 { return uint64(seq) ^ signBit }

func keyOrder(k uint64) int64 { return int64(k ^ signBit) }

// itemName returns the name to create an item under: fresh when requeue is
// false, put back at order otherwise.
func itemName(prio int64, order int64, requeue bool) string {
	name := fmt.Sprintf("%s%016x-", itemMark, prioKey(prio))
	if requeue {
		name += fmt.Sprintf("r%016x-", orderKey(order))
	}
	return name
}

// entry is one item node as seen in a listing.
type entry struct {
	name  string
	prio  int64
	order int64
}

// parseItem decodes the name of an item node with Seq seq. ok is false for
// names that are not items (foreign keys, directories).
func parseItem(name string, seq int64) (e entry, ok bool) {
	i := strings.Index(name, itemMark)
	if i < 0 {
		return entry{}, false
	}
	rest := name[i+len(itemMark):]
	pk, ok := hexKey(rest)
	if !ok || len(rest) < keyLen+1 || rest[keyLen] != '-' {
		return entry{}, false
	}
	e = entry{name: name, prio: keyPrio(pk), order: seq}
	rest = rest[keyLen+1:]
	if len(rest) > 0 && rest[0] == 'r' {
		if k, ok := hexKey(rest[1:]); ok && len(rest) > keyLen+1 && rest[keyLen+1] == '-' {
			e.order = keyOrder(k)
		}
	}
	return e, true
}

// hexKey parses the 16 hexadecimal digits at the start of s.
func hexKey(s string) (uint64, bool) {
	if len(s) < keyLen {
		return 0, false
	}
	k, err := strconv.ParseUint(s[:keyLen], 16, 64)
	return k, err == nil
}

// compareEntries orders items for delivery: higher priority first, then by
// order (FIFO), then by name so the order is total.
func compareEntries(a, b entry) int {
	if c := cmp.Compare(b.prio, a.prio); c != 0 {
		return c
	}
	if c := cmp.Compare(a.order, b.order); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// sortedItems returns the item entries of a listing in delivery order,
// leaving out the names in skip (claimed items).
func sortedItems(kids []store.Child, skip map[string]bool) []entry {
	es := make([]entry, 0, len(kids))
	for _, k := range kids {
		if skip[k.Name] {
			continue
		}
		if e, ok := parseItem(k.Name, k.Seq); ok {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, compareEntries)
	return es
}
