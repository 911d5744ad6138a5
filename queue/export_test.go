package queue

import "github.com/corral-go/corral/store"

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
		if v, ok := q.view(claims).(*followView); ok {
			v.mu.Lock()
			v.drop()
			v.mu.Unlock()
		}
	}
}

// HoldPuts makes q's Puts wait, as they do while as many puts of q's as
// may be are in flight, until release: it sends what they put, one request
// per group, and returns once that is done.
func HoldPuts(q *Queue) (release func()) {
	q.puts.mu.Lock()
	q.puts.inFlight = q.opts.maxPuts()
	q.puts.mu.Unlock()
	return func() {
		q.puts.mu.Lock()
		groups := q.puts.pending
		q.puts.pending, q.puts.inFlight = nil, 0
		q.puts.mu.Unlock()
		for _, g := range groups {
			q.sendGroup(q.st.(store.BatchCreator), g)
		}
	}
}

// OnPutJoin sets a function that every Put of q which waits for a put in
// flight calls once it has joined the next request.
func OnPutJoin(q *Queue, f func()) {
	q.puts.mu.Lock()
	defer q.puts.mu.Unlock()
	q.puts.onJoin = f
}

// OnPutLeave sets a function that every put of q whose ctx ended calls once
// it has left its request.
func OnPutLeave(q *Queue, f func()) {
	q.puts.mu.Lock()
	defer q.puts.mu.Unlock()
	q.puts.onLeave = f
}

// OnPutHold sets a function that every PutAsync of q which waits for room
// calls before it waits.
func OnPutHold(q *Queue, f func()) {
	q.puts.mu.Lock()
	defer q.puts.mu.Unlock()
	q.puts.onHold = f
}
