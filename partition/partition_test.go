package partition_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	corralsync "github.com/corral-go/corral/sync"
)

// TestSpread: 16 shards over 3 members, each owned once and balanced; a
// member's session expires and its shards move to the others, with
// greater tokens; it comes back with the same id and gets its shards back.
func TestSpread(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const k = 16
		sts := backends.Open(t, b, 4)
		path := dir(t)
		f := newFence()
		defer f.check(t)
		tick := make(chan struct{}, 1)
		var ws []*worker
		for i := range 3 {
			ws = append(ws, work(join(t, sts[i], path, k, fmt.Sprint("m", i)), f, tick))
		}
		waitBalanced(t, tick, ws, k)
		before := ws[2].shards()

		f.gone("m2")
		b.Expire(t, sts[2])
		select {
		case <-ws[2].m.Done():
		case <-time.After(timeout):
			t.Fatalf("member of an expired session still running after %v", timeout)
		}
		// etcd's client may see its member node deleted (the lease
		// revoked) before it learns that the lease is gone.
		if err := ws[2].m.Err(); !errors.Is(err, store.ErrSessionExpired) && !errors.Is(err, partition.ErrNodeDeleted) {
			t.Errorf("Err of the expired member = %v; want store.ErrSessionExpired or ErrNodeDeleted", err)
		}
		waitBalanced(t, tick, ws[:2], k)

		back := work(join(t, sts[3], path, k, "m2"), f, tick)
		ws[2] = back
		waitBalanced(t, tick, ws, k)
		got := back.shards()
		for s, token := range before {
			if _, ok := got[s]; !ok {
				t.Errorf("restarted m2 lacks shard %d it had", s)
			} else if got[s] <= token {
				t.Errorf("shard %d: token %d after the restart, not above %d", s, got[s], token)
			}
		}
		for _, w := range ws {
			if err := w.m.Leave(ctxFor(t)); err != nil {
				t.Errorf("Leave = %v", err)
			}
			<-w.done
		}
	})
}

// grant is one call of a function Run made: its shard, and a channel the
// test closes to let the function return once the shard's context ended.
type grant struct {
	s      *partition.Shard
	cause  chan error    // the shard's cause, once its context ended
	finish chan struct{} // closed by the test: the function returns
}

// runGrants runs m, sending each grant on the returned channel; each
// function waits for its shard's context to end, says why, and then for
// the test to let it return (finish), or for the test's end.
func runGrants(t testing.TB, m *partition.Member) (<-chan *grant, <-chan error) {
	grants := make(chan *grant, 64)
	over := make(chan struct{})
	t.Cleanup(func() { close(over) }) // before the member leaves: see join
	ran := backends.Async(func() error {
		return m.Run(context.Background(), func(ctx context.Context, s *partition.Shard) error {
			g := &grant{s: s, cause: make(chan error, 1), finish: make(chan struct{})}
			grants <- g
			<-ctx.Done()
			g.cause <- context.Cause(ctx)
			select {
			case <-g.finish:
			case <-over:
			}
			return nil
		})
	})
	return grants, ran
}

// TestHandOver: a reassigned shard's context ends at once, and the next
// owner gets it only once the previous one's work on it stopped (its
// function returned); when it does not, after the grace.
func TestHandOver(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, grace := range []time.Duration{time.Hour, 50 * time.Millisecond} {
			t.Run(fmt.Sprint("grace=", grace), func(t *testing.T) { handOver(t, b, grace) })
		}
	})
}

