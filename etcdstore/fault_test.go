package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// timeout bounds every wait of these tests.
const timeout = 30 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, b *etcdbackend.Backend) *etcdstore.Store {
	t.Helper()
	return b.Open(t).(*etcdstore.Store)
}

// waitDone waits for ch to be closed.
func waitDone(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(timeout):
		t.Fatalf("%s: not done after %v", what, timeout)
	}
}

// waitEvent waits for the one event of a watch.
func waitEvent(t *testing.T, what string, ch <-chan store.Event) store.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed without an event", what)
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("%s: no event after %v", what, timeout)
	}
	return store.Event{}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// retry calls f until it succeeds or fails with something other than
// ErrDisconnected, within timeout.
func retry(t *testing.T, ctx context.Context, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if !errors.Is(err, store.ErrDisconnected) || time.Now().After(deadline) {
			t.Fatalf("%s = %v", what, err)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		}
	}
}

// A lease revoked on the server ends the session: Context is cancelled with
// ErrSessionExpired, its ephemeral nodes vanish for others, every call fails.
func TestLeaseRevoked(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	a, other := open(t, b), open(t, b)
	ctx := ctxFor(t)
	n := must[store.Node](t)(a.Create(ctx, "/revoked/lock-", nil, store.EphemeralSequential))
	_, _, gone, err := other.ExistsW(ctx, n.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RevokeLease(ctx, a.Lease()); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, "watch on the revoked node", gone); ev.Type != store.EventDeleted {
		t.Errorf("event = %+v; want deleted", ev)
	}
	waitDone(t, "Context", a.Context().Done())
	if cause := context.Cause(a.Context()); !errors.Is(cause, store.ErrSessionExpired) {
		t.Errorf("Cause = %v; want ErrSessionExpired", cause)
	}
	if _, err := a.Get(ctx, "/"); !errors.Is(err, store.ErrSessionExpired) {
		t.Errorf("Get after revoke = %v; want ErrSessionExpired", err)
	}
	if _, err := other.Get(ctx, n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get(revoked node) = %v; want ErrNoNode", err)
	}
}

