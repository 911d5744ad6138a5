package group_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	corralsync "github.com/corral-go/corral/sync"
)

func TestMain(m *testing.M) { backends.Main(m) }

// timeout bounds every wait of the tests.
const timeout = 20 * time.Second

func dir(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/grouptest/%s-%08x", name, rand.Uint32())
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// values returns the values of ms, in order.
func values(ms []group.Member) []string {
	vs := make([]string, len(ms))
	for i, m := range ms {
		vs[i] = string(m.Value)
	}
	return vs
}

// until receives lists from w until one has the values want, and returns
// it; it fails t when w stops or timeout passes first.
func until(t testing.TB, w *group.Watcher, want ...string) []group.Member {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var last []group.Member
	for {
		select {
		case ms, ok := <-w.Members():
			if !ok {
				t.Fatalf("watcher stopped (%v) before %q; last %q", w.Err(), want, values(last))
			}
			if slices.Equal(values(ms), want) {
				return ms
			}
			last = ms
		case <-timer.C:
			t.Fatalf("no list %q after %v; last %q", want, timeout, values(last))
		}
	}
}

func join(t testing.TB, st store.Store, path, value string, opts ...group.JoinOption) *group.Membership {
	t.Helper()
	m, err := group.Join(ctxFor(t), st, path, []byte(value), opts...)
	if err != nil {
		t.Fatalf("Join(%q, %q) = %v", path, value, err)
	}
	t.Cleanup(func() { _ = m.Leave(context.Background()) })
	return m
}

// waitEnd waits for m to end and checks that its cause is one of want.
func waitEnd(t testing.TB, m *group.Membership, want ...error) {
	t.Helper()
	select {
	case <-m.Done():
	case <-time.After(timeout):
		t.Fatalf("membership %s not ended after %v", m.Path(), timeout)
	}
	cause := context.Cause(m.Context())
	for _, w := range want {
		if errors.Is(cause, w) {
			return
		}
	}
	t.Fatalf("Cause(membership) = %v; want one of %v", cause, want)
}

// TestJoinWatchLeave: a watcher sees the members in the order they joined,
// and each change.
func TestJoinWatchLeave(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		path := dir(t)
		w := group.Watch(ctxFor(t), sts[0], path)
		defer w.Close()
		until(t, w) // no group yet: the empty list

		a := join(t, sts[0], path, "a")
		until(t, w, "a")
		bm := join(t, sts[1], path, "b")
		c := join(t, sts[2], path, "c")
		ms := until(t, w, "a", "b", "c")
		if !(a.Token() < bm.Token() && bm.Token() < c.Token()) {
			t.Errorf("tokens a %d, b %d, c %d; want increasing", a.Token(), bm.Token(), c.Token())
		}
		for i, m := range []*group.Membership{a, bm, c} {
			if ms[i].Path != m.Path() || ms[i].Token != m.Token() {
				t.Errorf("member %d = %v; want %s token %d", i, ms[i], m.Path(), m.Token())
			}
		}
		if err := bm.Leave(ctxFor(t)); err != nil {
			t.Fatalf("Leave = %v", err)
		}
		waitEnd(t, bm, group.ErrLeft)
		until(t, w, "a", "c")
		if err := bm.Leave(ctxFor(t)); err != nil {
			t.Errorf("second Leave = %v; want nil", err)
		}
		if a.Context().Err() != nil || c.Context().Err() != nil {
			t.Errorf("others' memberships ended: %v, %v", context.Cause(a.Context()), context.Cause(c.Context()))
		}
	})
}

