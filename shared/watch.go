package shared

import (
	"bytes"
	"context"
	"fmt"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/store"
)

// ErrWatcherClosed is the error of a Watcher after its Close. It is the
// one value every Close in corral stops its loop with (group's
// ErrWatcherClosed, cache's ErrClosed, ...), whose text is "corral: closed".
var ErrWatcherClosed = runner.ErrClosed

// Watch reports the value as it changes, on the Watcher's Snapshots
// channel: first the value now (NoVersion when it was never set), then
// the value after every change. A snapshot not yet received when the
// watcher learns it is out of date is replaced by the newer one, so a slow
// receiver never gets a value already known to be stale, and changes
// faster than a round trip may be merged into one; a value whose version
// and data did not change is not sent again.
//
// Watch returns at once. The watcher runs in a goroutine of its own until
// ctx ends, the session ends, Close is called, or a read fails for a
// reason other than a lost connection (which is waited out: ErrKindMismatch,
// say); then Snapshots is closed and Err says why. A nil, zero or
// misconfigured Value gives a Watcher that has stopped already, with Err
// saying why. Any session may watch; one watch is set at a time, on the
// value's node.
func (v *Value) Watch(ctx context.Context) *Watcher {
	n := v.node()
	if err := n.usable("watch"); err != nil {
		return &Watcher{l: runner.Stopped[Snapshot](err)}
	}
	return &Watcher{l: runner.Start(ctx, func(ctx context.Context, out chan<- Snapshot) error {
		return recipe.Follow(ctx, n.st, out, recipe.Follower[Snapshot]{
			Read:   n.snapshot,
			Equal:  func(a, b Snapshot) bool { return a.Version == b.Version && bytes.Equal(a.Data, b.Data) },
			Copy:   func(s Snapshot) Snapshot { return Snapshot{Data: bytes.Clone(s.Data), Version: s.Version} },
			Failed: func(err error) error { return n.errf("watch", err) },
		})
	})}
}

// snapshot reads the value with a watch, set on ctx, that fires at its
// next change: its creation when it was never set.
func (n *node) snapshot(ctx context.Context) (Snapshot, []<-chan store.Event, error) {
	exists, _, ev, err := n.st.ExistsW(ctx, n.path)
	if err != nil {
		return Snapshot{}, nil, err
	}
	s := Snapshot{Version: NoVersion}
	if exists {
		// Read after the watch is set: a change in between fires it,
		// and the next read sends what it made.
		nd, ok, err := n.read(ctx)
		if err != nil {
			return Snapshot{}, nil, err
		}
		if ok {
			s = Snapshot{Data: nd.Data, Version: nd.Version}
		}
	} else if err := n.check(ctx, store.Node{}); err != nil {
		return Snapshot{}, nil, err
	}
	return s, []<-chan store.Event{ev}, nil
}

// Watcher follows a Value; see Value.Watch. Its methods are safe for
// concurrent use. The zero Watcher (and a nil one) has stopped.
type Watcher struct{ l *runner.Loop[Snapshot] }

// Snapshots returns the channel the watcher sends the value on. It is
// closed when the watcher has stopped; Err then says why. Each snapshot's
// Data is the receiver's own.
func (w *Watcher) Snapshots() <-chan Snapshot { return w.loop().C() }

// Done returns a channel that is closed when the watcher has stopped,
// after its Snapshots channel.
func (w *Watcher) Done() <-chan struct{} { return w.loop().Done() }

// Err returns nil while the watcher runs and, once it stopped, why: the
// cause of its ctx, the end of the session (store.ErrSessionExpired,
// store.ErrClosed), ErrWatcherClosed after Close, or the error that stopped
// it. For the zero Watcher it returns an error wrapping
// store.ErrInvalidArgument.
func (w *Watcher) Err() error { return w.loop().Err(errZeroWatcher) }

var errZeroWatcher = fmt.Errorf("shared: watcher: %w: not made by Watch", store.ErrInvalidArgument)

// Close stops the watcher and waits until it has stopped. It does not need
// the Snapshots channel to be drained. It is idempotent and returns nil.
func (w *Watcher) Close() error { return w.loop().Close(ErrWatcherClosed) }

func (w *Watcher) loop() *runner.Loop[Snapshot] {
	if w == nil {
		return nil
	}
	return w.l
}