// A partitioned client ends its session before the server expires the
// lease, so no one else can be granted a lock while the old holder still
// believes it holds it; and the session's deadline holds even when the
// timer that enforces it runs late.
func TestSessionEndsBeforeServerExpiry(t *testing.T) {
	c := etcdserver.Start(t, 1)

	// K frozen sessions at once, each watched by another session: each
	// frozen Store's Context is cancelled before its node's deletion by the
	// server's expiry reaches the watcher. Both moments are read on this
	// process's clock as they are observed.
	t.Run("margin", func(t *testing.T) {
		t.Parallel()
		const k = 12
		b := etcdbackend.New(c, etcdstore.WithTTL(2*time.Second))
		ctx := ctxFor(t)
		type run struct {
			a           *etcdstore.Store
			ended, seen chan time.Time
			ev          chan store.Event
		}
		runs := make([]run, k)
		for i := range runs {
			a, other := open(t, b), open(t, b)
			n := must[store.Node](t)(a.Create(ctx, fmt.Sprintf("/partition/%d/lock-", i), nil, store.EphemeralSequential))
			_, _, gone, err := other.ExistsW(ctx, n.Path)
			if err != nil {
				t.Fatal(err)
			}
			r := run{a: a, ended: make(chan time.Time, 1), seen: make(chan time.Time, 1), ev: make(chan store.Event, 1)}
			context.AfterFunc(a.Context(), func() { r.ended <- time.Now() })
			go func() {
				select {
				case ev := <-gone:
					r.seen <- time.Now()
					r.ev <- ev
				case <-ctx.Done():
				}
			}()
			runs[i] = r
		}
		for _, r := range runs {
			b.Freeze(t, r.a)
		}
		minMargin := time.Duration(1<<63 - 1)
		for i, r := range runs {
			var seen, ended time.Time
			select {
			case seen = <-r.seen:
			case <-ctx.Done():
				t.Fatalf("run %d: the watcher never saw the node go", i)
			}
			if ev := <-r.ev; ev.Type != store.EventDeleted {
				t.Fatalf("run %d: event = %+v; want deleted", i, ev)
			}
			select {
			case ended = <-r.ended:
			default:
				t.Fatalf("run %d: server expired the lease while the client's session was still live", i)
			}
			margin := seen.Sub(ended)
			if margin <= 0 {
				t.Errorf("run %d: Context cancelled %v after the watcher saw the node go", i, -margin)
			}
			minMargin = min(minMargin, margin)
			if cause := context.Cause(r.a.Context()); !errors.Is(cause, store.ErrSessionExpired) {
				t.Errorf("run %d: Cause = %v; want ErrSessionExpired", i, cause)
			}
			select {
			case <-r.a.Disconnected():
			default:
				t.Errorf("run %d: Disconnected() open after the session ended", i)
			}
			b.Reconnect(t, r.a)
		}
		t.Logf("%d runs: Context cancelled at least %v before the watcher saw the node go", k, minMargin)
	})

	// The keepalive loop's timer is held back as the deadline passes (a
	// loaded machine can delay it as long): the first call after the
	// deadline still fails with ErrSessionExpired, and ends the session,
	// where a renewal sent by the call would have revived it, since the
	// server has not expired the lease yet.
	t.Run("call after the deadline", func(t *testing.T) {
		t.Parallel()
		passed, release := holdExpiry()
		b := etcdbackend.New(c, etcdstore.WithTTL(2*time.Second), etcdstore.WithExpiryHook(passed.hook))
		a := open(t, b)
		defer release()
		ctx := ctxFor(t)
		n := must[store.Node](t)(a.Create(ctx, "/deadline/call/e", nil, store.Ephemeral))
		b.Freeze(t, a)
		waitDone(t, "deadline", passed.ch)
		b.Reconnect(t, a)
		if _, err := a.Get(ctx, n.Path); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("Get after the deadline = %v; want ErrSessionExpired", err)
		}
		checkExpired(t, a)
	})

	// A reply that arrives after the deadline does not count as a success,
	// even with the timer held back: the server may have expired the lease
	// before it answered.
	t.Run("reply after the deadline", func(t *testing.T) {
		t.Parallel()
		passed, release := holdExpiry()
		b := etcdbackend.New(c, etcdstore.WithTTL(2*time.Second), etcdstore.WithAttemptTimeout(timeout),
			etcdstore.WithExpiryHook(passed.hook))
		var armed atomic.Bool
		held := make(chan struct{})
		a := b.OpenHooked(t, etcdbackend.Hooks{Reply: func(ctx context.Context, method string) {
			if method != "/etcdserverpb.KV/Range" || !armed.CompareAndSwap(true, false) {
				return
			}
			close(held)
			select {
			case <-passed.ch:
			case <-ctx.Done():
			}
		}})
		defer release()
		ctx := ctxFor(t)
		n := must[store.Node](t)(a.Create(ctx, "/deadline/reply/e", nil, store.Ephemeral))
		armed.Store(true)
		got := make(chan error, 1)
		go func() {
			_, err := a.Get(ctx, n.Path)
			got <- err
		}()
		waitDone(t, "Get's reply", held)
		b.Freeze(t, a) // no renewal from now on
		var err error
		select {
		case err = <-got:
		case <-time.After(timeout):
			t.Fatal("Get not done")
		}
		if !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("Get answered after the deadline = %v; want ErrSessionExpired", err)
		}
		b.Reconnect(t, a)
		checkExpired(t, a)
	})
}

// deadlinePassed is closed by its hook, an expiry hook of the keepalive
// loop, when the loop's timer finds the deadline passed.
type deadlinePassed struct {
	ch   chan struct{}
	once sync.Once
	hold chan struct{}
}

func (d *deadlinePassed) hook() {
	d.once.Do(func() { close(d.ch) })
	<-d.hold // released by the test, before the Store is closed
}

