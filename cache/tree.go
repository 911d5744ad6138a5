package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// NewTree follows the subtree at path, down to the depth WithDepth sets
// (the whole subtree by default), as a map of path to node, delivered as
// Snapshots and as Events (see the package doc for what each promises and
// what may merge). It follows a path that does not exist yet into its
// creation, and on through deletions and re-creations: a missing path is
// an empty tree.
//
// NewTree returns at once. The Tree runs in a goroutine of its own until
// ctx ends, the session ends, Close is called, the subtree has more nodes
// than its limit (ErrTooManyNodes), or a read fails for a reason other
// than a lost connection (which is ridden out, and reported as Stale);
// then both channels are closed and Err says why. A nil store, an invalid
// path or option, a nil option, or WithBase with a snapshot of another
// path give a Tree that has stopped already, with Err wrapping
// store.ErrInvalidArgument or store.ErrInvalidPath. NewTree is safe for
// concurrent use.
func NewTree(ctx context.Context, st store.Store, path string, opts ...Option) *Tree {
	o, err := newOptions(st, path, true, opts)
	if err != nil {
		snaps := make(chan Snapshot)
		close(snaps)
		return &Tree{l: runner.Stopped[Event](fmt.Errorf("cache: tree %q: %w", path, err)), snaps: snaps}
	}
	t := &treeLoop{st: st, path: path, depth: o.depth, max: o.maxNodes,
		rec:    telemetry.New(o.tel, telemetry.KindCacheTree, path, nil),
		stream: recipe.NewStream[string, *node](same), stale: true}
	if o.base != nil {
		t.m = o.base.m
	}
	t.m = t.m.thaw()
	l, snaps := runner.StartPair(ctx, func(ctx context.Context, events chan<- Event, snaps chan<- Snapshot) error {
		return runner.Cause(ctx, t.run(ctx, events, snaps))
	})
	return &Tree{l: l, snaps: snaps}
}

// Tree follows a subtree; see NewTree. Its methods are safe for
// concurrent use. The zero Tree (and a nil one) has stopped.
type Tree struct {
	l     *runner.Loop[Event]
	snaps <-chan Snapshot
}

// Events returns the channel the Tree's events come on, in order (see the
// package doc): Created for every node of the first read, then Current,
// then every change. It is closed when the Tree has stopped; Err then says
// why. Each event is the receiver's own.
func (t *Tree) Events() <-chan Event { return t.loop().C() }

// Snapshots returns the channel the Tree's snapshots come on: the first
// once the subtree is read, then one after every change not yet received,
// the latest. It is closed when the Tree has stopped, right after Events.
func (t *Tree) Snapshots() <-chan Snapshot {
	if t == nil || t.snaps == nil {
		return closedSnaps
	}
	return t.snaps
}

var closedSnaps = func() chan Snapshot {
	ch := make(chan Snapshot)
	close(ch)
	return ch
}()

// Done returns a channel that is closed when the Tree has stopped, after
// its channels.
func (t *Tree) Done() <-chan struct{} { return t.loop().Done() }

// Err returns nil while the Tree runs and, once it stopped, why: the cause
// of its ctx, the end of the session (store.ErrSessionExpired,
// store.ErrClosed), ErrClosed after Close, ErrTooManyNodes, or the error
// that stopped it. For the zero Tree it returns an error wrapping
// store.ErrInvalidArgument.
func (t *Tree) Err() error { return t.loop().Err(errZeroTree) }

var errZeroTree = fmt.Errorf("cache: tree: %w: not made by NewTree", store.ErrInvalidArgument)

// Close stops the Tree and waits until it has stopped: its watch, its
// follow of the store and its goroutines released, whatever changes were
// in flight. It does not need the channels to be drained. It is idempotent
// and returns nil.
func (t *Tree) Close() error { return t.loop().Close(ErrClosed) }

func (t *Tree) loop() *runner.Loop[Event] {
	if t == nil {
		return nil
	}
	return t.l
}

// marker is the key of the Stale and Current events in the stream: no
// path is "".
const marker = ""

// treeLoop is the state of one Tree's goroutine. It owns all of it.
type treeLoop struct {
	st         store.Store
	path       string
	depth, max int
	rec        *telemetry.Recorder

	m      pmap                          // the view
	stream *recipe.Stream[string, *node] // the events not taken
	stale  bool                          // the view may be out of date
	listed bool                          // the first read is in
	taken  bool                          // the receiver holds the latest snapshot
	f      store.TreeFollow              // nil while the subtree is read (again)
	disc   <-chan struct{}               // the store's Disconnected, while current
	job    *job                          // the follow or the Sync under way
	buf    []string                      // reconcile's
	seen   map[string]struct{}           // reconcile's
}

