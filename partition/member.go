package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Member is one member of a partition, from Join to its end; see the
// package doc. Its methods are safe for concurrent use.
//
// A Member runs one goroutine that follows the group and one per shard it
// is assigned; they all exit before Leave returns, or after the member has
// stopped by itself (its session ended, its membership was lost), once the
// shards it held are released. The zero Member (and a nil one) has stopped:
// its Shards channel is closed and its Leave fails with
// store.ErrInvalidArgument.
type Member struct {
	st     store.Store
	path   string
	id     string
	shards int
	opts   options
	rec    *telemetry.Recorder
	ms     *group.Membership
	count  store.Node // the member's node in ShardCountDir

	l       *runner.Loop[[]*Shard]
	changed chan struct{} // cap 1: the owned set changed
	workers gosync.WaitGroup
	// hurry is closed when Leave's ctx ends: the shards are released
	// without waiting for the rest of the grace.
	hurry     chan struct{}
	hurryOnce gosync.Once

	mu    gosync.Mutex
	owned map[int]*Shard
}

// Join makes st's session a member of the partition at path, which has
// shards shards, with id as its identity, and starts taking the shards the
// assignment gives it (see the package doc). It blocks for the few round
// trips of joining the group (ctx bounds them; the member then runs until
// Leave or its session's end, whatever becomes of ctx) and fails, leaving
// nothing behind, with an error wrapping store.ErrInvalidArgument (a nil
// st, shards outside [1, MaxShards], an empty id, a negative grace),
// store.ErrInvalidPath (a path no partition can have: invalid, the root, or
// too long or deep for its shards' directories), store.ErrTooLarge (an id
// over store.MaxDataSize), ctx.Err(), or the session's cause, and with
// ErrMismatch when a member already there was given another number of
// shards: every member of a partition must be given the same.
//
// Two members with the same id are assigned the same shards: each shard is
// then held by one of them at a time, and the other waits.
func Join(ctx context.Context, st store.Store, path string, shards int, id string, opts ...Option) (*Member, error) {
	o := newOptions(opts)
	if err := o.check(st, path, shards, id); err != nil {
		return nil, fmt.Errorf("partition: join %q: %w", path, err)
	}
	count, err := claimCount(ctx, st, path, shards, id)
	if err != nil {
		return nil, fmt.Errorf("partition: join %q: %w", path, err)
	}
	gopts := []group.Option{group.WithLogger(o.tel.Logger), group.WithMeterProvider(o.tel.MeterProvider)}
	ms, err := group.Join(ctx, st, MembersDir(path), []byte(id), group.WithLogger(o.tel.Logger), group.WithMeterProvider(o.tel.MeterProvider))
	if err != nil {
		return nil, fmt.Errorf("partition: join %q: %w", path, errors.Join(err, recipe.Remove(ctx, st, nil, count)))
	}
	m := &Member{
		st: st, path: path, id: id, shards: shards, opts: o, ms: ms, count: count,
		rec:     telemetry.New(o.tel, telemetry.KindShard, path, ErrNodeDeleted),
		changed: make(chan struct{}, 1),
		hurry:   make(chan struct{}),
		owned:   map[int]*Shard{},
	}
	m.l = runner.Start(context.WithoutCancel(ctx), func(ctx context.Context, out chan<- []*Shard) error {
		return m.run(ctx, out, group.Watch(ctx, st, MembersDir(path), gopts...))
	})
	return m, nil
}

// ID returns the member's id.
func (m *Member) ID() string {
	if m == nil {
		return ""
	}
	return m.id
}

// Shards returns the channel on which the member sends the set of shards it
// owns now, sorted by shard number: first when it starts (empty), then
// after every change. A set not yet received when a newer one is known is
// replaced by it, so a receiver never falls behind; a shard in a set may
// have ended since (its Context says so). Release every shard received once
// its work has stopped, one that had ended before its work began included:
// a reassigned shard that was delivered waits for its Release (or the
// grace) before the next owner gets it. The channel is closed when the
// member has stopped.
func (m *Member) Shards() <-chan []*Shard { return m.loop().C() }