// holdExpiry returns an expiry hook that holds the keepalive loop until
// release is called; release is idempotent.
func holdExpiry() (*deadlinePassed, func()) {
	d := &deadlinePassed{ch: make(chan struct{}), hold: make(chan struct{})}
	return d, sync.OnceFunc(func() { close(d.hold) })
}

// checkExpired checks that a's session ended by its deadline, as Context
// and Disconnected report it.
func checkExpired(t *testing.T, a *etcdstore.Store) {
	t.Helper()
	if cause := context.Cause(a.Context()); !errors.Is(cause, store.ErrSessionExpired) || !strings.Contains(cause.Error(), "not renewed within its TTL") {
		t.Errorf("Cause = %v; want ErrSessionExpired for a missed deadline", cause)
	}
	select {
	case <-a.Disconnected():
	default:
		t.Errorf("Disconnected() open after the session ended")
	}
}

// A cut connection (closed, then let through again at once) costs neither
// the session nor a pending watch.
func TestCutConnection(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	a, other := open(t, b), open(t, b)
	ctx := ctxFor(t)
	e := must[store.Node](t)(a.Create(ctx, "/cut/e", nil, store.Ephemeral))
	_, _, watch, err := a.ExistsW(ctx, "/cut/w")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b.Cut(t, a)
	}
	must[store.Node](t)(other.Create(ctx, "/cut/w", nil, store.Persistent))
	if ev := waitEvent(t, "watch across a cut", watch); ev.Type != store.EventCreated {
		t.Errorf("event = %+v; want created", ev)
	}
	retry(t, ctx, "Get after the cut", func() error {
		n, err := a.Get(ctx, e.Path)
		if err == nil && n.Owner != a.SessionID() {
			t.Errorf("Owner = %d; want %d", n.Owner, a.SessionID())
		}
		return err
	})
	if err := a.Context().Err(); err != nil {
		t.Fatalf("session ended by a cut: %v", context.Cause(a.Context()))
	}

	// Refused for a while, shorter than the TTL: disconnected, not expired.
	disc := a.Disconnected()
	b.Disconnect(t, a)
	waitDone(t, "Disconnected", disc)
	// A call waits for the connection, within its ctx.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = a.Get(short, e.Path)
	cancel()
	if !errors.Is(err, store.ErrDisconnected) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get while refused = %v; want ErrDisconnected or the deadline", err)
	}
	b.Reconnect(t, a)
	retry(t, ctx, "Get after reconnect", func() error { _, err := a.Get(ctx, e.Path); return err })
	if err := a.Context().Err(); err != nil {
		t.Fatalf("session ended by a short disconnection: %v", context.Cause(a.Context()))
	}
	select {
	case <-a.Disconnected():
		t.Errorf("Disconnected() closed after a successful call")
	default:
	}
}

