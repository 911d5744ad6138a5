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
		if err := ws[2].m.Err(); !errors.Is(err, store.ErrSessionExpired) && !errors.Is(err, partition.ErrMemberLost) {
			t.Errorf("Err of the expired member = %v; want store.ErrSessionExpired or ErrMemberLost", err)
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

// TestHandOver: a reassigned shard's context ends at once, and the next
// owner gets it only after the previous one releases it; without a
// Release, after the grace.
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
	set := recvSet(t, first, func(set []*partition.Shard) bool { return len(set) == k })

	second := join(t, sts[1], path, k, "b")
	// One shard moves to b: a's context for it ends at once, and b waits.
	var moved *partition.Shard
	for moved == nil {
		select {
		case <-set[0].Done():
			moved = set[0]
		case <-set[1].Done():
			moved = set[1]
		case <-time.After(timeout):
			t.Fatalf("no shard reassigned after %v", timeout)
		}
	}
	if cause := context.Cause(moved.Context()); !errors.Is(cause, partition.ErrReassigned) {
		t.Fatalf("cause of the moved shard = %v; want ErrReassigned", cause)
	}
	if grace == time.Hour {
		// b is queued behind a's node; a still holds it.
		backends.WaitChildren(t, sts[1], fmt.Sprintf("%s/shards/%d", path, moved.ID()), backends.Count(2))
		if err := moved.Release(ctxFor(t)); err != nil {
			t.Fatalf("Release = %v", err)
		}
	}
	got := recvSet(t, second, func(set []*partition.Shard) bool { return len(set) == 1 })
	if got[0].ID() != moved.ID() || got[0].Token() <= moved.Token() {
		t.Errorf("b got %v; want shard %d with a token above %d", got[0], moved.ID(), moved.Token())
	}
	if err := moved.Release(ctxFor(t)); err != nil {
		t.Errorf("second Release = %v", err)
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

// recvSet receives sets from m until one satisfies ok.
func recvSet(t testing.TB, m *partition.Member, ok func([]*partition.Shard) bool) []*partition.Shard {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case set, open := <-m.Shards():
			if !open {
				t.Fatalf("member %s stopped: %v", m.ID(), m.Err())
			}
			if ok(set) {
				return set
			}
		case <-timer.C:
			t.Fatalf("member %s: no wanted set after %v", m.ID(), timeout)
		}
	}
}

// TestLeave: a member that leaves ends its shards with ErrLeft, and the
// others take them.
func TestLeave(t *testing.T) {
	st := memstore.NewServer()
	a, bst := st.Open(), st.Open()
	defer a.Close()
	defer bst.Close()
	path := dir(t)
	ma := join(t, a, path, 4, "a", partition.WithGrace(time.Hour))
	set := recvSet(t, ma, func(set []*partition.Shard) bool { return len(set) == 4 })
	// a's owner stops work as each shard ends, and says so.
	causes := make(chan error, len(set))
	for _, s := range set {
		go func() {
			<-s.Done()
			causes <- context.Cause(s.Context())
			_ = s.Release(context.Background())
		}()
	}
	mb := join(t, bst, path, 4, "b")
	recvSet(t, mb, func(set []*partition.Shard) bool { return len(set) == 2 })
	left := backends.Async(func() error { return ma.Leave(ctxFor(t)) })
	count := map[error]int{}
	for range set {
		c := recv(t, "cause", causes)
		switch {
		case errors.Is(c, partition.ErrLeft):
			count[partition.ErrLeft]++
		case errors.Is(c, partition.ErrReassigned):
			count[partition.ErrReassigned]++
		default:
			t.Errorf("cause = %v; want ErrLeft or ErrReassigned", c)
		}
	}
	if count[partition.ErrLeft] != 2 || count[partition.ErrReassigned] != 2 {
		t.Errorf("causes %v; want 2 ErrReassigned (b joined), 2 ErrLeft", count)
	}
	if err := <-left; err != nil {
		t.Fatalf("Leave = %v", err)
	}
	if err := ma.Err(); !errors.Is(err, partition.ErrLeft) {
		t.Errorf("Err after Leave = %v; want ErrLeft", err)
	}
	recvSet(t, mb, func(set []*partition.Shard) bool { return len(set) == 4 })
	if err := ma.Leave(ctxFor(t)); err != nil {
		t.Errorf("second Leave = %v", err)
	}
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
	for _, m := range []*partition.Member{&zm, nm} {
		if err := m.Leave(ctx); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("zero Member Leave = %v; want ErrInvalidArgument", err)
		}
		if err := m.Err(); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("zero Member Err = %v; want ErrInvalidArgument", err)
		}
		if _, ok := <-m.Shards(); ok {
			t.Error("zero Member Shards open")
		}
		<-m.Done()
	}
	var zs partition.Shard
	var ns *partition.Shard
	for _, s := range []*partition.Shard{&zs, ns} {
		if err := s.Release(ctx); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("zero Shard Release = %v; want ErrInvalidArgument", err)
		}
		if c := context.Cause(s.Context()); !errors.Is(c, partition.ErrNotOwner) {
			t.Errorf("zero Shard cause = %v; want ErrNotOwner", c)
		}
		if s.Token() != -1 {
			t.Errorf("zero Shard Token = %d; want -1", s.Token())
		}
	}
}

// TestMemberWithoutID: a node in the members' group with no id (another
// client's, a stray one) is given no shards, which nobody would work: the
// one member works on all of them.
func TestMemberWithoutID(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	ctx := ctxFor(t)
	path := dir(t)
	stray, err := group.Join(ctx, st, partition.MembersDir(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Leave(ctx)
	tick := make(chan struct{}, 1)
	w := work(join(t, st, path, 4, "a"), newFence(), tick)
	waitBalanced(t, tick, []*worker{w}, 4)
}
