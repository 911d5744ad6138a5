package queue

// Stats returns how many items q took and how many take attempts it lost to
// another consumer, for the contention tests and benchmarks.
func (q *Queue) Stats() (taken, wasted int64) { return q.taken.Load(), q.wasted.Load() }

// MaxSpread is how far, in items of one priority, competing consumers may
// take out of order.
const MaxSpread = maxSpread

// DropView drops what q's session follows of q's queue, as an idle view
// does: the next take follows anew.
func DropView(q *Queue) {
	for _, claims := range []bool{false, true} {
		if sv, ok := views.Load(viewKey{q.st, q.path, claims}); ok {
			if v, ok := sv.(*sharedView).v.(*followView); ok {
				v.mu.Lock()
				v.drop()
				v.mu.Unlock()
			}
		}
	}
}