// Done returns a channel that is closed when the member has stopped, after
// its Shards channel.
func (m *Member) Done() <-chan struct{} { return m.loop().Done() }

// Err returns nil while the member runs and, once it stopped, why: ErrLeft
// after Leave, the session's end (store.ErrSessionExpired,
// store.ErrClosed), ErrMemberLost, or the error that stopped it.
func (m *Member) Err() error { return m.loop().Err(errZeroMember) }

var errZeroMember = fmt.Errorf("partition: member: %w: not made by Join", store.ErrInvalidArgument)

// loop returns the loop of m, nil for a nil Member.
func (m *Member) loop() *runner.Loop[[]*Shard] {
	if m == nil {
		return nil
	}
	return m.l
}

// Leave stops the member: every shard it owns is ended at once with
// ErrLeft and released when its owner calls Release, when the grace passes
// or when ctx ends, whichever comes first; then the member leaves the
// group, so that the others take its shards. Leave blocks until then, and
// returns nil, or the failure to remove the member's node after ctx ended
// and a further second (the session then removes it as soon as the
// connection allows). It is idempotent.
func (m *Member) Leave(ctx context.Context) error {
	l := m.loop()
	if l == nil {
		return fmt.Errorf("partition: leave: %w: member not made by Join", store.ErrInvalidArgument)
	}
	l.Stop(ErrLeft)
	select {
	case <-l.Done():
	case <-ctx.Done():
		m.hurryOnce.Do(func() { close(m.hurry) })
		<-l.Done()
	}
	if err := m.leaveNodes(ctx); err != nil {
		return fmt.Errorf("partition: leave %q: %w", m.path, err)
	}
	return nil
}

// leaveNodes removes the member's group node, and then its shard-count
// node, so that no member counts while its count is gone.
func (m *Member) leaveNodes(ctx context.Context) error {
	err := m.ms.Leave(ctx)
	return errors.Join(err, recipe.Remove(ctx, m.st, m.rec, m.count))
}

// run follows the group with w and keeps one worker for each shard the
// assignment gives the member, sending the shards it owns on out, until
// the member stops; it returns why.
func (m *Member) run(ctx context.Context, out chan<- []*Shard, w *group.Watcher) error {
	workers := map[int]context.CancelCauseFunc{}
	dirty := true
	var err error
	for err == nil {
		var send chan<- []*Shard
		var set []*Shard
		if dirty {
			send, set = out, m.snapshot()
		}
		select {
		case send <- set:
			dirty = false
			m.delivered(set)
		case <-m.changed:
			dirty = true
		case list, ok := <-w.Members():
			if !ok {
				err = w.Err()
				break
			}
			m.reconcile(ctx, list, workers)
		case <-m.ms.Done():
			err = context.Cause(m.ms.Context())
			if errors.Is(err, group.ErrNodeDeleted) {
				err = ErrMemberLost
			}
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
	}
	return m.stop(err, w, workers)
}

// stop ends every worker with cause, waits for them, and returns why the
// member stopped.
func (m *Member) stop(cause error, w *group.Watcher, workers map[int]context.CancelCauseFunc) error {
	recipe.SyncSession(m.st)
	if c := context.Cause(m.st.Context()); c != nil {
		cause = c
	}
	for _, cancel := range workers {
		cancel(cause)
	}
	m.workers.Wait()
	_ = w.Close()
	if !errors.Is(cause, ErrLeft) {
		// Stopped by itself: the node goes with the session, or is
		// already gone; otherwise it is removed within the cleanup
		// grace, or by the session's cleaner (Leave's own call then
		// waits for that).
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		_ = m.leaveNodes(ended)
	}
	return cause
}

// reconcile starts a worker for each shard list assigns the member that
// has none, and ends those of the shards it no longer assigns it.
func (m *Member) reconcile(ctx context.Context, list []group.Member, workers map[int]context.CancelCauseFunc) {
	ids := make([]string, 0, len(list))
	for _, gm := range list {
		// A node with no id (another client's, or a stray one) is no
		// member that could work a shard: it is given none.
		if len(gm.Value) > 0 {
			ids = append(ids, string(gm.Value))
		}
	}
	if !slices.Contains(ids, m.id) {
		// The watcher has not seen our own node yet (or it is gone,
		// which the membership reports): assume we are in.
		ids = append(ids, m.id)
	}
	owners, _ := Assign(ids, m.shards) // cannot fail: Join checked shards, and no id is empty
	for i, owner := range owners {
		cancel, running := workers[i]
		switch {
		case owner == m.id && !running:
			wctx, cancel := context.WithCancelCause(ctx)
			workers[i] = cancel
			m.workers.Go(func() { m.work(wctx, i) })
		case owner != m.id && running:
			cancel(ErrReassigned)
			delete(workers, i)
		}
	}
}

// snapshot returns the shards owned now, by number.
func (m *Member) snapshot() []*Shard {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := make([]*Shard, 0, len(m.owned))
	for _, s := range m.owned {
		set = append(set, s)
	}
	slices.SortFunc(set, func(a, b *Shard) int { return a.id - b.id })
	return set
}

// delivered marks the shards of a set the caller received.
func (m *Member) delivered(set []*Shard) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range set {
		s.delivered = true
	}
}