// TestMembershipLost: a session's end and a deleted node end the
// membership with their cause, and the watcher drops the member.
func TestMembershipLost(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		path := dir(t)
		w := group.Watch(ctxFor(t), sts[0], path)
		defer w.Close()
		join(t, sts[0], path, "a")
		// Kept through a lost connection, so that the expiry is what
		// ends it (ZooKeeper's client sees the connection go first).
		bm := join(t, sts[1], path, "b", group.WithDisconnectPolicy(group.KeepOnDisconnect))
		c := join(t, sts[2], path, "c")
		until(t, w, "a", "b", "c")
		_ = bm.Context()

		b.Expire(t, sts[1])
		// etcd's client may see its node deleted (the lease revoked)
		// before it learns that the lease is gone.
		waitEnd(t, bm, store.ErrSessionExpired, group.ErrNodeDeleted)
		until(t, w, "a", "c")

		if err := sts[0].Delete(ctxFor(t), c.Path()); err != nil {
			t.Fatalf("Delete(%q) = %v", c.Path(), err)
		}
		waitEnd(t, c, group.ErrNodeDeleted)
		until(t, w, "a")
	})
}

// TestWatcherEnds: a watcher stops with the cause of its end, and Close
// needs no receiver.
func TestWatcherEnds(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		path := dir(t)
		join(t, sts[0], path, "a")

		w := group.Watch(ctxFor(t), sts[0], path)
		join(t, sts[1], path, "b") // nobody receives
		if err := w.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		if err := w.Err(); !errors.Is(err, group.ErrWatcherClosed) {
			t.Errorf("Err after Close = %v; want ErrWatcherClosed", err)
		}
		for range w.Members() {
		}

		w = group.Watch(ctxFor(t), sts[1], path)
		until(t, w, "a", "b")
		_ = sts[1].Close()
		select {
		case <-w.Done():
		case <-time.After(timeout):
			t.Fatalf("watcher still running %v after its session closed", timeout)
		}
		if err := w.Err(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Err after session close = %v; want store.ErrClosed", err)
		}
	})
}

// TestCoalesce: a receiver that falls behind gets the latest list, never a
// backlog.
func TestCoalesce(t *testing.T) {
	srv := memstore.NewServer()
	sts := make([]store.Store, 5)
	for i := range sts {
		sts[i] = srv.Open()
		defer sts[i].Close()
	}
	path := dir(t)
	w := group.Watch(ctxFor(t), sts[0], path)
	defer w.Close()
	until(t, w)
	var ms []*group.Membership
	for i, st := range sts {
		ms = append(ms, join(t, st, path, fmt.Sprint(i)))
	}
	for _, m := range ms[:4] {
		if err := m.Leave(ctxFor(t)); err != nil {
			t.Fatal(err)
		}
	}
	// Nine changes happened while nobody received. A coalescing watcher
	// holds one list at a time: the latest it knows, and at most one
	// more whose change it had not yet been told of when the receive
	// came; a queue of every change would deliver nine.
	got := 0
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for done := false; !done; {
		select {
		case ls := <-w.Members():
			got++
			done = slices.Equal(values(ls), []string{"4"})
		case <-timer.C:
			t.Fatalf("no list [4] after %v", timeout)
		}
	}
	if got > 2 {
		t.Errorf("received %d lists after nine changes; want at most 2", got)
	}
}

