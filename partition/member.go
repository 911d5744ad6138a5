package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/identity"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Member is one member of a partition, from Join until it stops: it left
// (Leave, or its Run's ctx ended, or a shard's function failed), or it was
// lost (its session ended, its member node was deleted). See the package
// doc. Its methods are safe for concurrent use.
//
// The zero Member (and a nil one) has stopped: its Done is closed, and its
// Run and Leave fail with store.ErrInvalidArgument.
type Member struct {
	st     store.Store
	path   string
	id     string
	shards int
	opts   options
	rec    *telemetry.Recorder // of the shards' locks
	ms     *recipe.Hold        // the member's node

	leave     chan struct{} // closed by Leave: Run stops, and leaves
	leaveOnce gosync.Once
	hurry     chan struct{} // closed when Leave's ctx ends: release without the grace
	hurryOnce gosync.Once
	done      chan struct{} // closed once stopped: left or lost, every shard released
	stopOnce  gosync.Once
	lost      func() bool // stops watching the membership before Run

	mu      gosync.Mutex
	running bool           // Run was called
	owned   map[int]*Shard // the shards held now
	err     error          // why it stopped, set before done is closed
}

// Join makes st's session a member of the partition at path, which has
// shards shards, with id as its identity. It blocks for the few round trips
// of joining (ctx bounds them; the member then lasts until it stops,
// whatever becomes of ctx), and fails, leaving nothing behind, with an
// error wrapping store.ErrInvalidArgument (a nil st, shards outside [1,
// MaxShards], an empty id, a negative grace or retry delay, a nil option),
// store.ErrInvalidPath (a path no partition can have: invalid, the root, or
// too long or deep for its shards' directories), store.ErrTooLarge (an id
// over store.MaxDataSize), ErrKindMismatch (path, or its members'
// directory, holds another recipe's nodes: a lock's, a group's), ErrMismatch
// (a member there has another number of shards: every member must be given
// the same), ErrDuplicateID (a member there has the same id: a replica
// started twice, or restarted before its earlier session ended), ctx.Err(),
// or the session's cause. A lost connection is ridden out while ctx and the
// session live.
//
// The member takes no shard until Run: call it at once, since the others
// count the member in from Join on, and the shards the assignment gives it
// wait for it meanwhile.
func Join(ctx context.Context, st store.Store, path string, shards int, id string, opts ...Option) (*Member, error) {
	o := newOptions(opts)
	if err := o.check(st, path, shards, id); err != nil {
		return nil, joinErr(path, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, joinErr(path, err)
	}
	if err := checkPath(ctx, st, path); err != nil {
		return nil, joinErr(path, err)
	}
	k := &recipe.Setting{Marker: names.Partition, Key: 'k', Value: shards, Name: "shards"}
	ms, err := recipe.Acquire(ctx, st, &recipe.Spec{
		Dir: MembersDir(path), Prefix: k.Prefix(), Setting: k, Order: recipe.Unordered,
		Data: func(time.Time) []byte { return []byte(id) },
		Rec:  telemetry.New(o.tel, telemetry.KindGroup, MembersDir(path), ErrNodeDeleted),
		Hold: recipe.HoldOptions{Deleted: ErrNodeDeleted},
	})
	if err != nil {
		return nil, joinErr(path, recipe.CtxErr(ctx, err))
	}
	if err := unique(ctx, st, ms.Node(), id); err != nil {
		_, rerr := ms.Release(ctx, ErrLeft)
		return nil, joinErr(path, errors.Join(err, rerr))
	}
	m := &Member{
		st: st, path: path, id: id, shards: shards, opts: o, ms: ms,
		rec:   telemetry.New(o.tel, telemetry.KindShard, path, ErrNodeDeleted),
		leave: make(chan struct{}), hurry: make(chan struct{}), done: make(chan struct{}),
		owned: map[int]*Shard{},
	}
	// Until Run watches it, a lost membership stops the member here.
	m.lost = context.AfterFunc(ms.Context(), func() { m.stopIdle(m.lostErr()) })
	return m, nil
}

func joinErr(path string, err error) error {
	return fmt.Errorf("partition: join %q: %w", store.ShortPath(path), err)
}

// checkPath refuses a path that holds another recipe's nodes: a partition
// keeps nothing at its path but its members' and shards' directories.
func checkPath(ctx context.Context, st store.Store, path string) error {
	kids, err := recipe.Children(ctx, st, path)
	if errors.Is(err, store.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	return recipe.CheckFamily(path, kids, names.PartitionDirs)
}

// unique refuses the member node own, of id, when a member that joined
// before it has the same id: two of them would be assigned the same shards,
// and one would wait behind the other for each of them.
func unique(ctx context.Context, st store.Store, own store.Node, id string) error {
	dir := store.Parent(own.Path)
	kids, err := recipe.Children(ctx, st, dir)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if k.Seq >= own.Seq {
			break // kids are sorted by Seq
		}
		n, err := st.Get(ctx, store.Join(dir, k.Name))
		if errors.Is(err, store.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		if string(n.Data) == id {
			return fmt.Errorf("%w: %q is a member already (%q)", ErrDuplicateID, id, store.ShortPath(n.Path))
		}
	}
	return nil
}

// ID returns the member's id.
func (m *Member) ID() string {
	if m == nil {
		return ""
	}
	return m.id
}

// Path returns the path of the partition.
func (m *Member) Path() string {
	if m == nil {
		return ""
	}
	return m.path
}

// Done returns a channel that is closed when the member has stopped: it
// left or was lost, and has released every shard.
func (m *Member) Done() <-chan struct{} {
	if m == nil || m.done == nil {
		return closed
	}
	return m.done
}

var closed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Err returns nil while the member runs and, once it stopped, why: ErrLeft
// after Leave or the end of Run's ctx, the error a shard's function
// returned, the session's end (store.ErrSessionExpired, store.ErrClosed),
// or ErrNodeDeleted.
func (m *Member) Err() error {
	if m == nil || m.done == nil {
		return errZeroMember
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

var errZeroMember = fmt.Errorf("partition: member: %w: not made by Join", store.ErrInvalidArgument)

// Owned returns the numbers of the shards the member holds now, in order:
// those it was granted whose function runs, or whose grace runs after it
// was reassigned.
func (m *Member) Owned() []int {
	if m == nil || m.done == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]int, 0, len(m.owned))
	for i := range m.owned {
		ids = append(ids, i)
	}
	slices.Sort(ids)
	return ids
}

// Run works the member's shards: it contends for every shard the
// assignment gives the member, and calls fn once per grant, in a goroutine
// of its own, with the shard and a context derived from the shard's (see
// Shard.Context). The shard is released when fn returns; after it was
// reassigned or the member leaves, when fn returns or the grace passes,
// whichever is first. fn returning nil while its shard is still the
// member's gives the shard back: the member takes it again, with a new
// grant (and a greater token), no sooner than the retry delay later
// (WithRetryDelay). fn returning an error while its shard is still the
// member's stops the member, as errgroup's first error stops its group:
// the member leaves, every other shard's context ends with that error, and
// Run returns it. An error returned once the shard's context ended is the
// end of that work, not a failure.
//
// Run blocks until the member stops, and has waited for every fn it called
// to return. It returns nil when ctx ended or Leave was called: the member
// then left the assignment first (the others start to take its shards),
// and then released its shards as above. It returns the session's end
// (store.ErrSessionExpired, store.ErrClosed) or ErrNodeDeleted when the
// member was lost. Run may be called once; a second call fails with
// store.ErrInvalidArgument, and a call after the member stopped returns
// why it stopped.
func (m *Member) Run(ctx context.Context, fn func(ctx context.Context, s *Shard) error) error {
	if m == nil || m.done == nil {
		return fmt.Errorf("partition: run: %w", errZeroMember)
	}
	if fn == nil {
		return fmt.Errorf("partition: run %q: %w: nil function", store.ShortPath(m.path), store.ErrInvalidArgument)
	}
	select {
	case <-m.done:
		return m.runErr(m.Err()) // stopped already
	default:
	}
	m.mu.Lock()
	running := m.running
	m.running = true
	m.mu.Unlock()
	if running {
		return fmt.Errorf("partition: run %q: %w: the member runs already", store.ShortPath(m.path), store.ErrInvalidArgument)
	}
	if !m.lost() {
		<-m.done // stopped before Run
		return m.runErr(m.Err())
	}
	r := &run{m: m, fn: fn, failed: make(chan error, 1), workers: map[int]context.CancelCauseFunc{}}
	return m.runErr(r.run(ctx))
}

// runErr is what Run returns when the member stopped with err.
func (m *Member) runErr(err error) error {
	if errors.Is(err, ErrLeft) {
		return nil
	}
	return err
}

// Leave stops the member, and makes it leave: it leaves the assignment at
// once, so that the others start to take its shards, and then every shard
// it holds ends with ErrLeft and is released once its function returns,
// the grace passes or ctx ends, whichever is first (see Run). Leave blocks
// until then, and returns nil, or the failure to remove the member's node
// after ctx ended and a further second (the session then removes it as
// soon as the connection allows). It is idempotent, and makes a running
// Run return.
func (m *Member) Leave(ctx context.Context) error {
	if m == nil || m.done == nil {
		return fmt.Errorf("partition: leave: %w", errZeroMember)
	}
	m.leaveOnce.Do(func() { close(m.leave) })
	m.mu.Lock()
	running := m.running
	m.mu.Unlock()
	if !running && m.lost() {
		m.stopIdle(ErrLeft)
	}
	select {
	case <-m.done:
	case <-ctx.Done():
		m.hurryOnce.Do(func() { close(m.hurry) })
		<-m.done
	}
	if _, err := m.ms.Release(ctx, ErrLeft); err != nil && !errors.Is(err, holderr.ErrReleased) {
		return fmt.Errorf("partition: leave %q: %w", store.ShortPath(m.path), err)
	}
	return nil
}

// stopIdle stops a member that does not run, with cause.
func (m *Member) stopIdle(cause error) {
	if !errors.Is(cause, ErrLeft) {
		// Lost: its node is gone with the session, or is removed now.
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		_, _ = m.ms.Release(ended, cause)
	}
	m.stop(cause)
}

// stop records why the member stopped and closes Done, once.
func (m *Member) stop(cause error) {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		m.err = cause
		m.mu.Unlock()
		close(m.done)
	})
}

