package cache

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"sync/atomic"
)

// pmap is a persistent map from paths to nodes: a hash trie, 32 ways per
// level, whose updates copy the few levels they touch and share the rest.
// A Tree hands a Snapshot out by handing its root out, and goes on
// changing its own: a snapshot costs nothing, a change of the map a few
// small copies (log32 of the nodes), so a large tree that changes often
// costs the same as a small one.
//
// Between two snapshots the levels a map made itself are changed in place
// (its edit marks them; the transients of Clojure's maps): a burst of
// changes, or the first read of a large tree, copies each level once, not
// once per change. A map that hands its root out (a snapshot) must take a
// new edit first (freeze). The zero pmap is empty and makes every level
// anew; a pmap is a value.
type pmap struct {
	root *trie
	n    int
	edit uint64 // the levels made with it are the map's own; 0: none is
}

// edits hands out the edits of maps, never 0.
var edits atomic.Uint64

// thaw returns m with an edit of its own, so that its next changes are
// made in place in the levels they make.
func (m pmap) thaw() pmap {
	m.edit = edits.Add(1)
	return m
}

// trie is one level: the slots in use, by bit, and their items; edit is
// the edit of the map that made it.
type trie struct {
	bits  uint32
	items []item
	edit  uint64
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
	root, added := m.root.set(hashOf(k), 0, k, v, m.edit)
	if added {
		m.n++
	}
	m.root = root
	return m
}

func (t *trie) set(h uint64, shift int, k string, v *node, edit uint64) (*trie, bool) {
	if t == nil {
		t = &trie{edit: edit}
	}
	bit := uint32(1) << (h >> shift & 31)
	i := bits.OnesCount32(t.bits & (bit - 1))
	c := t.own(edit)
	if t.bits&bit == 0 {
		c.bits |= bit
		c.items = slices.Insert(c.items, i, item{hash: h, entries: []entry{{k, v}}})
		return c, true
	}
	it := &c.items[i]
	switch {
	case it.sub != nil:
		var added bool
		it.sub, added = it.sub.set(h, shift+5, k, v, edit)
		return c, added
	case it.hash == h:
		// Entries are never changed in place: a snapshot may share them.
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
	sub := &trie{edit: edit, bits: uint32(1) << (it.hash >> (shift + 5) & 31), items: []item{{hash: it.hash, entries: it.entries}}}
	sub, _ = sub.set(h, shift+5, k, v, edit)
	*it = item{sub: sub}
	return c, true
}

// own returns t itself when the map of edit made it, else a copy of it
// that map owns.
func (t *trie) own(edit uint64) *trie {
	if edit != 0 && t.edit == edit {
		return t
	}
	return &trie{bits: t.bits, items: slices.Clone(t.items), edit: edit}
}

// del returns m without k.
func (m pmap) del(k string) pmap {
	root, removed := m.root.del(hashOf(k), 0, k, m.edit)
	if removed {
		m.n--
		m.root = root
	}
	return m
}

func (t *trie) del(h uint64, shift int, k string, edit uint64) (*trie, bool) {
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
		sub, removed := it.sub.del(h, shift+5, k, edit)
		if !removed {
			return t, false
		}
		if sub == nil {
			return t.without(bit, i, edit), true
		}
		if len(sub.items) == 1 && sub.items[0].sub == nil {
			it = sub.items[0] // one slot of entries left: up a level
		} else {
			it = item{sub: sub}
		}
		c := t.own(edit)
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
		return t.without(bit, i, edit), true
	}
	c := t.own(edit)
	es := append(append([]entry(nil), it.entries[:j]...), it.entries[j+1:]...)
	c.items[i] = item{hash: h, entries: es}
	return c, true
}

// without returns t without the slot bit (at i), or nil when it was the
// last.
func (t *trie) without(bit uint32, i int, edit uint64) *trie {
	if len(t.items) == 1 {
		return nil
	}
	c := t.own(edit)
	c.bits &^= bit
	c.items = slices.Delete(c.items, i, i+1)
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