// job is a helper goroutine of the loop: a read of the subtree (a new
// follow), or a Sync of the follow. Its one result comes on done.
type job struct {
	cancel context.CancelFunc
	done   chan result
}

type result struct {
	f      store.TreeFollow
	nodes  []store.Node
	synced bool
	err    error
}

// run is the Tree's loop: it takes the follow's changes into the view and
// hands events and snapshots out, never waiting for the receiver, until
// the Tree stops, and returns why.
func (t *treeLoop) run(ctx context.Context, events chan<- Event, snaps chan<- Snapshot) error {
	defer t.shutdown()
	t.rec.CacheStale(ctx, true) // until the first read is in
	t.startFollow(ctx, nil)
	sessionEnded := t.st.Context().Done()
	for {
		var ready <-chan struct{}
		if t.f != nil {
			cs, r, err := t.f.Changes()
			if err := t.apply(ctx, cs); err != nil {
				return err
			}
			ready = r
			if err != nil {
				if err := t.followEnded(ctx, err); err != nil {
					return err
				}
				continue
			}
		}
		var (
			evOut   chan<- Event
			ev      Event
			key     string
			snapOut chan<- Snapshot
			snap    Snapshot
			disc    <-chan struct{}
			jobDone <-chan result
		)
		if t.listed {
			if c, ok := t.stream.Next(t.cur); ok {
				evOut, ev, key = events, t.event(c), c.Key
			}
			if !t.taken {
				snapOut, snap = snaps, Snapshot{path: t.path, m: t.m, stale: t.stale}
			}
		}
		if t.f != nil && !t.stale {
			disc = t.disc
		}
		if t.job != nil {
			jobDone = t.job.done
		}
		select {
		case <-ready:
		case evOut <- ev:
			t.stream.Pop(key)
		case snapOut <- snap:
			t.taken = true
			t.m = t.m.thaw() // the receiver has its levels now
		case <-disc:
			t.markStale(ctx, true)
			t.startSync(ctx)
		case r := <-jobDone:
			t.job = nil
			if err := t.jobDone(ctx, r); err != nil {
				return err
			}
		case <-sessionEnded:
			recipe.SyncSession(t.st)
			return context.Cause(t.st.Context())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// cur returns the state of a key of the stream: a node of the view, or,
// for the marker, whether the view is current.
func (t *treeLoop) cur(k string) (*node, bool) {
	if k == marker {
		return nil, !t.stale
	}
	return t.m.get(k)
}

// event is the Event of the change c.
func (t *treeLoop) event(c recipe.Change[string, *node]) Event {
	switch {
	case c.Key == marker && c.Has:
		return Event{Type: Current}
	case c.Key == marker:
		return Event{Type: Stale}
	case !c.Had:
		return Event{Type: Created, Path: c.Key, Node: clone(c.New)}
	case !c.Has:
		return Event{Type: Deleted, Path: c.Key, Old: clone(c.Old)}
	}
	return Event{Type: Changed, Path: c.Key, Node: clone(c.New), Old: clone(c.Old)}
}

// put takes n into the view.
func (t *treeLoop) put(n store.Node) {
	old, had := t.m.get(n.Path)
	if had && same(old, &n) {
		return
	}
	t.stream.Note(n.Path, old, had)
	t.m = t.m.set(n.Path, &n)
	t.taken = false
}

// remove takes the node at p out of the view.
func (t *treeLoop) remove(p string) {
	old, had := t.m.get(p)
	if !had {
		return
	}
	t.stream.Note(p, old, true)
	t.m = t.m.del(p)
	t.taken = false
}

// apply takes the changes cs into the view.
func (t *treeLoop) apply(ctx context.Context, cs []store.TreeChange) error {
	if len(cs) == 0 {
		return nil
	}
	for _, c := range cs {
		if c.Type == store.EventDeleted {
			t.remove(c.Node.Path)
		} else {
			t.put(c.Node)
		}
	}
	t.rec.CacheChanged(ctx, len(cs), t.m.len())
	if t.m.len() > t.max {
		return t.tooMany()
	}
	return nil
}

func (t *treeLoop) tooMany() error {
	return fmt.Errorf("cache: tree %q: %w (%d)", t.path, ErrTooManyNodes, t.max)
}

// reconcile makes the view the nodes of a new read: what differs becomes
// events.
func (t *treeLoop) reconcile(nodes []store.Node) {
	if t.seen == nil {
		t.seen = map[string]struct{}{}
	}
	for _, n := range nodes {
		t.seen[n.Path] = struct{}{}
		t.put(n)
	}
	t.buf = t.buf[:0]
	t.m.each(func(k string, _ *node) bool {
		if _, ok := t.seen[k]; !ok {
			t.buf = append(t.buf, k)
		}
		return true
	})
	for _, p := range t.buf {
		t.remove(p)
	}
	clear(t.seen)
	t.buf = slices.Delete(t.buf, 0, len(t.buf)) // drop the strings
}

// markStale records that the view may be out of date (stale), or is
// current again.
func (t *treeLoop) markStale(ctx context.Context, stale bool) {
	if t.stale == stale {
		return
	}
	t.stream.Note(marker, nil, !t.stale)
	t.stale, t.taken = stale, false
	t.rec.CacheStale(ctx, stale)
}

// followEnded handles the end of the follow: a gap is read again, any
// other end stops the Tree.
func (t *treeLoop) followEnded(ctx context.Context, err error) error {
	t.f.Stop()
	t.f = nil
	t.stopJob()
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return t.tooMany()
	case errors.Is(err, store.ErrDisconnected):
		t.markStale(ctx, true)
		t.startFollow(ctx, err)
		return nil
	}
	recipe.SyncSession(t.st)
	if aerr := recipe.Alive(ctx, t.st); aerr != nil {
		return aerr
	}
	return fmt.Errorf("cache: tree %q: %w", t.path, err)
}

// jobDone takes the result of the job that ended.
func (t *treeLoop) jobDone(ctx context.Context, r result) error {
	switch {
	case r.f != nil:
		first := !t.listed
		t.f = r.f
		t.reconcile(r.nodes)
		t.rec.CacheRead(ctx, t.m.len(), !first, r.err)
		t.listed = true
		t.markStale(ctx, false)
		t.disc = t.st.Disconnected()
		return nil
	case r.synced && t.f != nil:
		// Every change before the Sync is in Changes now: they go
		// before Current.
		cs, _, _ := t.f.Changes()
		if err := t.apply(ctx, cs); err != nil {
			return err
		}
		t.markStale(ctx, false)
		t.disc = t.st.Disconnected()
		return nil
	case r.err != nil:
		if errors.Is(r.err, store.ErrTooLarge) {
			return t.tooMany()
		}
		recipe.SyncSession(t.st)
		if aerr := recipe.Alive(ctx, t.st); aerr != nil {
			return aerr
		}
		return fmt.Errorf("cache: tree %q: %w", t.path, r.err)
	}
	return nil
}

// startFollow starts the job that reads the subtree and follows it, for
// as long as it takes to get a connection; gap is why the last follow
// ended, if one did.
func (t *treeLoop) startFollow(ctx context.Context, gap error) {
	jctx, cancel := context.WithCancel(ctx)
	j := &job{cancel: cancel, done: make(chan result, 1)}
	t.job = j
	go func() {
		for attempt := 0; ; attempt++ {
			f, nodes, err := store.FollowTree(jctx, t.st, t.path, t.depth, t.max)
			if err == nil {
				j.done <- result{f: f, nodes: nodes, err: gap}
				return
			}
			if !recipe.RideOut(jctx, t.st, err, attempt) {
				j.done <- result{err: err}
				return
			}
		}
	}()
}

// startSync starts the job that waits, while the connection is lost,
// until the follow has caught up again (TreeFollow.Sync), retrying while
// it fails.
func (t *treeLoop) startSync(ctx context.Context) {
	t.stopJob()
	jctx, cancel := context.WithCancel(ctx)
	j := &job{cancel: cancel, done: make(chan result, 1)}
	t.job = j
	f := t.f
	go func() {
		for attempt := 0; ; attempt++ {
			if err := f.Sync(jctx); err == nil {
				j.done <- result{synced: true}
				return
			}
			if recipe.Pause(jctx, t.st, attempt) != nil {
				j.done <- result{}
				return
			}
		}
	}()
}

// stopJob stops the job under way, if any, and waits for it; a follow it
// started is stopped.
func (t *treeLoop) stopJob() {
	j := t.job
	if j == nil {
		return
	}
	t.job = nil
	j.cancel()
	if r := <-j.done; r.f != nil {
		r.f.Stop()
	}
}

// shutdown releases what the loop holds: its job, its follow.
func (t *treeLoop) shutdown() {
	t.stopJob()
	if t.f != nil {
		t.f.Stop()
		t.f = nil
	}
	if t.stale {
		t.rec.CacheStale(context.Background(), false) // a Tree that stopped is not counted
	}
}
