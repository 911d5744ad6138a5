package group

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Member is one member of a group as a Watcher sees it.
type Member struct {
	// Path is the member's node.
	Path string
	// Value is the value it joined with (the node's data).
	Value []byte
	// Token is its node's fencing token (store.Node.Fence: the Seq, on
	// ZooKeeper plus the directory's creation zxid), the same as its
	// Membership's: members are listed by Token, the order they joined
	// in. On ZooKeeper another client's member whose node is not
	// sequential (Curator's GroupMember, kazoo's Party) has no order of
	// creation and Token 0: such members are listed first, by node name.
	Token int64
}

func (m Member) String() string {
	return fmt.Sprintf("%s (token %d, value %q)", m.Path, m.Token, m.Value)
}

func equal(a, b []Member) bool {
	return slices.EqualFunc(a, b, func(x, y Member) bool {
		return x.Path == y.Path && x.Token == y.Token && bytes.Equal(x.Value, y.Value)
	})
}

// Watch reports the members of the group at path as they change, on the
// Watcher's Members channel. The first list sent is the members now (empty
// when there are none, or no group at path yet); then a new list is sent
// after every change: a member joined or went, or changed its value
// ([Membership.SetValue], Curator's setThisData). A list not yet received
// when the watcher learns it is out of date is replaced by the newer one,
// so a slow receiver never sees a member already known to be gone, and
// changes faster than a round trip may be merged. The watcher watches the
// group's directory and each member's node (one watch each, set again
// only after it fired), and reads a member's value when it first lists it
// and after each change.
//
// Watch returns at once. The watcher runs in a goroutine of its own until
// ctx ends, the session ends, Close is called, or a read fails for a reason
// other than a lost connection (which is waited out); then Members is closed
// and Err says why. A nil store, an invalid path or an unknown option give a
// Watcher that has stopped already, with Err wrapping
// store.ErrInvalidArgument or store.ErrInvalidPath. Watch is safe for
// concurrent use and needs no membership: any session can watch. It also
// reads the members of a partition (package partition), at its path's
// "members", whose values are the members' ids.
func Watch(ctx context.Context, st store.Store, path string, opts ...Option) *Watcher {
	o := newOptions(opts)
	if err := o.check(st, path); err != nil {
		return &Watcher{l: runner.Stopped[[]Member](fmt.Errorf("group: watch %q: %w", store.ShortPath(path), err))}
	}
	g := &watch{path: path, log: o.tel.Logger, rec: telemetry.New(o.tel, telemetry.KindGroup, path, ErrNodeDeleted),
		members: recipe.NewMembers(st, path, names.Groups, names.Partitions), st: st}
	return &Watcher{l: runner.Start(ctx, g.run)}
}

// Watcher follows the members of a group; see Watch. Its methods are safe
// for concurrent use. The zero Watcher (and a nil one) has stopped.
type Watcher struct{ l *runner.Loop[[]Member] }

// Members returns the channel the watcher sends the member lists on. It is
// closed when the watcher has stopped; Err then says why. Each list is the
// receiver's own.
func (w *Watcher) Members() <-chan []Member { return w.loop().C() }

// Done returns a channel that is closed when the watcher has stopped, after
// its Members channel.
func (w *Watcher) Done() <-chan struct{} { return w.loop().Done() }

// Err returns nil while the watcher runs and, once it stopped, why: the
// cause of its ctx, the end of the session (store.ErrSessionExpired,
// store.ErrClosed), ErrWatcherClosed after Close, or the error that stopped
// it. For the zero Watcher it returns an error wrapping
// store.ErrInvalidArgument.
func (w *Watcher) Err() error { return w.loop().Err(errZeroWatcher) }

var errZeroWatcher = fmt.Errorf("group: watcher: %w: not made by Watch", store.ErrInvalidArgument)

// Close stops the watcher and waits until it has stopped. It does not need
// the Members channel to be drained. It is idempotent and returns nil.
func (w *Watcher) Close() error { return w.loop().Close(ErrWatcherClosed) }

// loop returns the loop of w, nil for a nil Watcher.
func (w *Watcher) loop() *runner.Loop[[]Member] {
	if w == nil {
		return nil
	}
	return w.l
}

// watch is the state of one Watcher's goroutine.
type watch struct {
	st      store.Store
	path    string
	log     *slog.Logger
	rec     *telemetry.Recorder
	members *recipe.Members
}

// run sends the members on out as they change, until ctx or the session
// ends or a read fails for good, and returns why.
func (g *watch) run(ctx context.Context, out chan<- []Member) error {
	g.members.FollowValues(ctx)
	return recipe.Follow(ctx, g.st, out, recipe.Follower[[]Member]{
		Read:  g.current,
		Equal: equal,
		Copy:  clone,
		Changed: func(ctx context.Context, cur []Member, first bool) {
			g.rec.GroupSeen(ctx, len(cur), !first)
			if g.log != nil {
				g.log.LogAttrs(ctx, slog.LevelDebug, "corral: group changed",
					slog.String("path", g.path), slog.Int("members", len(cur)))
			}
		},
		Failed: func(err error) error { return fmt.Errorf("group: watch %q: %w", store.ShortPath(g.path), err) },
	})
}

// ordered is 0 for a member with no order of creation, 1 for the others.
func ordered(m Member) int {
	if m.Token == 0 {
		return 0
	}
	return 1
}

// clone returns a copy of ms that shares nothing with it.
func clone(ms []Member) []Member {
	c := make([]Member, len(ms))
	for i, m := range ms {
		c[i] = Member{Path: m.Path, Value: bytes.Clone(m.Value), Token: m.Token}
	}
	return c
}

// current returns the members now and the watches that fire when they may
// have changed: a member joined or went, or a member's value changed.
func (g *watch) current(ctx context.Context) ([]Member, []<-chan store.Event, error) {
	read, stale, err := g.members.ReadAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	ms := make([]Member, len(read))
	for i, m := range read {
		ms[i] = Member{Path: m.Path, Value: m.Value, Token: m.Token}
	}
	// The members with no order of creation (Token 0) first, by name as
	// the store lists them: it lists them among those with Seq 0, which
	// on ZooKeeper is also a directory's first sequential node.
	slices.SortStableFunc(ms, func(a, b Member) int {
		return cmp.Compare(ordered(a), ordered(b))
	})
	return ms, stale, nil
}
