package recipe

import (
	"context"
	"reflect"
	"time"

	"github.com/corral-go/corral/store"
)

// Follower says what a follower of shared state reads, and how it tells
// one value from the next: it is the one loop behind every watcher that
// hands out the latest value of something in the store (an election's
// observer, a group's watcher, inspect's watcher, the caches). See
// [Follow].
type Follower[T any] struct {
	// Read reads the value now, with the watches, set on ctx, that fire
	// once it may be out of date (at least one unless it fails). ctx
	// ends once the value is stale or the follow ends, which drops the
	// watches that did not fire.
	Read func(ctx context.Context) (v T, stale []<-chan store.Event, err error)
	// Equal reports whether two values read are the same, so that a
	// value equal to the one the receiver has is not sent again. nil:
	// every value read is sent.
	Equal func(a, b T) bool
	// Copy returns the value to hand to the receiver (nil: v itself), so
	// that what the receiver gets shares nothing with what the follower
	// keeps.
	Copy func(v T) T
	// Changed, when not nil, is called with every value read that is not
	// Equal to the one read before it, and with the first (first is then
	// true), sent or not: the place for metrics and logs of changes.
	Changed func(ctx context.Context, v T, first bool)
	// MinInterval is the shortest time between the starts of two reads:
	// changes that come faster are merged into one value.
	MinInterval time.Duration
	// Failed wraps the error of a read that failed for good (nil: as it
	// is). The ends of ctx and of the session are returned as their
	// causes, unwrapped.
	Failed func(err error) error
}

// Follow sends the value f reads on out, first as it is and then after
// every change, until ctx or the session ends or a read fails for good,
// and returns why: ctx's cause, the session's cause, or the read's error
// (through f.Failed). It is the body of a runner.Loop.
//
// A value not yet taken when one of its watches fires is dropped for a
// newer one, so a receiver never gets a value already known to be out of
// date, and is never waited for: a slow receiver blocks nothing but the
// follower, and its watches are set again only once it has taken the
// value. A value Equal to the last one taken is not sent again. A read
// that fails with a lost connection is tried again, paced by Pause, while
// ctx and the session live.
func Follow[T any](ctx context.Context, st store.Store, out chan<- T, f Follower[T]) error {
	err := follow(ctx, st, out, f)
	if ctx.Err() != nil {
		return context.Cause(ctx) // why ctx ended, not what that made a call return
	}
	return err
}

func follow[T any](ctx context.Context, st store.Store, out chan<- T, f Follower[T]) error {
	var (
		last, prev T
		sent, read bool
	)
	for attempt := 0; ; {
		if err := Alive(ctx, st); err != nil {
			return err
		}
		begun := time.Now()
		rctx, stop := context.WithCancel(ctx)
		v, stale, err := f.Read(rctx)
		if err != nil {
			stop()
			if RideOut(ctx, st, err, attempt) {
				attempt++
				continue
			}
			SyncSession(st)
			if err := Alive(ctx, st); err != nil {
				return err
			}
			if f.Failed != nil {
				err = f.Failed(err)
			}
			return err
		}
		attempt = 0
		if f.Changed != nil && (!read || !f.equal(v, prev)) {
			f.Changed(ctx, v, !read)
		}
		prev, read = v, true
		var send chan<- T // nil: the receiver has v already
		give := v
		if !sent || !f.equal(v, last) {
			send = out
			if f.Copy != nil {
				give = f.Copy(v)
			}
		}
		taken, err := offer(ctx, send, give, stale)
		stop()
		if err != nil {
			return err
		}
		if taken {
			last, sent = v, true
		}
		if err := sleep(ctx, f.MinInterval-time.Since(begun)); err != nil {
			return err
		}
	}
}

func (f *Follower[T]) equal(a, b T) bool { return f.Equal != nil && f.Equal(a, b) }

// offer offers v on out until a receiver takes it, and then waits until
// one of stale fires. It returns false early when one fires before v is
// taken, and ctx's error when ctx ends first. A nil out offers nothing.
// One watch is waited on with a plain select, several by reflection.
func offer[T any](ctx context.Context, out chan<- T, v T, stale []<-chan store.Event) (taken bool, err error) {
	if len(stale) == 1 {
		select {
		case out <- v:
		case <-stale[0]:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
		select {
		case <-stale[0]:
			return true, nil
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
	cases := make([]reflect.SelectCase, 0, len(stale)+2)
	for _, ev := range stale {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ev)})
	}
	done := len(cases)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	if out != nil {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectSend, Chan: reflect.ValueOf(out), Send: reflect.ValueOf(v)})
	}
	for {
		i, _, _ := reflect.Select(cases)
		switch {
		case i == done:
			return taken, ctx.Err()
		case i > done:
			taken, cases = true, cases[:done+1] // taken: now only wait
			continue
		}
		return taken, nil
	}
}

// Alive returns ctx's error, or the session's cause, once either has
// ended; nil while both live.
func Alive(ctx context.Context, st store.Store) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if sctx := st.Context(); sctx.Err() != nil {
		return context.Cause(sctx)
	}
	return nil
}

// sleep waits for d, or until ctx ends; it returns at once for d <= 0.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