func handOver(t *testing.T, b storetest.Backend, grace time.Duration) {
	const k = 2
	sts := backends.Open(t, b, 2)
	path := dir(t)
	first := join(t, sts[0], path, k, "a", partition.WithGrace(grace))
	agrants, _ := runGrants(t, first)
	ga := []*grant{recv(t, "grant", agrants), recv(t, "grant", agrants)}
	defer func() {
		for _, g := range ga {
			closeOnce(g.finish)
		}
	}()

	second := join(t, sts[1], path, k, "b")
	bgrants, _ := runGrants(t, second)
	// One shard moves to b: a's context for it ends at once, and b waits.
	var moved *grant
	var cause error
	select {
	case cause = <-ga[0].cause:
		moved = ga[0]
	case cause = <-ga[1].cause:
		moved = ga[1]
	case <-time.After(timeout):
		t.Fatalf("no shard reassigned after %v", timeout)
	}
	if !errors.Is(cause, partition.ErrReassigned) {
		t.Fatalf("cause of the moved shard = %v; want ErrReassigned", cause)
	}
	if grace == time.Hour {
		// b is queued behind a's node; a still holds it.
		backends.WaitChildren(t, sts[1], fmt.Sprintf("%s/shards/%d", path, moved.s.ID()), backends.Count(2))
		select {
		case g := <-bgrants:
			t.Fatalf("b granted %v while a's work on it runs", g.s)
		default:
		}
		close(moved.finish)
	}
	got := recv(t, "b's grant", bgrants)
	defer closeOnce(got.finish)
	if got.s.ID() != moved.s.ID() || got.s.Token() <= moved.s.Token() {
		t.Errorf("b got %v; want shard %d with a token above %d", got.s, moved.s.ID(), moved.s.Token())
	}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// recv receives from ch within timeout.
func recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("%s: nothing after %v", what, timeout)
	}
	panic("unreachable")
}

// TestLeave: a member that leaves leaves the assignment at once, so that
// the others line up for its shards while its work on them still runs; its
// shards end with ErrLeft, and the others get each once its work stopped.
// Run returns nil, and Err says ErrLeft.
func TestLeave(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		path := dir(t)
		ma := join(t, sts[0], path, 4, "a", partition.WithGrace(time.Hour))
		agrants, aran := runGrants(t, ma)
		var ga []*grant
		for range 4 {
			ga = append(ga, recv(t, "grant", agrants))
		}
		type ended struct {
			g *grant
			c error
		}
		ends := make(chan ended, 4)
		for _, g := range ga {
			go func() { ends <- ended{g, <-g.cause} }()
		}
		mb := join(t, sts[1], path, 4, "b")
		bgrants, _ := runGrants(t, mb)
		var gb []*grant
		defer func() {
			for _, g := range gb {
				closeOnce(g.finish)
			}
		}()
		// Two of a's shards move to b, once a's work on them stops.
		for range 2 {
			e := recv(t, "end", ends)
			if !errors.Is(e.c, partition.ErrReassigned) {
				t.Errorf("cause = %v; want ErrReassigned", e.c)
			}
			close(e.g.finish)
			gb = append(gb, recv(t, "b's grant", bgrants))
		}
		left := backends.Async(func() error { return ma.Leave(ctxFor(t)) })
		// a is out of the assignment before its work stops: b lines up
		// behind each of a's two other shards.
		for range 2 {
			e := recv(t, "end", ends)
			if !errors.Is(e.c, partition.ErrLeft) {
				t.Errorf("cause = %v; want ErrLeft", e.c)
			}
			backends.WaitChildren(t, sts[1], fmt.Sprintf("%s/shards/%d", path, e.g.s.ID()), backends.Count(2))
			close(e.g.finish)
			got := recv(t, "b's grant", bgrants)
			gb = append(gb, got)
			if got.s.ID() != e.g.s.ID() || got.s.Token() <= e.g.s.Token() {
				t.Errorf("b got %v; want shard %d with a token above %d", got.s, e.g.s.ID(), e.g.s.Token())
			}
		}
		if err := recv(t, "Leave", left); err != nil {
			t.Fatalf("Leave = %v", err)
		}
		if err := recv(t, "Run", aran); err != nil {
			t.Errorf("Run after Leave = %v; want nil", err)
		}
		if err := ma.Err(); !errors.Is(err, partition.ErrLeft) {
			t.Errorf("Err after Leave = %v; want ErrLeft", err)
		}
		if err := ma.Leave(ctxFor(t)); err != nil {
			t.Errorf("second Leave = %v", err)
		}
	})
}