// TestMisuse: bad input gets a typed error, never a panic or a hang.
func TestMisuse(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	ctx := ctxFor(t)
	cases := []struct {
		name  string
		st    store.Store
		path  string
		value []byte
		opts  []group.JoinOption
		want  error
	}{
		{"nil store", nil, "/g", nil, nil, store.ErrInvalidArgument},
		{"root", st, "/", nil, nil, store.ErrInvalidPath},
		{"relative", st, "g", nil, nil, store.ErrInvalidPath},
		{"empty", st, "", nil, nil, store.ErrInvalidPath},
		{"large value", st, "/g", make([]byte, store.MaxDataSize+1), nil, store.ErrTooLarge},
		{"bad policy", st, "/g", nil, []group.JoinOption{group.WithDisconnectPolicy(7)}, store.ErrInvalidArgument},
		{"nil option", st, "/g", nil, []group.JoinOption{group.Option(nil)}, store.ErrInvalidArgument},
		{"nil join option", st, "/g", nil, []group.JoinOption{nil}, store.ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := group.Join(ctx, c.st, c.path, c.value, c.opts...)
			if !errors.Is(err, c.want) || m != nil {
				t.Errorf("Join = %v, %v; want nil, %v", m, err, c.want)
			}
			if c.value != nil {
				return
			}
			var wopts []group.Option
			for _, o := range c.opts {
				if o, ok := o.(group.Option); ok {
					wopts = append(wopts, o)
				}
			}
			if c.name == "bad policy" || c.name == "nil join option" {
				return // no watcher's option
			}
			w := group.Watch(ctx, c.st, c.path, wopts...)
			<-w.Done()
			if err := w.Err(); !errors.Is(err, c.want) {
				t.Errorf("Watch: Err = %v; want %v", err, c.want)
			}
			if _, ok := <-w.Members(); ok {
				t.Errorf("Watch: Members open")
			}
		})
	}

	var zero group.Membership
	var nilM *group.Membership
	for _, m := range []*group.Membership{&zero, nilM} {
		if err := m.Leave(ctx); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("zero Leave = %v; want ErrInvalidArgument", err)
		}
		if cause := context.Cause(m.Context()); !errors.Is(cause, group.ErrNotMember) {
			t.Errorf("zero Context cause = %v; want ErrNotMember", cause)
		}
		if m.Token() != -1 || m.Path() != "" || m.Value() != nil {
			t.Errorf("zero Token, Path, Value = %d, %q, %q; want -1, \"\", nil", m.Token(), m.Path(), m.Value())
		}
	}
	var zw group.Watcher
	var nilW *group.Watcher
	for _, w := range []*group.Watcher{&zw, nilW} {
		if err := w.Err(); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("zero Watcher Err = %v; want ErrInvalidArgument", err)
		}
		if err := w.Close(); err != nil {
			t.Errorf("zero Watcher Close = %v", err)
		}
		<-w.Done()
		if _, ok := <-w.Members(); ok {
			t.Errorf("zero Watcher Members open")
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := group.Join(cctx, st, "/g", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Join(cancelled) = %v; want context.Canceled", err)
	}
	if kids, _ := st.Children(ctx, "/g"); len(kids) != 0 {
		t.Errorf("cancelled Join left %v", kids)
	}

	m := corralsync.NewMutex(st, "/locked")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(ctx)
	if _, err := group.Join(ctx, st, "/locked", nil); !errors.Is(err, group.ErrKindMismatch) {
		t.Errorf("Join(lock path) = %v; want ErrKindMismatch", err)
	}
	w := group.Watch(ctx, st, "/locked")
	<-w.Done()
	if err := w.Err(); !errors.Is(err, group.ErrKindMismatch) {
		t.Errorf("Watch(lock path): Err = %v; want ErrKindMismatch", err)
	}
}

// TestDisconnectPolicy: under LoseOnDisconnect a lost connection ends the
// membership; under KeepOnDisconnect, the default, it survives it.
func TestDisconnectPolicy(t *testing.T) {
	srv := memstore.NewServer()
	st := srv.Open()
	defer st.Close()
	path := dir(t)
	lose := join(t, st, path, "lose", group.WithDisconnectPolicy(group.LoseOnDisconnect))
	keep := join(t, st, path, "keep", group.WithDisconnectPolicy(group.KeepOnDisconnect))
	byDefault := join(t, st, path, "default")
	for _, m := range []*group.Membership{lose, keep, byDefault} {
		_ = m.Context()
	}
	st.Disconnect()
	waitEnd(t, lose, group.ErrDisconnected)
	st.Reconnect()
	for _, m := range []*group.Membership{keep, byDefault} {
		if cause := context.Cause(m.Context()); cause != nil {
			t.Errorf("membership %q ended by a lost connection: %v", m.Value(), cause)
		}
	}
}