// lostErr is the error of a membership that ended by itself: the session's
// end, or ErrNodeDeleted.
func (m *Member) lostErr() error {
	recipe.SyncSession(m.st)
	if c := context.Cause(m.st.Context()); c != nil {
		return c
	}
	if c := context.Cause(m.ms.Context()); errors.Is(c, ErrLeft) {
		return ErrLeft
	}
	return ErrNodeDeleted
}

// run is one Run of a member.
type run struct {
	m       *Member
	fn      func(ctx context.Context, s *Shard) error
	failed  chan error // cap 1: the first error of a function
	workers map[int]context.CancelCauseFunc
	wg      gosync.WaitGroup // the workers
	fns     gosync.WaitGroup // the functions they call
}

// run follows the members and keeps one worker for each shard the
// assignment gives the member, until the member stops; it returns why.
func (r *run) run(ctx context.Context) error {
	m := r.m
	ids := runner.Start(context.WithoutCancel(ctx), func(ctx context.Context, out chan<- []string) error {
		return followIDs(ctx, m.st, MembersDir(m.path), m.shards, out)
	})
	var cause error
	for cause == nil {
		select {
		case list, ok := <-ids.C():
			if !ok {
				cause = ids.Err(nil)
				break
			}
			r.reconcile(ctx, list)
		case <-m.ms.Context().Done():
			cause = m.lostErr()
		case <-ctx.Done():
			cause = ErrLeft
		case <-m.leave:
			cause = ErrLeft
		case err := <-r.failed:
			cause = err
		}
	}
	_ = ids.Close(cause)
	return r.stop(ctx, cause)
}