// TestGiveBack: a function that returns nil while its shard is the
// member's gives the shard back: its lock is released at once, and the
// member takes it again, with a greater token, after the retry delay.
func TestGiveBack(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		path := dir(t)
		m := join(t, st, path, 1, "a", partition.WithRetryDelay(100*time.Millisecond))
		grants := make(chan *partition.Shard, 4)
		calls := 0
		ran := backends.Async(func() error {
			return m.Run(context.Background(), func(ctx context.Context, s *partition.Shard) error {
				grants <- s
				if calls++; calls == 1 {
					return nil // gives it back
				}
				<-ctx.Done()
				return nil
			})
		})
		first := recv(t, "grant", grants)
		begun := time.Now()
		second := recv(t, "grant", grants)
		if d := time.Since(begun); d < 100*time.Millisecond {
			t.Errorf("shard taken again %v after it was given back; want the retry delay (100 ms) at least", d)
		}
		if second.Token() <= first.Token() {
			t.Errorf("tokens %d, then %d; want them to grow", first.Token(), second.Token())
		}
		if c := context.Cause(first.Context()); !errors.Is(c, partition.ErrReleased) {
			t.Errorf("cause of the shard given back = %v; want ErrReleased", c)
		}
		if err := m.Leave(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
		if err := recv(t, "Run", ran); err != nil {
			t.Errorf("Run = %v; want nil", err)
		}
	})
}

// TestRunError: a function that returns an error while its shard is the
// member's stops the member, as errgroup does: every other shard's context
// ends with the error, the member leaves, and Run returns it.
func TestRunError(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		path := dir(t)
		m := join(t, sts[0], path, 3, "a")
		errBroken := errors.New("broken")
		causes := make(chan error, 3)
		started := make(chan struct{}, 3)
		ran := backends.Async(func() error {
			return m.Run(context.Background(), func(ctx context.Context, s *partition.Shard) error {
				if s.ID() == 1 {
					// Fail once the other two work: a shard not
					// granted yet when the member stops is never
					// run, so it would have no cause to report.
					for range 2 {
						select {
						case <-started:
						case <-ctx.Done():
							return ctx.Err()
						}
					}
					return errBroken
				}
				started <- struct{}{}
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return ctx.Err()
			})
		})
		if err := recv(t, "Run", ran); !errors.Is(err, errBroken) {
			t.Fatalf("Run = %v; want %v", err, errBroken)
		}
		for range 2 {
			if c := recv(t, "cause", causes); !errors.Is(c, errBroken) {
				t.Errorf("cause of another shard = %v; want %v", c, errBroken)
			}
		}
		if err := m.Err(); !errors.Is(err, errBroken) {
			t.Errorf("Err = %v; want %v", err, errBroken)
		}
		// It left: the next member gets all three shards.
		f := newFence()
		tick := make(chan struct{}, 1)
		w := work(join(t, sts[1], path, 3, "b"), f, tick)
		waitBalanced(t, tick, []*worker{w}, 3)
		f.check(t)
	})
}

