// Package runner owns the lifecycle of a background loop that sends values
// on a channel: its start, its stop (once), the Done channel, the error it
// stopped with, and a Close that waits for its goroutine. A watcher, an
// observer, a consumer or a candidate is a Loop plus the body of its loop,
// so that every one of them closes its channels in the same order and
// reports Err the same way. The body of a loop that follows a value is
// recipe.Follow.
package runner

import (
	"context"
	"errors"
	gosync "sync"
)

// ErrClosed is the Err of a loop stopped by the Close of the type that
// holds it: a watcher, an observer, a consumer, a cache. Every package
// exports it under its own name (election.ErrObserverClosed,
// group.ErrWatcherClosed, inspect.ErrWatcherClosed,
// queue.ErrConsumerClosed), one value for one meaning.
var ErrClosed = errors.New("corral: closed")

// Loop is one goroutine running a loop body, and the channel the body sends
// on. A nil *Loop has stopped: its channels are closed and Close and Stop do
// nothing, so that a type holding one has a usable zero value. Its methods
// are safe for concurrent use.
type Loop[T any] struct {
	out    chan T
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu  gosync.Mutex
	err error
}

// Start runs body in a goroutine of its own and returns at once. body gets
// a context derived from ctx, which Stop and Close cancel with their cause,
// and the unbuffered channel whose receiving end is C; it returns why it
// stopped. Once it has returned, the loop records that error for Err,
// closes C, cancels body's context with the error as its cause, and closes
// Done, in that order: a receiver that sees C closed finds the error in Err.
func Start[T any](ctx context.Context, body func(ctx context.Context, out chan<- T) error) *Loop[T] {
	ctx, cancel := context.WithCancelCause(ctx)
	l := &Loop[T]{out: make(chan T), cancel: cancel, done: make(chan struct{})}
	go func() { l.finish(body(ctx, l.out)) }()
	return l
}

// Stopped returns a Loop that has stopped already with err, for a
// constructor that refused its arguments.
func Stopped[T any](err error) *Loop[T] {
	l := &Loop[T]{out: make(chan T), cancel: func(error) {}, done: make(chan struct{})}
	l.finish(err)
	return l
}

// finish records err, closes the channels and ends the body's context.
func (l *Loop[T]) finish(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	close(l.out)
	l.cancel(err)
	close(l.done)
}

// C returns the channel the body sends on. It is closed once the body has
// returned.
func (l *Loop[T]) C() <-chan T {
	if l == nil {
		ch := make(chan T)
		close(ch)
		return ch
	}
	return l.out
}

// Done returns a channel that is closed when the loop has stopped, after C.
func (l *Loop[T]) Done() <-chan struct{} {
	if l == nil {
		return closed
	}
	return l.done
}

var closed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Err returns nil while the loop runs and, once it stopped, the error its
// body returned (or Stopped's). A nil Loop returns unmade: the error of the
// zero value of the type that holds it.
func (l *Loop[T]) Err(unmade error) error {
	if l == nil {
		return unmade
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Stop cancels the body's context with cause and returns at once. Only the
// first cause counts.
func (l *Loop[T]) Stop(cause error) {
	if l != nil {
		l.cancel(cause)
	}
}

// Close stops the loop with cause (see Stop) and waits until it has
// stopped. It does not need C to be drained. It is idempotent and returns
// nil, for the Close method of the type that holds the loop.
func (l *Loop[T]) Close(cause error) error {
	l.Stop(cause)
	<-l.Done()
	return nil
}

// Cause returns the cause of ctx once ctx has ended, else err: the error of
// a loop that stops because its context ended is why the context ended
// (a Close, the caller's cancel or deadline), not the error that the end
// made its last call return.
func Cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
