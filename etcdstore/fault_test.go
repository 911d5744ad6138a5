package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/etcdserver"
	"github.com/corral-go/corral/internal/etcdserver/etcdbackend"
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
// believes it holds it.
func TestSessionEndsBeforeServerExpiry(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c, etcdstore.WithTTL(2*time.Second))
	a, other := open(t, b), open(t, b)
	ctx := ctxFor(t)
	n := must[store.Node](t)(a.Create(ctx, "/partition/lock-", nil, store.EphemeralSequential))
	_, _, gone, err := other.ExistsW(ctx, n.Path)
	if err != nil {
		t.Fatal(err)
	}
	b.Freeze(t, a)
	ev := waitEvent(t, "watch on the partitioned session's node", gone)
	if ev.Type != store.EventDeleted {
		t.Fatalf("event = %+v; want deleted", ev)
	}
	// The server has expired the lease: the client must have known first.
	select {
	case <-a.Context().Done():
	default:
		t.Fatalf("server expired the lease while the client's session was still live")
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, store.ErrSessionExpired) {
		t.Errorf("Cause = %v; want ErrSessionExpired", cause)
	}
	select {
	case <-a.Disconnected():
	default:
		t.Errorf("Disconnected() open after the session ended")
	}
	b.Reconnect(t, a)
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
// The killed member comes back and serves again.
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
	leader := c.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	start := time.Now()
	leader.Kill()
	t.Logf("killed %s in %v", leader.Name, time.Since(start))

	writer := sessions[0]
	retry(t, ctx, "Create after the kill", func() error {
		// A request proposed to the dead leader times out only after
		// etcd's request timeout (7 s); a short attempt retries sooner,
		// once a new leader is elected.
		actx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := writer.Create(actx, "/kill/w", nil, store.Persistent)
		switch {
		case errors.Is(err, store.ErrNodeExists):
			return nil // an earlier attempt whose reply was lost
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return fmt.Errorf("%w: %w", store.ErrDisconnected, err)
		}
		return err
	})
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