// TestMisuse: bad input gets a typed error, never a panic or a hang.
func TestMisuse(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	ctx := ctxFor(t)
	cases := []struct {
		name   string
		st     store.Store
		path   string
		shards int
		id     string
		opts   []partition.Option
		want   error
	}{
		{"nil store", nil, "/p", 4, "a", nil, store.ErrInvalidArgument},
		{"root", st, "/", 4, "a", nil, store.ErrInvalidPath},
		{"relative", st, "p", 4, "a", nil, store.ErrInvalidPath},
		{"no shards", st, "/p", 0, "a", nil, store.ErrInvalidArgument},
		{"too many shards", st, "/p", partition.MaxShards + 1, "a", nil, store.ErrInvalidArgument},
		{"empty id", st, "/p", 4, "", nil, store.ErrInvalidArgument},
		{"negative grace", st, "/p", 4, "a", []partition.Option{partition.WithGrace(-1)}, store.ErrInvalidArgument},
		{"negative retry delay", st, "/p", 4, "a", []partition.Option{partition.WithRetryDelay(-1)}, store.ErrInvalidArgument},
		{"nil option", st, "/p", 4, "a", []partition.Option{nil}, store.ErrInvalidArgument},
		{"id too large", st, "/p", 4, strings.Repeat("x", store.MaxDataSize+1), nil, store.ErrTooLarge},
		// Room for a lock's nodes, not for the shards' directories.
		{"too long", st, "/" + strings.Repeat("p", store.MaxPathSize-recipe.NameRoom-2), 4, "a", nil, store.ErrInvalidPath},
		{"too deep", st, strings.Repeat("/p", store.MaxPathDepth-recipe.DepthRoom-1), 4, "a", nil, store.ErrInvalidPath},
	}
	for _, c := range cases {
		m, err := partition.Join(ctx, c.st, c.path, c.shards, c.id, c.opts...)
		if !errors.Is(err, c.want) || m != nil {
			t.Errorf("%s: Join = %v, %v; want nil, %v", c.name, m, err, c.want)
		}
	}
	if kids, _ := st.Children(ctx, "/p"); len(kids) != 0 {
		t.Errorf("failed Joins left %v", kids)
	}
	for _, c := range cases {
		if c.want != store.ErrInvalidPath {
			continue
		}
		if d := partition.MembersDir(c.path); d != "" {
			t.Errorf("%s: MembersDir = %q; want \"\"", c.name, d)
		}
		if d := partition.ShardsDir(c.path); d != "" {
			t.Errorf("%s: ShardsDir = %q; want \"\"", c.name, d)
		}
	}
	if d := partition.MembersDir("/p"); d != "/p/members" {
		t.Errorf("MembersDir(/p) = %q; want /p/members", d)
	}
	var zm partition.Member
	var nm *partition.Member
	noop := func(context.Context, *partition.Shard) error { return nil }
	for _, m := range []*partition.Member{&zm, nm} {
		if err := m.Leave(ctx); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("zero Member Leave = %v; want ErrInvalidArgument", err)
		}
		if err := m.Run(ctx, noop); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("zero Member Run = %v; want ErrInvalidArgument", err)
		}
		if err := m.Err(); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("zero Member Err = %v; want ErrInvalidArgument", err)
		}
		if o := m.Owned(); o != nil {
			t.Errorf("zero Member Owned = %v; want nil", o)
		}
		<-m.Done()
	}
	m := join(t, st, dir(t), 2, "a")
	if err := m.Run(ctx, nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Run(nil) = %v; want ErrInvalidArgument", err)
	}
	ran := backends.Async(func() error { return m.Run(ctx, noop) })
	backends.WaitChildren(t, st, partition.ShardsDir(m.Path()), backends.Count(2))
	if err := m.Run(ctx, noop); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("second Run = %v; want ErrInvalidArgument", err)
	}
	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, "Run", ran); err != nil {
		t.Errorf("Run = %v; want nil after Leave", err)
	}
	if err := m.Run(ctx, noop); err != nil {
		t.Errorf("Run after Leave = %v; want nil, the member left", err)
	}
	var zs partition.Shard
	var ns *partition.Shard
	for _, s := range []*partition.Shard{&zs, ns} {
		if c := context.Cause(s.Context()); !errors.Is(c, partition.ErrNotOwner) {
			t.Errorf("zero Shard cause = %v; want ErrNotOwner", c)
		}
		if s.Token() != -1 || !s.Guard().IsZero() {
			t.Errorf("zero Shard Token, Guard = %d, %v; want -1, the zero Guard", s.Token(), s.Guard())
		}
	}
}

// TestMemberWithoutID: a node among the members with no id (another
// client's, a stray one) is given no shards, which nobody would work: the
// one member works on all of them.
func TestMemberWithoutID(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	ctx := ctxFor(t)
	path := dir(t)
	if _, err := st.Create(ctx, partition.MembersDir(path)+"/stray", nil, store.Ephemeral); err != nil {
		t.Fatal(err)
	}
	tick := make(chan struct{}, 1)
	w := work(join(t, st, path, 4, "a"), newFence(), tick)
	waitBalanced(t, tick, []*worker{w}, 4)
}

