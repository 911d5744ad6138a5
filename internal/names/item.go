package names

import (
	"strconv"
	"strings"
)

// A queue's item nodes are persistent sequential children of its Items
// directory named
//
//	qi-<priority key>-i<id>-                          (an item as put)
//	qi-<priority key>-r<order key>-i<id>-d<count>-    (an item put back in its old place)
//
// followed by the store's sequence suffix (ZooKeeper and memstore: 10
// digits; etcd: 16 hexadecimal digits). The keys and the id are 16
// hexadecimal digits; count is decimal. The priority key is an
// order-reversing bijection of the int64 priority, so that a smaller key is
// a higher priority over the whole range, negatives included. The id is
// the producer's (a counter from a random start, per process: see the
// queue package) and names the item for its whole life: in
// its claim and its delivery count, across redeliveries, put-backs and a
// move to a dead-letter queue. The order key of an item put back is the
// order of the original node, so the item keeps its place among the items
// of its priority, and count is how many times it was delivered.
//
// The raw name is never the order: the store's suffix differs from store
// to store.
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

// ID formats k as an item id: 16 hexadecimal digits, as "%016x" does,
// without fmt (every Put names an item with it).
func ID(k uint64) string {
	const digits = "0123456789abcdef"
	var b [keyLen]byte
	for i := keyLen - 1; i >= 0; i-- {
		b[i] = digits[k&0xf]
		k >>= 4
	}
	return string(b[:])
}

// ItemName returns the name to put a new item of priority prio and id
// under (the store adds its suffix).
func ItemName(prio int64, id string) string {
	return itemMark + ID(prioKey(prio)) + "-i" + id + "-"
}

// ReturnName returns the name to put an item back under, in its old place
// (order), delivered count times so far.
func ReturnName(prio, order int64, id string, count int) string {
	return itemMark + ID(prioKey(prio)) + "-r" + ID(orderKey(order)) + "-i" + id + "-d" + strconv.Itoa(count) + "-"
}

// Entry is an item node as its name and Seq tell.
type Entry struct {
	Name  string
	Prio  int64
	Order int64 // the order key of an item put back, else the node's Seq
	ID    string
	Count int // deliveries before the node was made (put-backs)
}

// ParseItem decodes the name of an item node with Seq seq. ok is false for
// names that are not items (foreign keys, directories).
func ParseItem(name string, seq int64) (e Entry, ok bool) {
	i := strings.Index(name, itemMark)
	if i < 0 {
		return Entry{}, false
	}
	rest := name[i+len(itemMark):]
	pk, ok := hexKey(rest)
	if !ok || len(rest) < keyLen+1 || rest[keyLen] != '-' {
		return Entry{}, false
	}
	e = Entry{Name: name, Prio: keyPrio(pk), Order: seq, ID: name}
	// The fields end with a '-'; what follows the last one is the store's
	// suffix, never a field.
	last := strings.LastIndexByte(rest, '-')
	for f := range strings.SplitSeq(rest[keyLen+1:last+1], "-") {
		switch {
		case len(f) == keyLen+1 && f[0] == 'r':
			if k, ok := hexKey(f[1:]); ok {
				e.Order = keyOrder(k)
			}
		case len(f) == keyLen+1 && f[0] == 'i':
			if _, ok := hexKey(f[1:]); ok {
				e.ID = f[1:]
			}
		case len(f) > 1 && f[0] == 'd':
			if n, err := strconv.Atoi(f[1:]); err == nil && n >= 0 {
				e.Count = n
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