// stop ends the run with cause: a member that leaves (cause is not its
// loss) leaves the assignment first, then every worker ends and releases
// its shard; stop returns once every function has returned.
func (r *run) stop(ctx context.Context, cause error) error {
	m := r.m
	if errors.Is(cause, ErrLeft) || m.ms.Context().Err() == nil {
		// Leaving: out of the others' assignment at once (one try, and
		// the cleanup grace: see recipe.Remove); the shards' locks
		// hold them until their work stops.
		ended, cancel := context.WithCancel(ctx)
		cancel()
		_, _ = m.ms.Release(ended, ErrLeft)
	}
	recipe.SyncSession(m.st)
	if c := context.Cause(m.st.Context()); c != nil {
		cause = c
	}
	for _, cancel := range r.workers {
		cancel(cause)
	}
	r.wg.Wait() // every lock released
	m.stop(cause)
	r.fns.Wait()
	return cause
}

// reconcile starts a worker for each shard ids assign the member that has
// none, and ends those of the shards it no longer assigns it.
func (r *run) reconcile(ctx context.Context, ids []string) {
	m := r.m
	if !slices.Contains(ids, m.id) {
		// The follower has not seen our own node yet (or it is gone,
		// which the membership reports): assume we are in.
		ids = append(ids, m.id)
	}
	owners, _ := Assign(ids, m.shards) // cannot fail: Join checked shards, and no id is empty
	for i, owner := range owners {
		cancel, running := r.workers[i]
		switch {
		case owner == m.id && !running:
			wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
			r.workers[i] = cancel
			r.wg.Go(func() { r.work(wctx, i) })
		case owner != m.id && running:
			cancel(ErrReassigned)
			delete(r.workers, i)
		}
	}
}

