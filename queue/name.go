package queue

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/corral-go/corral/store"
)

// Item nodes are persistent sequential children of the items directory named
//
//	qi-<priority key>-i<id>-                          (an item as put)
//	qi-<priority key>-r<order key>-i<id>-d<count>-    (an item put back in its old place)
//
// followed by the store's sequence suffix (ZooKeeper and memstore: 10
// digits; etcd: 16 hexadecimal digits). The keys and the id are 16
// hexadecimal digits; count is decimal. The priority key is an
// order-reversing bijection of the int64 priority, so that a smaller key is
// a higher priority over the whole range, negatives included. The id is
// drawn at random by the producer and names the item for its whole life: in
// its claim and its delivery count, across redeliveries, put-backs and a
// move to a dead-letter queue. The order key of an item put back is the
// order of the original node, so the item keeps its place among the items
// of its priority, and count is how many times it was delivered.
//
// Items are ordered by (priority key, order, name), where order is the
// order key when there is one and the node's Seq otherwise. The raw name is
// never the order: the store's suffix differs from store to store.
//
// Names written before ids existed ("qi-<priority key>-" and
// "qi-<priority key>-r<order key>-", then the suffix) are items too; their
// id is their whole name.
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

// newID returns a fresh item id.
func newID() string { return hex16(rand.Uint64()) }

// hex16 formats k as 16 hexadecimal digits, as "%016x" does, without fmt:
// every Put names an item with it.
func hex16(k uint64) string {
	const digits = "0123456789abcdef"
	var b [keyLen]byte
	for i := keyLen - 1; i >= 0; i-- {
		b[i] = digits[k&0xf]
		k >>= 4
	}
	return string(b[:])
}

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
		ids[i] = hex16(start + uint64(i))
	}
	return ids
}

// itemName returns the name to put a new item under.
func itemName(prio int64, id string) string {
	return itemMark + hex16(prioKey(prio)) + "-i" + id + "-"
}

// returnName returns the name to put an item back under, in its old place
// (order), delivered count times so far.
func returnName(prio, order int64, id string, count int) string {
	return fmt.Sprintf("%s%016x-r%016x-i%s-d%d-", itemMark, prioKey(prio), orderKey(order), id, count)
}

// entry is one item node as seen in a listing.
type entry struct {
	name  string
	prio  int64
	order int64
	id    string
	count int // deliveries before the node was made (put-backs)
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
	e = entry{name: name, prio: keyPrio(pk), order: seq, id: name}
	// The fields end with a '-'; what follows the last one is the store's
	// suffix, never a field.
	last := strings.LastIndexByte(rest, '-')
	for _, f := range strings.Split(rest[keyLen+1:last+1], "-") {
		switch {
		case len(f) == keyLen+1 && f[0] == 'r':
			if k, ok := hexKey(f[1:]); ok {
				e.order = keyOrder(k)
			}
		case len(f) == keyLen+1 && f[0] == 'i':
			if _, ok := hexKey(f[1:]); ok {
				e.id = f[1:]
			}
		case len(f) > 1 && f[0] == 'd':
			if n, err := strconv.Atoi(f[1:]); err == nil && n >= 0 {
				e.count = n
			}
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

// hasID reports whether the listing kids holds an item with the given id,
// under a name made from prefix.
func hasID(kids []store.Child, prefix, id string) bool {
	for _, k := range kids {
		if strings.HasPrefix(k.Name, prefix) {
			if e, ok := parseItem(k.Name, k.Seq); ok && e.id == id {
				return true
			}
		}
	}
	return false
}
