package cache

import (
	"hash/maphash"
	"math/bits"
)

// pmap is a persistent map from paths to nodes: a hash trie, 32 ways per
// level, whose updates copy the few levels they touch and share the rest.
// A Tree hands a Snapshot out by handing its root out, and goes on
// changing its own: a snapshot costs nothing, a change of the map a few
// small copies (log32 of the nodes), so a large tree that changes often
// costs the same as a small one. The zero pmap is empty; a pmap is a value.
type pmap struct {
	root *trie
	n    int
}

// trie is one level: the slots in use, by bit, and their items.
type trie struct {
	bits  uint32
	items []item
}

// item is a slot: a level below (sub), or the entries whose hashes share
// the slot's bits so far (one, but for a full 64-bit collision).
type item struct {
	sub     *trie
	hash    uint64
	entries []entry
}

type entry struct {
	key string
	val *node
}

var seed = maphash.MakeSeed()

func hashOf(k string) uint64 { return maphash.String(seed, k) }

func (m pmap) len() int { return m.n }

func (m pmap) get(k string) (*node, bool) {
	h := hashOf(k)
	for t, shift := m.root, 0; t != nil; shift += 5 {
		bit := uint32(1) << (h >> shift & 31)
		if t.bits&bit == 0 {
			return nil, false
		}
		it := &t.items[bits.OnesCount32(t.bits&(bit-1))]
		if it.sub != nil {
			t = it.sub
			continue
		}
		if it.hash != h {
			return nil, false
		}
		for _, e := range it.entries {
			if e.key == k {
				return e.val, true
			}
		}
		return nil, false
	}
	return nil, false
}

// set returns m with k mapped to v.
func (m pmap) set(k string, v *node) pmap {
	root, added := m.root.set(hashOf(k), 0, k, v)
	if added {
		m.n++
	}
	m.root = root
	return m
}

func (t *trie) set(h uint64, shift int, k string, v *node) (*trie, bool) {
	if t == nil {
		t = &trie{}
	}
	bit := uint32(1) << (h >> shift & 31)
	i := bits.OnesCount32(t.bits & (bit - 1))
	c := &trie{bits: t.bits | bit}
	if t.bits&bit == 0 {
		c.items = make([]item, 0, len(t.items)+1)
		c.items = append(append(append(c.items, t.items[:i]...), item{hash: h, entries: []entry{{k, v}}}), t.items[i:]...)
		return c, true
	}
	c.items = append([]item(nil), t.items...)
	it := &c.items[i]
	switch {
	case it.sub != nil:
		var added bool
		it.sub, added = it.sub.set(h, shift+5, k, v)
		return c, added
	case it.hash == h:
		es := append([]entry(nil), it.entries...)
		for j := range es {
			if es[j].key == k {
				es[j].val = v
				it.entries = es
				return c, false
			}
		}
		it.entries = append(es, entry{k, v})
		return c, true
	}
	// Another hash in the slot: both go a level down.
	sub := &trie{}
	sub = sub.place(it.hash, shift+5, it.entries)
	sub, _ = sub.set(h, shift+5, k, v)
	*it = item{sub: sub}
	return c, true
}

// place puts entries, which share the hash h, into the empty or
// single-slot level t, in place (t is new and not shared yet).
func (t *trie) place(h uint64, shift int, es []entry) *trie {
	t.bits = uint32(1) << (h >> shift & 31)
	t.items = []item{{hash: h, entries: es}}
	return t
}

// del returns m without k.
func (m pmap) del(k string) pmap {
	root, removed := m.root.del(hashOf(k), 0, k)
	if removed {
		m.n--
		m.root = root
	}
	return m
}

func (t *trie) del(h uint64, shift int, k string) (*trie, bool) {
	if t == nil {
		return nil, false
	}
	bit := uint32(1) << (h >> shift & 31)
	if t.bits&bit == 0 {
		return t, false
	}
	i := bits.OnesCount32(t.bits & (bit - 1))
	it := t.items[i]
	switch {
	case it.sub != nil:
		sub, removed := it.sub.del(h, shift+5, k)
		if !removed {
			return t, false
		}
		if sub == nil {
			return t.without(bit, i), true
		}
		if len(sub.items) == 1 && sub.items[0].sub == nil {
			it = sub.items[0] // one slot of entries left: up a level
		} else {
			it = item{sub: sub}
		}
		c := &trie{bits: t.bits, items: append([]item(nil), t.items...)}
		c.items[i] = it
		return c, true
	case it.hash != h:
		return t, false
	}
	j := -1
	for x, e := range it.entries {
		if e.key == k {
			j = x
		}
	}
	if j < 0 {
		return t, false
	}
	if len(it.entries) == 1 {
		return t.without(bit, i), true
	}
	c := &trie{bits: t.bits, items: append([]item(nil), t.items...)}
	es := append(append([]entry(nil), it.entries[:j]...), it.entries[j+1:]...)
	c.items[i] = item{hash: h, entries: es}
	return c, true
}

// without returns t without the slot bit (at i), or nil when it was the
// last.
func (t *trie) without(bit uint32, i int) *trie {
	if len(t.items) == 1 {
		return nil
	}
	c := &trie{bits: t.bits &^ bit, items: make([]item, 0, len(t.items)-1)}
	c.items = append(append(c.items, t.items[:i]...), t.items[i+1:]...)
	return c
}

// each calls f with every entry of m, in no order, until f returns false.
func (m pmap) each(f func(k string, v *node) bool) {
	m.root.each(f)
}

func (t *trie) each(f func(k string, v *node) bool) bool {
	if t == nil {
		return true
	}
	for _, it := range t.items {
		if it.sub != nil {
			if !it.sub.each(f) {
				return false
			}
			continue
		}
		for _, e := range it.entries {
			if !f(e.key, e.val) {
				return false
			}
		}
	}
	return true
}