// TestWatchSkipsDirectories: a persistent node under a group's path (a
// directory: a partition's shards, another group below it) is no member;
// only sessions' nodes are, as every client's members are ephemeral.
func TestWatchSkipsDirectories(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		ctx := ctxFor(t)
		path := dir(t)
		if _, err := st.Create(ctx, path+"/sub", []byte("not a member"), store.Persistent); err != nil {
			t.Fatal(err)
		}
		join(t, st, path+"/sub/inner", "b")
		join(t, st, path, "a")
		w := group.Watch(ctx, st, path)
		defer w.Close()
		select {
		case ms, ok := <-w.Members():
			if !ok {
				t.Fatalf("watcher stopped: %v", w.Err())
			}
			if !slices.Equal(values(ms), []string{"a"}) {
				t.Errorf("Members = %q; want [a]", values(ms))
			}
		case <-time.After(timeout):
			t.Fatalf("no members after %v", timeout)
		}
	})
}

// TestSetValue: a member changes its value while it is a member, and every
// watcher sends the list with the new one, also for a value another
// client writes into its member's node (Curator's setThisData); once the
// membership has ended, SetValue fails with its cause.
func TestSetValue(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		ctx, path := ctxFor(t), dir(t)
		w := group.Watch(ctx, sts[2], path)
		defer w.Close()
		a := join(t, sts[0], path, "a")
		bm := join(t, sts[1], path, "b")
		before := until(t, w, "a", "b")
		for _, v := range []string{"a2", "a3"} {
			if err := a.SetValue(ctx, []byte(v)); err != nil {
				t.Fatalf("SetValue(%q) = %v; want nil", v, err)
			}
			ms := until(t, w, v, "b")
			if ms[0].Path != before[0].Path || ms[0].Token != before[0].Token {
				t.Errorf("member after SetValue = %v; want the same node %s, token %d", ms[0], before[0].Path, before[0].Token)
			}
			if got := string(a.Value()); got != v {
				t.Errorf("Value() = %q; want %q", got, v)
			}
		}
		// Another client's member node, written by that client.
		if _, err := sts[1].Set(ctx, bm.Path(), []byte("b2"), store.AnyVersion); err != nil {
			t.Fatal(err)
		}
		until(t, w, "a3", "b2")
		// A watcher that starts now reads the values as they are.
		w2 := group.Watch(ctx, sts[0], path)
		defer w2.Close()
		until(t, w2, "a3", "b2")

		if err := a.SetValue(ctx, make([]byte, store.MaxDataSize+1)); !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("SetValue(too large) = %v; want %v", err, store.ErrTooLarge)
		}
		ended, end := context.WithCancel(ctx)
		end()
		if err := a.SetValue(ended, []byte("x")); !errors.Is(err, context.Canceled) {
			t.Errorf("SetValue(ended ctx) = %v; want %v", err, context.Canceled)
		}
		for _, m := range []*group.Membership{nil, new(group.Membership)} {
			if err := m.SetValue(ctx, []byte("x")); !errors.Is(err, store.ErrInvalidArgument) {
				t.Errorf("SetValue on %#v = %v; want %v", m, err, store.ErrInvalidArgument)
			}
		}
		if err := a.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.SetValue(ctx, []byte("x")); !errors.Is(err, group.ErrLeft) {
			t.Errorf("SetValue after Leave = %v; want %v", err, group.ErrLeft)
		}
		until(t, w, "b2")
		// A node deleted by someone else.
		if err := sts[2].Delete(ctx, bm.Path()); err != nil {
			t.Fatal(err)
		}
		if err := bm.SetValue(ctx, []byte("x")); !errors.Is(err, group.ErrNodeDeleted) {
			t.Errorf("SetValue of a deleted member = %v; want %v", err, group.ErrNodeDeleted)
		}
		c := join(t, sts[0], path, "c")
		sts[0].Close()
		if err := c.SetValue(ctx, []byte("x")); !errors.Is(err, store.ErrClosed) {
			t.Errorf("SetValue after the session closed = %v; want %v", err, store.ErrClosed)
		}
	})
}