// TestOtherRecipes: a partition refuses a path that holds another
// recipe's nodes (a lock's, a group's), and a group cannot join a
// partition's members or its path, with ErrKindMismatch.
func TestOtherRecipes(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		ctx := ctxFor(t)
		lock := dir(t) + "/lock"
		mx := corralsync.NewMutex(st, lock)
		if err := mx.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer mx.Unlock(ctx)
		if _, err := partition.Join(ctx, st, lock, 2, "a"); !errors.Is(err, partition.ErrKindMismatch) {
			t.Errorf("Join on a Mutex's path = %v; want ErrKindMismatch", err)
		}
		grp := dir(t) + "/group"
		gm, err := group.Join(ctx, st, grp, []byte("g"))
		if err != nil {
			t.Fatal(err)
		}
		defer gm.Leave(ctx)
		if _, err := partition.Join(ctx, st, grp, 2, "a"); !errors.Is(err, partition.ErrKindMismatch) {
			t.Errorf("Join on a group's path = %v; want ErrKindMismatch", err)
		}
		path := dir(t) + "/p"
		m := join(t, st, path, 2, "a")
		w := work(m, newFence(), make(chan struct{}, 1))
		defer func() { _ = m.Leave(ctx); <-w.done }()
		backends.WaitChildren(t, st, partition.ShardsDir(path), backends.Count(2))
		for _, p := range []string{partition.MembersDir(path), path} {
			if gm, err := group.Join(ctx, st, p, []byte("stray")); !errors.Is(err, group.ErrKindMismatch) {
				t.Errorf("group.Join(%s) = %v, %v; want ErrKindMismatch", p, gm, err)
			}
		}
	})
}

// TestStrayNode: a node of another recipe in a partition's members'
// directory (another client's lock, or a refused group.Join's member for
// as long as it lives) is no member: it stops nobody, and the members go on
// passing shards among themselves while it is there.
func TestStrayNode(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		ctx, path := ctxFor(t), dir(t)
		f, tick := newFence(), make(chan struct{}, 1)
		wa := work(join(t, sts[0], path, 2, "a"), f, tick)
		wb := work(join(t, sts[1], path, 2, "b"), f, tick)
		waitBalanced(t, tick, []*worker{wa, wb}, 2)
		if _, err := sts[0].Create(ctx, store.Join(partition.MembersDir(path), "lock-"), nil, store.EphemeralSequential); err != nil {
			t.Fatal(err)
		}
		// b leaves: a must read the members, the stray node among them,
		// to take b's shard.
		if err := wb.m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		recv(t, "b's Run", backends.Async(func() error { <-wb.done; return nil }))
		waitBalanced(t, tick, []*worker{wa}, 2)
		if err := wa.m.Err(); err != nil {
			t.Errorf("a stopped: %v", err)
		}
		f.check(t)
	})
}

// TestDuplicateID: a member that joins with the id of a member there is
// refused with ErrDuplicateID, and disturbs nobody; once the other is gone
// the id is welcome.
func TestDuplicateID(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		ctx, path := ctxFor(t), dir(t)
		a := join(t, sts[0], path, 2, "a")
		if m, err := partition.Join(ctx, sts[1], path, 2, "a"); !errors.Is(err, partition.ErrDuplicateID) || m != nil {
			t.Fatalf("Join with a's id = %v, %v; want nil, ErrDuplicateID", m, err)
		}
		if kids, err := sts[0].Children(ctx, partition.MembersDir(path)); err != nil || len(kids) != 1 {
			t.Errorf("members after the refused join = %v, %v; want a's node alone", kids, err)
		}
		if err := a.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		join(t, sts[1], path, 2, "a")
	})
}

// TestWatchMembers: a group's watcher reads a partition's members, their
// ids as values, in the order they joined.
func TestWatchMembers(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	ctx, path := ctxFor(t), dir(t)
	join(t, st, path, 2, "a")
	join(t, st, path, 2, "b")
	w := group.Watch(ctx, st, partition.MembersDir(path))
	defer w.Close()
	for {
		select {
		case ms, ok := <-w.Members():
			if !ok {
				t.Fatalf("watcher stopped: %v", w.Err())
			}
			if len(ms) == 2 && string(ms[0].Value) == "a" && string(ms[1].Value) == "b" {
				return
			}
		case <-ctx.Done():
			t.Fatal("no list of a and b")
		}
	}
}
