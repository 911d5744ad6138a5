package queue

// Stats returns how many items q took and how many take attempts it lost to
// another consumer, for the contention tests and benchmarks.
func (q *Queue) Stats() (taken, wasted int64) { return q.taken.Load(), q.wasted.Load() }

// MaxSpread is how far, in items of one priority, competing consumers may
// take out of order.
const MaxSpread = maxSpread