// work holds shard i while ctx lives: it contends for the shard's lock,
// runs the function on each grant, and contends again after a hold that
// ended while the shard is still the member's (a lost connection, a
// function that gave the shard back). It returns once ctx has ended and
// the shard is released.
func (r *run) work(ctx context.Context, i int) {
	m := r.m
	// The owner's node records who it is (the id as the identity
	// record's label) and, once granted, when: what "corral shards"
	// counts a shard's age from.
	// Data and Granted run in this goroutine, which Acquire runs in.
	rec, start := identity.NewEncoder(m.id), time.Time{}
	order := recipe.Predecessor
	order.Granted = func(ctx context.Context, st store.Store, own store.Node, _ int) error {
		ctx, cancel := context.WithTimeout(ctx, recipe.CleanupGrace)
		defer cancel()
		_, _ = st.Set(ctx, own.Path, rec.EncodeGranted(start, time.Now()), own.Version) // for display only: best effort
		return nil
	}
	spec := &recipe.Spec{
		Dir: shardDir(m.path, i), Prefix: names.Lock, Order: order, Rec: m.rec,
		Data: func(t time.Time) []byte { start = t; return rec.Encode(t) },
		Hold: recipe.HoldOptions{Deleted: ErrNodeDeleted, Disconnected: ErrDisconnected},
	}
	for attempt := 0; ctx.Err() == nil; {
		h, err := recipe.Acquire(ctx, m.st, spec)
		if err != nil {
			// Another recipe's nodes in the shard's directory, say:
			// try again while the shard is ours and the session
			// lives (a lost connection, Acquire rides out itself).
			m.log(ctx, "corral: shard not granted", slog.String("path", spec.Dir), slog.Int("attempt", attempt), slog.Any("error", err))
			if recipe.Pause(ctx, m.st, attempt) != nil {
				return
			}
			attempt++
			continue
		}
		attempt = 0
		switch r.hold(ctx, newShard(i, h)) {
		case failed:
			return // the member stops
		case gaveBack:
			if sleep(ctx, m.opts.retry) != nil {
				return
			}
		}
	}
}

// An outcome is how the work on a shard ended.
type outcome int

