package recipe

import golist "container/list"

// Stream is the shape Follow lacks: a follower of keyed state (the nodes
// of a tree, the members of a group, the contenders of a lock) whose
// receiver must see the changes of every key, in order, and never be
// waited for. Follow hands out the latest value and drops the ones not
// taken; a Stream keeps, for each key whose changes the receiver has not
// taken, what the receiver last took of it (its old value), and merges the
// key's later changes into one: from that old value to the key's state at
// the moment the receiver takes the change. So
//
//   - a key's changes reach the receiver in order, the last one its state
//     now: what the receiver holds after taking them all is the state;
//   - changes of one key not yet taken are merged, never dropped: a key
//     made and removed before the receiver took its creation costs it
//     nothing, a key changed twice is seen changed once, to its latest;
//   - keys come in the order of their first change not yet taken;
//   - the memory held is one old value per key with changes not taken:
//     at most the keys of the state and of the receiver's view, whatever
//     the rate of changes and however slow the receiver.
//
// The owner of the state calls Note before each change, with the value it
// changes from; the loop that hands out changes asks Next for the oldest,
// against the state now, and Pop once the receiver took it. A Stream is
// not safe for concurrent use: one loop owns it with the state.
type Stream[K comparable, V any] struct {
	equal   func(a, b V) bool
	order   golist.List // of K, oldest first
	pending map[K]*golist.Element
	old     map[K]noted[V]
	peak    int // the most keys pending since the maps were made
}

// noted is what the receiver holds of a key with changes not taken.
type noted[V any] struct {
	v   V
	had bool
}

// Change is one key's change as the receiver takes it: from Old (Had:
// it held one) to New (Has: the key has one now).
type Change[K comparable, V any] struct {
	Key      K
	Old, New V
	Had, Has bool
}

// NewStream returns an empty Stream whose values compare with equal (a
// change back to what the receiver holds is no change).
func NewStream[K comparable, V any](equal func(a, b V) bool) *Stream[K, V] {
	return &Stream[K, V]{equal: equal, pending: map[K]*golist.Element{}, old: map[K]noted[V]{}}
}

// Note records that key k is about to change from old (had: it held one;
// else it had none). Only the first Note of a key since the receiver took
// its last change counts: it is what the receiver holds.
func (s *Stream[K, V]) Note(k K, old V, had bool) {
	if _, ok := s.pending[k]; ok {
		return
	}
	s.pending[k] = s.order.PushBack(k)
	s.old[k] = noted[V]{old, had}
	s.peak = max(s.peak, len(s.pending))
}

// Len returns the number of keys with changes not taken.
func (s *Stream[K, V]) Len() int { return len(s.pending) }

// Next returns the oldest change not taken, against the state now (cur
// returns a key's value, and whether it has one), and false when there is
// none. Keys whose state is back to what the receiver holds are dropped on
// the way. The change stays until Pop.
func (s *Stream[K, V]) Next(cur func(K) (V, bool)) (Change[K, V], bool) {
	for e := s.order.Front(); e != nil; e = s.order.Front() {
		k := e.Value.(K)
		o := s.old[k]
		v, has := cur(k)
		if has != o.had || has && !s.equal(o.v, v) {
			return Change[K, V]{Key: k, Old: o.v, New: v, Had: o.had, Has: has}, true
		}
		s.drop(k)
	}
	return Change[K, V]{}, false
}

// Pop records that the receiver took the change of key k that Next
// returned: it holds k's state as it was then.
func (s *Stream[K, V]) Pop(k K) { s.drop(k) }

func (s *Stream[K, V]) drop(k K) {
	if e, ok := s.pending[k]; ok {
		s.order.Remove(e)
		delete(s.pending, k)
		delete(s.old, k)
	}
	if len(s.pending) == 0 && s.peak > shrinkPast {
		// Maps keep the room of their largest size: a burst the
		// receiver fell behind on would hold it for good.
		s.pending, s.old, s.peak = map[K]*golist.Element{}, map[K]noted[V]{}, 0
	}
}

// shrinkPast is how many keys a Stream's maps may have held before it
// makes them anew once empty.
const shrinkPast = 64