// A watch survives compaction: when its stream breaks and the revision it
// would resume from was compacted meanwhile, it re-reads and reports what
// changed, or keeps waiting when nothing did.
func TestCompaction(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	raw := c.Client(t)
	ctx := ctxFor(t)
	compact := func() {
		t.Helper()
		for i := range 20 {
			if _, err := raw.Put(ctx, fmt.Sprintf("/compact/noise/%d", i), "x"); err != nil {
				t.Fatal(err)
			}
		}
		resp := must[*clientv3.GetResponse](t)(raw.Get(ctx, "/"))
		if _, err := raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("while waiting", func(t *testing.T) {
		a := open(t, b)
		_, _, ch, err := a.ExistsW(ctx, "/compact/a")
		if err != nil {
			t.Fatal(err)
		}
		compact()
		must[*clientv3.PutResponse](t)(raw.Put(ctx, "/compact/a", ""))
		if ev := waitEvent(t, "watch after compaction", ch); ev.Type != store.EventCreated {
			t.Errorf("event = %+v; want created", ev)
		}
	})

	t.Run("change missed while disconnected", func(t *testing.T) {
		a := open(t, b)
		_, _, ch, err := a.ExistsW(ctx, "/compact/b")
		if err != nil {
			t.Fatal(err)
		}
		b.Disconnect(t, a)
		must[*clientv3.PutResponse](t)(raw.Put(ctx, "/compact/b", ""))
		compact()
		b.Reconnect(t, a)
		if ev := waitEvent(t, "watch resumed after compaction", ch); ev.Type != store.EventCreated {
			t.Errorf("event = %+v; want created", ev)
		}
	})

	t.Run("no change while disconnected", func(t *testing.T) {
		a := open(t, b)
		_, _, ch, err := a.ExistsW(ctx, "/compact/c")
		if err != nil {
			t.Fatal(err)
		}
		cw, ok := store.Store(a).(store.ChildrenWatcher)
		if !ok {
			t.Fatal("no ChildrenWatcher")
		}
		must[store.Node](t)(a.Create(ctx, "/compact/dir/x", nil, store.Persistent))
		_, kids, err := cw.ChildrenW(ctx, "/compact/dir")
		if err != nil {
			t.Fatal(err)
		}
		b.Disconnect(t, a)
		compact()
		b.Reconnect(t, a)
		retry(t, ctx, "Get after reconnect", func() error { _, err := a.Get(ctx, "/compact"); return err })
		select {
		case ev := <-ch:
			t.Fatalf("event %+v without a change", ev)
		case ev := <-kids:
			t.Fatalf("children event %+v without a change", ev)
		default:
		}
		must[*clientv3.PutResponse](t)(raw.Put(ctx, "/compact/c", ""))
		if ev := waitEvent(t, "watch after a compaction it slept through", ch); ev.Type != store.EventCreated {
			t.Errorf("event = %+v; want created", ev)
		}
		must[*clientv3.PutResponse](t)(raw.Put(ctx, "/compact/dir/y", ""))
		if ev := waitEvent(t, "children watch after compaction", kids); ev.Type != store.EventChildrenChanged {
			t.Errorf("event = %+v; want children changed", ev)
		}
	})
}

// Killing the leader of a 3-member cluster while sessions and watches are
// live costs no session (a new leader extends the leases) and no watch event:
// a watch fires on the next change or reports ErrDisconnected, never hangs.
// A release (Delete) retried on ErrDisconnected, as the recipes do, gets
// through soon after a new leader is elected: no attempt waits for etcd's
// request timeout (7 s), only for the attempt timeout. The killed member
// comes back and serves again.
func TestKillLeader(t *testing.T) {
	c := etcdserver.Start(t, 3)
	b := etcdbackend.New(c)
	ctx := ctxFor(t)
	var sessions []*etcdstore.Store
	var watches []<-chan store.Event
	for i := range 3 {
		s := open(t, b)
		sessions = append(sessions, s)
		must[store.Node](t)(s.Create(ctx, fmt.Sprintf("/kill/e%d", i), nil, store.Ephemeral))
		_, _, ch, err := s.ExistsW(ctx, "/kill/w")
		if err != nil {
			t.Fatal(err)
		}
		watches = append(watches, ch)
	}
	holder, waiter := sessions[0], sessions[1]
	lock := must[store.Node](t)(holder.Create(ctx, "/kill/lock/n-", nil, store.EphemeralSequential))
	_, _, released, err := waiter.ExistsW(ctx, lock.Path)
	if err != nil {
		t.Fatal(err)
	}
	leader := c.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	start := time.Now()
	leader.Kill()
	t.Logf("killed %s in %v", leader.Name, time.Since(start))

	// Each attempt returns within the attempt timeout.
	const slack = 500 * time.Millisecond
	bounded := func(what string, f func() error) func() error {
		return func() error {
			t0 := time.Now()
			err := f()
			if d := time.Since(t0); d > etcdstore.DefaultAttemptTimeout+slack {
				t.Errorf("%s took %v (%v); want at most the attempt timeout %v (+ %v slack)", what, d, err, etcdstore.DefaultAttemptTimeout, slack)
			}
			return err
		}
	}
	attempts := 0
	retry(t, ctx, "Delete after the kill", bounded("Delete after the kill", func() error {
		attempts++
		err := holder.Delete(ctx, lock.Path)
		if errors.Is(err, store.ErrNoNode) && attempts > 1 {
			return nil // an earlier attempt's
		}
		return err
	}))
	deleted := time.Since(start)
	// The next holder could be granted once the waiter sees the node go.
	for {
		ev := waitEvent(t, "waiter's watch across the kill", released)
		if ev.Type == store.EventDeleted {
			break
		}
		if !errors.Is(ev.Err, store.ErrDisconnected) {
			t.Fatalf("waiter's event %+v; want deleted or ErrDisconnected", ev)
		}
		var exists bool
		retry(t, ctx, "waiter's ExistsW", func() error {
			var err error
			exists, _, released, err = waiter.ExistsW(ctx, lock.Path)
			return err
		})
		if !exists {
			break
		}
	}
	t.Logf("release applied %v after the kill (%d attempts); the waiter saw it %v after the kill (etcd's request timeout alone is 7 s)",
		deleted, attempts, time.Since(start))

	writer := sessions[0]
	retry(t, ctx, "Create after the kill", bounded("Create after the kill", func() error {
		_, err := writer.Create(ctx, "/kill/w", nil, store.Persistent)
		if errors.Is(err, store.ErrNodeExists) {
			return nil // an earlier attempt whose reply was lost
		}
		return err
	}))
	t.Logf("created after %v", time.Since(start))
	for i, ch := range watches {
		ev := waitEvent(t, fmt.Sprintf("watch %d across the kill", i), ch)
		t.Logf("watch %d: %+v after %v", i, ev, time.Since(start))
		switch {
		case ev.Err == nil && ev.Type == store.EventCreated:
		case errors.Is(ev.Err, store.ErrDisconnected):
			// Served by the killed member or cancelled for lack of a
			// leader: the caller re-checks, as recipes do.
			exists, _, _, err := sessions[i].ExistsW(ctx, "/kill/w")
			for errors.Is(err, store.ErrDisconnected) {
				exists, _, _, err = sessions[i].ExistsW(ctx, "/kill/w")
			}
			if err != nil || !exists {
				t.Errorf("re-check after %v = %v, %v; want true", ev.Err, exists, err)
			}
		default:
			t.Errorf("watch %d: event %+v; want created or ErrDisconnected", i, ev)
		}
	}
	for i, s := range sessions {
		if err := s.Context().Err(); err != nil {
			t.Errorf("session %d ended by the kill: %v", i, context.Cause(s.Context()))
		}
		retry(t, ctx, "Get(own ephemeral)", func() error {
			_, err := s.Get(ctx, fmt.Sprintf("/kill/e%d", i))
			return err
		})
	}

	if err := leader.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted after %v", time.Since(start))
	cli := c.Client(t, leader.ClientURL)
	deadline := time.Now().Add(timeout)
	for {
		resp, err := cli.Get(ctx, "/kill/w")
		if err == nil && len(resp.Kvs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted member: Get = %v, %v", resp, err)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}

// Contenders written by etcd's own concurrency.Mutex under the same prefix
// sort beside corral's by Seq (CreateRevision), and the two exclude each
// other.
func TestInteropConcurrencyMutex(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	a := open(t, b)
	ctx := ctxFor(t)
	ours := must[store.Node](t)(a.Create(ctx, "/interop/lock/c-", nil, store.EphemeralSequential))

	cli := c.Client(t)
	sess, err := concurrency.NewSession(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	m := concurrency.NewMutex(sess, "/interop/lock")
	if err := m.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Fatalf("etcd Mutex.TryLock while corral's contender is first = %v; want ErrLocked", err)
	}
	// TryLock removed its key; Lock leaves it queued behind ours.
	locked := make(chan error, 1)
	go func() { locked <- m.Lock(ctx) }()
	var kids []store.Child
	deadline := time.Now().Add(timeout)
	for len(kids) < 2 {
		kids = must[[]store.Child](t)(a.Children(ctx, "/interop/lock"))
		if time.Now().After(deadline) {
			t.Fatalf("etcd's contender never appeared: %v", kids)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	if kids[0].Name != ours.Name() || kids[0].Seq != ours.Seq || kids[1].Name != fmt.Sprintf("%x", sess.Lease()) {
		t.Errorf("Children = %v; want ours (%s) first, then etcd's (%x)", kids, ours.Name(), sess.Lease())
	}
	select {
	case err := <-locked:
		t.Fatalf("etcd Mutex locked while corral's contender is first: %v", err)
	default:
	}
	if err := a.Delete(ctx, ours.Path); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-locked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(timeout):
		t.Fatal("etcd Mutex not granted after corral's contender left")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A watch served by a member cut off from the majority of its cluster
// fails with ErrDisconnected (the member cancels require-leader watches
// once it has had no leader for three election timeouts) instead of
// hanging; the session is reported disconnected, and survives once the
// quorum is back within its TTL.
func TestMemberWithoutQuorum(t *testing.T) {
	c := etcdserver.Start(t, 3)
	var m *etcdserver.Member
	var others []*etcdserver.Member
	for _, x := range c.Members {
		if m == nil && !x.IsLeader() {
			m = x
		} else {
			others = append(others, x)
		}
	}
	cli := c.Client(t, m.ClientURL)
	ctx := ctxFor(t)
	s, err := etcdstore.Open(ctx, cli, etcdstore.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, _, ch, err := s.ExistsW(ctx, "/quorum/w")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, x := range others {
		x.Kill()
	}
	ev := waitEvent(t, "watch on a member without quorum", ch)
	t.Logf("watch failed after %v", time.Since(start))
	if !errors.Is(ev.Err, store.ErrDisconnected) {
		t.Errorf("event = %+v; want ErrDisconnected", ev)
	}
	waitDone(t, "Disconnected", s.Disconnected())
	t.Logf("disconnected after %v", time.Since(start))
	for _, x := range others {
		if err := x.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("restarted after %v", time.Since(start))
	retry(t, ctx, "ExistsW after the quorum is back", func() error {
		_, _, ch, err = s.ExistsW(ctx, "/quorum/w")
		return err
	})
	t.Logf("watching again after %v", time.Since(start))
	if _, err := c.Client(t).Put(ctx, "/quorum/w", ""); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, "watch after the quorum is back", ch); ev.Type != store.EventCreated {
		t.Errorf("event = %+v; want created", ev)
	}
	if err := s.Context().Err(); err != nil {
		t.Errorf("session ended: %v", context.Cause(s.Context()))
	}
}

// ChildrenW has no gap either: a child created while the watch is being
// set is in the list or reported.
func TestChildrenWatchNoGap(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	a, other := open(t, b), open(t, b)
	ctx := ctxFor(t)
	for i := range 40 {
		dir := fmt.Sprintf("/nogap/%d", i)
		must[store.Node](t)(a.Create(ctx, dir, nil, store.Persistent))
		created := make(chan error, 1)
		go func() {
			_, err := other.Create(ctx, dir+"/kid", nil, store.Persistent)
			created <- err
		}()
		kids, ch, err := a.ChildrenW(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-created; err != nil {
			t.Fatal(err)
		}
		if len(kids) == 1 {
			continue
		}
		if ev := waitEvent(t, fmt.Sprintf("round %d", i), ch); ev.Type != store.EventChildrenChanged {
			t.Errorf("round %d: event %+v; want children changed", i, ev)
		}
	}
}

// CreateAndList whose reply is lost yields one node, and its list.
func TestCreateAndListLostReply(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	a := open(t, b)
	ctx := ctxFor(t)
	first := must[store.Node](t)(a.Create(ctx, "/lost/l/c-", nil, store.EphemeralSequential))
	b.LoseNextCreateReply(t, a)
	n, kids, err := a.CreateAndList(ctx, "/lost/l/c-", []byte("x"), store.EphemeralSequential)
	if err != nil {
		t.Fatalf("CreateAndList after a lost reply = %v", err)
	}
	if len(kids) != 2 || kids[0].Name != first.Name() || kids[1].Name != n.Name() || kids[1].Seq != n.Seq {
		t.Errorf("CreateAndList = %+v, %v; want the node after %s", n, kids, first.Name())
	}
	if got := must[[]store.Child](t)(a.Children(ctx, "/lost/l")); len(got) != 2 {
		t.Errorf("Children = %v; want 2 nodes", got)
	}
}

// A Store made by Dial owns its client and closes it; one made by Open
// leaves its client alone.
func TestDialOwnsClient(t *testing.T) {
	c := etcdserver.Start(t, 1)
	ctx := ctxFor(t)
	s, err := etcdstore.Dial(ctx, c.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	must[store.Node](t)(s.Create(ctx, "/dial/e", nil, store.Ephemeral))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Client().Ctx().Err() == nil {
		t.Errorf("Dial's client still open after Close")
	}
	cli := c.Client(t)
	o, err := etcdstore.Open(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
	resp, err := cli.Get(ctx, "/dial/e")
	if err != nil || resp.Count != 0 {
		t.Errorf("Get(ephemeral of a closed session) = %v, %v; want no key, and Open's client still usable", resp, err)
	}
}

// A lock held only by etcd's concurrency.Mutex, which never writes its
// prefix key, still lists as a directory of contenders, so that corral
// waits behind it.
func TestInteropPrefixWithoutKey(t *testing.T) {
	c := etcdserver.Start(t, 1)
	a := open(t, etcdbackend.New(c))
	ctx := ctxFor(t)
	sess, err := concurrency.NewSession(c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	m := concurrency.NewMutex(sess, "/interop/bare")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	kids, err := a.Children(ctx, "/interop/bare")
	if err != nil || len(kids) != 1 || kids[0].Name != fmt.Sprintf("%x", sess.Lease()) {
		t.Errorf("Children(prefix with no key) = %v, %v; want etcd's contender", kids, err)
	}
	cw := any(a).(store.ChildrenWatcher)
	kids, ev, err := cw.ChildrenW(ctx, "/interop/bare")
	if err != nil || len(kids) != 1 {
		t.Fatalf("ChildrenW(prefix with no key) = %v, %v; want etcd's contender", kids, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ev:
		if e.Type != store.EventChildrenChanged {
			t.Errorf("event %+v; want children-changed", e)
		}
	case <-time.After(timeout):
		t.Fatal("no event after etcd's contender left")
	}
	if _, err := a.Children(ctx, "/interop/bare"); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Children after the last contender left = %v; want ErrNoNode", err)
	}
}

// Creates abandoned at every moment of their flight leave no node once
// their outcome is known: the server may apply a cancelled request after
// anything sent behind it, so the undo must wait for the answer.
func TestAbandonedCreatesLeaveNoNode(t *testing.T) {
	c := etcdserver.Start(t, 1)
	a := open(t, etcdbackend.New(c))
	ctx := ctxFor(t)
	const dir = "/abandon"
	if _, err := a.Create(ctx, dir, nil, store.Persistent); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		cctx, cancel := context.WithTimeout(ctx, time.Duration(i%12)*100*time.Microsecond)
		mode := []store.Mode{store.EphemeralSequential, store.Sequential, store.Ephemeral}[i%3]
		n, err := a.Create(cctx, fmt.Sprintf("%s/n%d-", dir, i), nil, mode)
		cancel()
		if err == nil {
			if err := a.Delete(ctx, n.Path); err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Create = %v; want success or DeadlineExceeded", err)
		}
	}
	for {
		kids, ev, err := a.ChildrenW(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) == 0 {
			return
		}
		if e := <-ev; e.Err != nil {
			t.Fatalf("abandoned nodes left: %v (%v)", kids, e.Err)
		}
	}
}