const (
	ended    outcome = iota // the shard's context ended: reassigned, lost, the member stops
	gaveBack                // the function returned nil while the shard was live
	failed                  // the function returned an error while the shard was live
)

// hold runs the function on s and releases s: when the function returns,
// or once s has ended by ctx's end (reassigned, the member stops) and then
// the function returns, the grace passes or Leave hurries, or at once when
// s was lost. It reports how the work ended.
func (r *run) hold(ctx context.Context, s *Shard) outcome {
	m := r.m
	m.setOwned(s, true)
	defer m.setOwned(s, false)
	stop := context.AfterFunc(ctx, func() { s.cancel(context.Cause(ctx)) })
	defer stop()
	ran := make(chan error, 1)
	r.fns.Go(func() { ran <- r.fn(checked{s.ctx, s}, s) })
	var err error
	returned := false
	select {
	case err = <-ran:
		returned = true
	case <-s.ctx.Done():
		err, returned = r.drain(s, ran)
	}
	live := s.ctx.Err() == nil
	cause := context.Cause(s.ctx)
	if live {
		cause = ErrReleased
		if err != nil {
			cause = err
		}
	}
	s.cancel(cause)
	// Released on ctx: once ctx has ended the removal still gets its
	// grace, and then the session's cleaner.
	_, _ = s.hold.Release(ctx, cause)
	switch {
	case !returned || !live:
		return ended
	case err != nil:
		select {
		case r.failed <- fmt.Errorf("partition: shard %d: %w", s.id, err):
		default:
		}
		return failed
	}
	return gaveBack
}

// drain waits, for a shard that has ended, until the function returns, or
// the grace passes, Leave hurries or the session ends; not at all for a
// shard that was lost (its hold ended: someone else may hold it already).
func (r *run) drain(s *Shard, ran <-chan error) (err error, returned bool) {
	if s.hold.Context().Err() != nil {
		return nil, false
	}
	t := time.NewTimer(r.m.opts.grace)
	defer t.Stop()
	select {
	case err = <-ran:
		return err, true
	case <-t.C:
	case <-r.m.hurry:
	case <-r.m.st.Context().Done():
	}
	return nil, false
}

// setOwned records s as held, or as no longer held.
func (m *Member) setOwned(s *Shard, held bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if held {
		m.owned[s.id] = s
	} else if m.owned[s.id] == s {
		delete(m.owned, s.id)
	}
}

func (m *Member) log(ctx context.Context, msg string, attrs ...slog.Attr) {
	if l := m.opts.tel.Logger; l != nil && ctx.Err() == nil {
		l.LogAttrs(ctx, slog.LevelDebug, msg, attrs...)
	}
}

// followIDs sends the ids of the members of dir on out as they change,
// until ctx or the session ends: the members' nodes that record the number
// of shards k and hold an id. Another node (another client's, a stray one)
// is no member that could work a shard, and one that records another
// number is being refused: it must disturb nobody.
func followIDs(ctx context.Context, st store.Store, dir string, k int, out chan<- []string) error {
	members := recipe.NewMembers(st, dir, names.Partitions, names.NoFamily)
	members.SkipOthers()
	return recipe.Follow(ctx, st, out, recipe.Follower[[]string]{
		Read: func(ctx context.Context) ([]string, []<-chan store.Event, error) {
			ms, ch, err := members.Read(ctx)
			if err != nil {
				return nil, nil, err
			}
			ids := make([]string, 0, len(ms))
			for _, mb := range ms {
				n, ok := names.SettingOf(store.Base(mb.Path), names.Partition, 'k')
				if ok && n == k && len(mb.Value) > 0 {
					ids = append(ids, string(mb.Value))
				}
			}
			return ids, []<-chan store.Event{ch}, nil
		},
		Equal:  slices.Equal[[]string],
		Failed: func(err error) error { return fmt.Errorf("partition: members of %q: %w", store.ShortPath(dir), err) },
	})
}

// sleep waits for d or until ctx ends.
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