// setOwned records s as owned (or, with add false, no longer owned) and
// tells run. It reports whether s was delivered in a set.
func (m *Member) setOwned(s *Shard, add bool) (delivered bool) {
	m.mu.Lock()
	if add {
		m.owned[s.id] = s
	} else if m.owned[s.id] == s {
		delete(m.owned, s.id)
	}
	delivered = s.delivered
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
	return delivered
}

// work holds shard i while ctx lives: it contends for the shard's lock,
// hands out each grant as a Shard, and contends again after a hold that
// ended while the shard is still the member's (a lost connection, a
// Release). It returns once ctx has ended and the shard is released.
func (m *Member) work(ctx context.Context, i int) {
	spec := &recipe.Spec{
		Dir: shardDir(m.path, i), Prefix: names.Lock, Order: recipe.Predecessor, Rec: m.rec,
		Data: func(time.Time) []byte { return []byte(m.id) },
		Hold: recipe.HoldOptions{Deleted: ErrNodeDeleted, Disconnected: ErrDisconnected},
	}
	for attempt := 0; ctx.Err() == nil; {
		h, err := recipe.Acquire(ctx, m.st, spec)
		if err != nil {
			// Another recipe's nodes in the shard's directory, say:
			// try again while the shard is ours and the session
			// lives (a lost connection, Acquire rides out itself).
			if l := m.opts.tel.Logger; l != nil && ctx.Err() == nil {
				l.LogAttrs(ctx, slog.LevelDebug, "corral: shard not granted",
					slog.String("path", spec.Dir), slog.Int("attempt", attempt), slog.Any("error", err))
			}
			if recipe.Pause(ctx, m.st, attempt) != nil {
				return
			}
			attempt++
			continue
		}
		attempt = 0
		m.hold(ctx, newShard(i, h))
	}
}

// hold keeps s until it ends by itself or ctx ends, and then releases it:
// at once when it was lost or released or never delivered (nobody can
// have started work on it: no set held it), else when its owner calls
// Release or the grace passes.
func (m *Member) hold(ctx context.Context, s *Shard) {
	m.setOwned(s, true)
	select {
	case <-s.ctx.Done():
	case <-ctx.Done():
		s.cancel(context.Cause(ctx))
	}
	delivered := m.setOwned(s, false)
	cause := context.Cause(s.ctx)
	if delivered && (errors.Is(cause, ErrReassigned) || errors.Is(cause, ErrLeft)) {
		s.awaitRelease(m.st, m.opts.grace, m.hurry)
	}
	// Released on ctx: once ctx has ended the removal still gets its
	// grace, and then the session's cleaner.
	_, _ = s.hold.Release(ctx, cause)
	close(s.finished)
}
