package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/store"
)

// MinInterval is the shortest time between two walks of a Watcher: changes
// that come faster (a busy lock hands over hundreds of times a second) are
// merged into one report rather than read one by one.
const MinInterval = 100 * time.Millisecond

// ErrWatcherClosed is the Err of a Watcher after Close. It is the same
// error as every other Close's in corral.
var ErrWatcherClosed = runner.ErrClosed

// Watcher follows the recipes at or below a path; see Watch. Its methods
// are safe for concurrent use. The zero Watcher (and a nil one) has
// stopped: its Reports and Done channels are closed, and its Err wraps
// store.ErrInvalidArgument.
type Watcher struct{ l *runner.Loop[[]Report] }

// Watch reports the recipe directories at or below root (as Walk does) on
// the Watcher's Reports channel: first as they are, and again after every
// change. Holders it saw granted (waiting, or not there, in its previous
// snapshot) carry the time of the snapshot that first showed them holding
// as Contender.Granted, in that snapshot and the later ones; those already
// holding in its first snapshot carry none. It sets a children watch with every listing (and a watch on a
// double barrier's ready node), waits for one of them to fire, and walks
// again, never sooner than MinInterval after the last walk; it never polls.
// A snapshot not yet received when a change comes is replaced by a newer
// one. A missing root is reported as no recipes until it is created. A data
// change that does not change a directory's children (a leader that
// proclaims a new value) shows at the next change that does.
//
// Watch returns at once; the watcher runs in a goroutine of its own until
// ctx ends, Close is called, the session ends, or a read fails for a reason
// other than a lost connection (which is waited out). Then Reports is closed
// and Err says why. A nil st or an invalid root give a Watcher that has
// stopped already, with Err wrapping store.ErrInvalidArgument or
// store.ErrInvalidPath.
func Watch(ctx context.Context, st store.Store, root string) *Watcher {
	if err := check(st, root); err != nil {
		return &Watcher{l: runner.Stopped[[]Report](err)}
	}
	return &Watcher{l: runner.Start(ctx, func(ctx context.Context, out chan<- []Report) error {
		return watch(ctx, st, root, out)
	})}
}

// Reports returns the channel the watcher sends each snapshot on. It is
// closed when the watcher has stopped; Err then says why.
func (w *Watcher) Reports() <-chan []Report { return w.loop().C() }

// Done returns a channel that is closed when the watcher has stopped.
func (w *Watcher) Done() <-chan struct{} { return w.loop().Done() }

// Err returns nil while the watcher runs and, once it stopped, why: the
// cause of its ctx's end, ErrWatcherClosed after Close, the session's end
// (store.ErrSessionExpired, store.ErrClosed) or the error that stopped it.
// For the zero Watcher it returns an error wrapping
// store.ErrInvalidArgument.
func (w *Watcher) Err() error { return w.loop().Err(errZeroWatcher) }

var errZeroWatcher = fmt.Errorf("inspect: watcher: %w: not made by Watch", store.ErrInvalidArgument)

// Close stops the watcher and waits until it has stopped. It is idempotent
// and returns nil, on the zero Watcher too.
func (w *Watcher) Close() error { return w.loop().Close(ErrWatcherClosed) }

// loop returns the loop of w, nil for a nil Watcher.
func (w *Watcher) loop() *runner.Loop[[]Report] {
	if w == nil {
		return nil
	}
	return w.l
}

// watch sends a snapshot on out after every change, until ctx or the session
// ends or a walk fails for good, and returns why.
func watch(ctx context.Context, st store.Store, root string, out chan<- []Report) error {
	var g grants
	return recipe.Follow(ctx, st, out, recipe.Follower[[]Report]{
		Read: func(ctx context.Context) ([]Report, []<-chan store.Event, error) {
			r := &reader{st: st, watch: true}
			reps, err := r.snapshot(ctx, root)
			if err != nil {
				return nil, nil, err
			}
			g.mark(reps)
			return reps, r.evs, nil
		},
		MinInterval: MinInterval,
	})
}

// snapshot walks root with watches; a missing root gives no reports and a
// watch for its creation.
func (r *reader) snapshot(ctx context.Context, root string) ([]Report, error) {
	reps := []Report{}
	err := r.walk(ctx, root, func(rep Report) error { reps = append(reps, rep); return nil })
	if !errors.Is(err, store.ErrNoNode) || len(r.evs) > 0 {
		return reps, err
	}
	exists, _, ev, err := r.st.ExistsW(ctx, root)
	if err != nil {
		return nil, err
	}
	if exists {
		// Made since the listing: walk again at once.
		fired := make(chan store.Event, 1)
		fired <- store.Event{Type: store.EventCreated, Path: root}
		close(fired)
		ev = fired
	}
	r.evs = append(r.evs, ev)
	return reps, nil
}

// grants remembers, from one snapshot to the next, the contenders of the
// last one and when each holder was seen granted; it holds nothing that
// the last snapshot does not.
type grants struct {
	first   bool // a snapshot was marked
	at      map[contenderKey]time.Time
	holding map[contenderKey]bool // the contenders of the last snapshot: true for its holders
}

// contenderKey is a contender's identity: its path and its Seq.
type contenderKey struct {
	path, name string
	seq        int64
}

// mark sets Granted on the holders of reps that it saw granted: waiting,
// or not there, in the last snapshot.
func (g *grants) mark(reps []Report) {
	at := make(map[contenderKey]time.Time)
	holding := make(map[contenderKey]bool)
	for i := range reps {
		r := &reps[i]
		for _, c := range r.Waiters {
			holding[contenderKey{r.Path, c.Name, c.Seq}] = false
		}
		for j := range r.Holders {
			c := &r.Holders[j]
			k := contenderKey{r.Path, c.Name, c.Seq}
			holding[k] = true
			if !c.Granted.IsZero() {
				continue // its own record says when
			}
			t, ok := g.at[k]
			if !ok && (!g.first || g.holding[k]) {
				continue // holding when first seen: since when, nobody knows
			}
			if !ok {
				t = r.Time
			}
			c.Granted, at[k] = t, t
		}
	}
	g.first, g.at, g.holding = true, at, holding
}
