// Package backlog holds the changes a follow has seen and its reader has
// not taken yet, and tells the reader when there are more: the one
// mailbox behind every Changes method of store.ChildFollow and
// store.TreeFollow, in every adapter and in the store package's portable
// follow.
//
// A Backlog does no locking of its own. Its follow guards it with the lock
// that guards the rest of the follow's state, so that a change is recorded
// in the same step as what the follow keeps beside it (a revision, a
// queue of reads); every method must be called with that lock held.
package backlog

// Backlog is the changes of one follow not taken yet, and why the follow
// ended, once it has. Its zero value is an empty backlog of a follow that
// has not ended.
type Backlog[T any] struct {
	pending []T
	ready   chan struct{} // closed when pending grows or the follow ends
	closed  bool          // ready is closed
	err     error         // why the follow ended, once it has
}

// Add records cs and wakes the reader.
func (b *Backlog[T]) Add(cs ...T) {
	b.pending = append(b.pending, cs...)
	b.Wake()
}

// Hold records cs without waking the reader, who learns of them on the
// next Wake: memstore's frozen session, which sees nothing until thawed.
func (b *Backlog[T]) Hold(cs ...T) { b.pending = append(b.pending, cs...) }

// Wake tells the reader to call Take, if it has not been told since its
// last Take.
func (b *Backlog[T]) Wake() {
	b.init()
	if !b.closed {
		close(b.ready)
		b.closed = true
	}
}

// Len returns the number of changes not taken.
func (b *Backlog[T]) Len() int { return len(b.pending) }

// End ends the follow with err, which must not be nil, and wakes the
// reader, unless the follow has ended; it reports whether this call ended
// it. The reader takes the
// changes recorded before, then gets err.
func (b *Backlog[T]) End(err error) bool {
	if b.err != nil {
		return false
	}
	b.err = err
	b.Wake()
	return true
}

// Err returns why the follow ended, or nil while it has not.
func (b *Backlog[T]) Err() error { return b.err }

// Take is the Changes method of a follow: the changes not taken yet, in
// the order they were recorded, and a channel closed when there are more
// or the follow has ended; once every change is taken, the follow's end.
func (b *Backlog[T]) Take() ([]T, <-chan struct{}, error) {
	b.init()
	if len(b.pending) > 0 {
		cs := b.pending
		b.pending = nil
		if b.err == nil {
			b.ready, b.closed = make(chan struct{}), false
		}
		return cs, b.ready, nil
	}
	if b.err != nil {
		return nil, b.ready, b.err
	}
	if b.closed {
		b.ready, b.closed = make(chan struct{}), false
	}
	return nil, b.ready, nil
}

func (b *Backlog[T]) init() {
	if b.ready == nil {
		b.ready = make(chan struct{})
	}
}
