package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

func TestMain(m *testing.M) { backends.Main(m) }

const timeout = 20 * time.Second

var (
	errDeleted      = errors.New("test: deleted")
	errDisconnected = fmt.Errorf("test: disconnected: %w", store.ErrDisconnected)
	errReleased     = errors.New("test: released")
)

func dir(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/recipetest/%s-%08x", name, rand.Uint32())
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		kind recipe.Kind
		ok   bool
	}{
		{"lock-0000000007", recipe.Exclusive, true},
		{"_c_0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10-lock-0000000007", recipe.Exclusive, true},
		{"_c_0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10-__READ__0000000001", recipe.Reader, true},
		{"_c_0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10-__WRIT__0000000002", recipe.Writer, true},
		{"_c_0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10-latch-0000000003", recipe.Latch, true},
		{"_c_3a0e2d5b9f1c4e7a8b6d0c2e4f6a8b0c-lock-0000000004", recipe.Exclusive, true}, // go-zookeeper
		{"8c1f0e2d3b4a59687766554433221100__lock__0000000005", recipe.Exclusive, true},  // kazoo
		{"8c1f0e2d3b4a59687766554433221100__rlock__0000000006", recipe.Reader, true},    // kazoo
		{"lock--000000001", recipe.Exclusive, true},                                     // ZooKeeper counter overflow
		{"694d7c1e8b3a2f04", recipe.Exclusive, true},                                    // etcd concurrency key
		{"94d7c1e8b3a2f04", recipe.Exclusive, true},                                     // a lease ID with a leading zero digit
		{"cafe", recipe.Exclusive, false},                                               // a name, not a lease ID
		{"deadbeef", recipe.Exclusive, false},
		{"__READ__1a2b3c", recipe.Reader, true}, // corral on etcd
		{"lock-1a2b3c", recipe.Exclusive, true},
		{"8c1f0e2d3b4a59687766554433221100__lock__1a2b3c", recipe.Exclusive, true},
		{"ready", recipe.Exclusive, false},
		{"config", recipe.Exclusive, false},
		{"", recipe.Exclusive, false},
	}
	for _, tt := range tests {
		kind, ok := recipe.Parse(tt.name)
		if kind != tt.kind || ok != tt.ok {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tt.name, kind, ok, tt.kind, tt.ok)
		}
	}
}

func TestBlockers(t *testing.T) {
	// W R R W R, plus a foreign lock node at the end.
	cs := []recipe.Contender{
		{Name: "__WRIT__0000000001", Kind: recipe.Writer},
		{Name: "__READ__0000000002", Kind: recipe.Reader},
		{Name: "__READ__0000000003", Kind: recipe.Reader},
		{Name: "__WRIT__0000000004", Kind: recipe.Writer},
		{Name: "__READ__0000000005", Kind: recipe.Reader},
		{Name: "lock-0000000006", Kind: recipe.Exclusive},
		{Name: "__READ__0000000007", Kind: recipe.Reader},
	}
	tests := []struct {
		own                   int
		predecessor, lastWrit int
	}{
		{0, -1, -1},
		{1, 0, 0},
		{2, 1, 0},
		{3, 2, 0},
		{4, 3, 3},
		{5, 4, 3},
		{6, 5, 5},
	}
	// blocker returns the index of the one contender o blocks own on, -1
	// for none.
	blocker := func(o recipe.Order, own int) int {
		ws := o.Block("/d", cs, own)
		switch {
		case len(ws) == 0:
			return -1
		case len(ws) > 1:
			t.Fatalf("%d watches for %d; want one", len(ws), own)
		}
		for i, c := range cs {
			if ws[0] == c.Watch("/d") {
				return i
			}
		}
		t.Fatalf("watch %v is of no contender", ws[0])
		return -2
	}
	for _, tt := range tests {
		if got := blocker(recipe.Predecessor, tt.own); got != tt.predecessor {
			t.Errorf("Predecessor blocks %d on %d; want %d", tt.own, got, tt.predecessor)
		}
		if got := blocker(recipe.LastWriter, tt.own); got != tt.lastWrit {
			t.Errorf("LastWriter blocks %d on %d; want %d", tt.own, got, tt.lastWrit)
		}
	}
}

// acquire acquires a contender node in d with the engine's Acquire, for a
// test that holds it itself (NewHold): the engine's hold stops, and
// leaves the node.
func acquire(ctx context.Context, st store.Store, rec *telemetry.Recorder, d, prefix string, o recipe.Order) (store.Node, error) {
	h, err := recipe.Acquire(ctx, st, spec(rec, d, prefix, o))
	if err != nil {
		return store.Node{}, err
	}
	h.Stop(nil)
	return h.Node(), nil
}

// tryAcquire is acquire with the engine's TryAcquire.
func tryAcquire(ctx context.Context, st store.Store, rec *telemetry.Recorder, d, prefix string, o recipe.Order) (store.Node, bool, error) {
	h, err := recipe.TryAcquire(ctx, st, spec(rec, d, prefix, o))
	if err != nil || h == nil {
		return store.Node{}, false, err
	}
	h.Stop(nil)
	return h.Node(), true, nil
}

func spec(rec *telemetry.Recorder, d, prefix string, o recipe.Order) *recipe.Spec {
	return &recipe.Spec{Dir: d, Prefix: prefix, Order: o, Rec: rec, Hold: recipe.HoldOptions{Deleted: errDeleted, Lazy: true}}
}

func TestContendersSkipsOthers(t *testing.T) {
	kids := []store.Child{{Name: "config", Seq: 1}, {Name: "lock-0000000002", Seq: 2}, {Name: "ready", Seq: 3}}
	got := recipe.Contenders(kids)
	want := []recipe.Contender{{Name: "lock-0000000002", Seq: 2, Kind: recipe.Exclusive}}
	if !slices.Equal(got, want) {
		t.Errorf("Contenders(%v) = %v; want %v", kids, got, want)
	}
}

// children lists the names under d, or nil when d does not exist.
func children(t *testing.T, st store.Store, d string) []string {
	t.Helper()
	kids, err := st.Children(t.Context(), d)
	if errors.Is(err, store.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("Children(%q) = %v", d, err)
	}
	var names []string
	for _, k := range kids {
		names = append(names, k.Name)
	}
	return names
}

func TestAcquireOrder(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s1, s2 := b.Open(t), b.Open(t)
		defer s1.Close()
		defer s2.Close()
		d := dir(t)
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()

		n1, err := acquire(ctx, s1, nil, d, names.Lock, recipe.Predecessor)
		if err != nil {
			t.Fatalf("Acquire(first) = %v", err)
		}
		if _, ok, err := tryAcquire(ctx, s2, nil, d, names.Lock, recipe.Predecessor); ok || err != nil {
			t.Fatalf("TryAcquire(blocked) = %v, %v; want false, nil", ok, err)
		}
		if got := children(t, s1, d); len(got) != 1 {
			t.Fatalf("children after TryAcquire = %q; want only the holder", got)
		}
		got := make(chan error, 1)
		var n2 store.Node
		go func() {
			var err error
			n2, err = acquire(ctx, s2, nil, d, names.Lock, recipe.Predecessor)
			got <- err
		}()
		waitChildren(t, s1, d, 2)
		select {
		case err := <-got:
			t.Fatalf("second Acquire returned %v while the first held", err)
		default:
		}
		if err := recipe.Remove(ctx, s1, nil, n1); err != nil {
			t.Fatalf("Remove = %v", err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("second Acquire = %v", err)
			}
		case <-ctx.Done():
			t.Fatal("second Acquire did not return after the release")
		}
		if n2.Seq <= n1.Seq {
			t.Errorf("Seq of second grant = %d; want > %d", n2.Seq, n1.Seq)
		}
	})
}

// waitChildren waits until d has n children.
func waitChildren(t *testing.T, st store.Store, d string, n int) {
	t.Helper()
	backends.WaitChildren(t, st, d, backends.Count(n))
}

func TestAcquireCancelLeavesNoNode(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		s1, s2 := b.Open(t), b.Open(t)
		defer s1.Close()
		defer s2.Close()
		d := dir(t)
		n1, err := acquire(t.Context(), s1, nil, d, names.Lock, recipe.Predecessor)
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan error, 1)
		go func() {
			_, err := acquire(ctx, s2, nil, d, names.Lock, recipe.Predecessor)
			got <- err
		}()
		waitChildren(t, s1, d, 2)
		cancel()
		select {
		case err := <-got:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Acquire(cancelled) = %v; want context.Canceled", err)
			}
		case <-time.After(timeout):
			t.Fatal("Acquire did not return after cancel")
		}
		if got := children(t, s1, d); !slices.Equal(got, []string{n1.Name()}) {
			t.Errorf("children after cancel = %q; want [%q]", got, n1.Name())
		}
	})
}

func TestWaitGone(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		defer st.Close()
		p := dir(t) + "/node"
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		if err := recipe.WaitGone(ctx, st, p, 0); err != nil {
			t.Fatalf("WaitGone(missing) = %v; want nil", err)
		}
		n, err := st.Create(ctx, p, nil, store.Persistent)
		if err != nil {
			t.Fatal(err)
		}
		// Another node under the same name counts as gone.
		if err := recipe.WaitGone(ctx, st, p, n.Seq+1); err != nil {
			t.Fatalf("WaitGone(Seq %d) of the node with Seq %d = %v; want nil", n.Seq+1, n.Seq, err)
		}
		got := make(chan error, 1)
		go func() { got <- recipe.WaitGone(ctx, st, p, n.Seq) }()
		// A data change must not pass for a deletion. Setting it until
		// WaitGone has surely watched once is not observable, so set it
		// twice around the start and then check WaitGone still waits.
		for range 2 {
			if _, err := st.Set(ctx, p, []byte("x"), store.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-got:
			t.Fatalf("WaitGone returned %v before the delete", err)
		default:
		}
		if err := st.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("WaitGone = %v; want nil", err)
			}
		case <-ctx.Done():
			t.Fatal("WaitGone did not return after the delete")
		}

		if n, err = st.Create(ctx, p, nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		if err := recipe.WaitGone(cctx, st, p, n.Seq); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitGone(cancelled) = %v; want context.Canceled", err)
		}
	})
}

func TestHold(t *testing.T) {
	tests := []struct {
		name   string
		policy error // HoldOptions.Disconnected
		end    func(t *testing.T, b storetest.Backend, owner, other store.Store, n store.Node)
		want   error
		// alt is another acceptable cause: etcd's Expire revokes the
		// lease from outside, and the owner sees its node deleted before
		// its next keepalive tells it the session is over.
		alt error
	}{
		{"deleted", nil, func(t *testing.T, _ storetest.Backend, _, other store.Store, n store.Node) {
			if err := other.Delete(t.Context(), n.Path); err != nil {
				t.Fatal(err)
			}
		}, errDeleted, nil},
		{"expired", nil, func(t *testing.T, b storetest.Backend, owner, _ store.Store, _ store.Node) {
			b.Expire(t, owner)
		}, store.ErrSessionExpired, errDeleted},
		{"closed", nil, func(t *testing.T, _ storetest.Backend, owner, _ store.Store, _ store.Node) {
			owner.Close()
		}, store.ErrClosed, nil},
		{"disconnected", errDisconnected, func(t *testing.T, b storetest.Backend, owner, _ store.Store, _ store.Node) {
			d, ok := b.(storetest.Disconnector)
			if !ok {
				t.Skip("backend cannot disconnect")
			}
			d.Disconnect(t, owner)
		}, errDisconnected, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backends.Run(t, func(t *testing.T, b storetest.Backend) {
				owner, other := b.Open(t), b.Open(t)
				defer owner.Close()
				defer other.Close()
				n, err := acquire(t.Context(), owner, nil, dir(t), names.Lock, recipe.Predecessor)
				if err != nil {
					t.Fatalf("Acquire = %v", err)
				}
				h := recipe.NewHold(owner, n, recipe.HoldOptions{Deleted: errDeleted, Disconnected: tt.policy})
				if h.Token() != n.Fence() {
					t.Errorf("Token() = %d; want %d", h.Token(), n.Fence())
				}
				tt.end(t, b, owner, other, n)
				select {
				case <-h.Context().Done():
				case <-time.After(timeout):
					t.Fatal("hold not cancelled")
				}
				cause := context.Cause(h.Context())
				if !errors.Is(cause, tt.want) && (tt.alt == nil || !errors.Is(cause, tt.alt)) {
					t.Errorf("Cause = %v; want %v", cause, tt.want)
				}
				if d, ok := b.(storetest.Disconnector); ok && tt.policy != nil {
					d.Reconnect(t, owner) // else Release retries the delete until its bound
				}
				lost, err := h.Release(t.Context(), errReleased)
				if err != nil {
					t.Errorf("Release() err = %v; want nil", err)
				}
				if lost != cause {
					t.Errorf("Release() lost = %v; want the cause %v", lost, cause)
				}
			})
		})
	}
}

func TestHoldSurvivesDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect")
		}
		st := b.Open(t)
		defer st.Close()
		n, err := acquire(t.Context(), st, nil, dir(t), names.Lock, recipe.Predecessor)
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		h := recipe.NewHold(st, n, recipe.HoldOptions{Deleted: errDeleted})
		d.Disconnect(t, st)
		d.Reconnect(t, st)
		if err := h.Context().Err(); err != nil {
			t.Fatalf("hold ended by a disconnection under the keep policy: %v", context.Cause(h.Context()))
		}
		lost, err := h.Release(t.Context(), errReleased)
		if lost != nil || err != nil {
			t.Fatalf("Release = %v, %v; want nil, nil", lost, err)
		}
		if got := context.Cause(h.Context()); !errors.Is(got, errReleased) {
			t.Errorf("Cause after Release = %v; want %v", got, errReleased)
		}
		if _, err := st.Get(t.Context(), n.Path); !errors.Is(err, store.ErrNoNode) {
			t.Errorf("Get(released node) = %v; want ErrNoNode", err)
		}
	})
}

func TestLostReplyYieldsOneNode(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		rl, ok := b.(storetest.ReplyLoser)
		if !ok {
			t.Skip("backend cannot lose replies")
		}
		st := b.Open(t)
		defer st.Close()
		d := dir(t)
		rl.LoseNextCreateReply(t, st)
		n, err := acquire(t.Context(), st, nil, d, names.Lock, recipe.Predecessor)
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		if got := children(t, st, d); !slices.Equal(got, []string{n.Name()}) {
			t.Errorf("children = %q; want [%q]", got, n.Name())
		}
	})
}

func TestLazyHold(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		owner, other := b.Open(t), b.Open(t)
		defer owner.Close()
		defer other.Close()
		d := dir(t)
		n, err := acquire(t.Context(), owner, nil, d, names.Lock, recipe.Predecessor)
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		h := recipe.NewHold(owner, n, recipe.HoldOptions{Deleted: errDeleted, Lazy: true})
		if err := other.Delete(t.Context(), n.Path); err != nil {
			t.Fatal(err)
		}
		// Nobody watched: Release finds the node gone.
		lost, err := h.Release(t.Context(), errReleased)
		if !errors.Is(lost, errDeleted) || err != nil {
			t.Errorf("Release() = %v, %v; want %v, nil", lost, err, errDeleted)
		}

		n, err = acquire(t.Context(), owner, nil, d, names.Lock, recipe.Predecessor)
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		h = recipe.NewHold(owner, n, recipe.HoldOptions{Deleted: errDeleted, Lazy: true})
		if err := other.Delete(t.Context(), n.Path); err != nil {
			t.Fatal(err)
		}
		// The first Context starts the watch, which finds the node gone.
		if cause := context.Cause(waitDone(t, h.Context())); !errors.Is(cause, errDeleted) {
			t.Errorf("Cause = %v; want %v", cause, errDeleted)
		}
		if lost, _ := h.Release(t.Context(), errReleased); !errors.Is(lost, errDeleted) {
			t.Errorf("Release() lost = %v; want %v", lost, errDeleted)
		}
	})
}

func waitDone(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(timeout):
		t.Fatal("context not cancelled")
	}
	return ctx
}

func TestLazyHoldDisconnected(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("backend cannot disconnect")
		}
		st := b.Open(t)
		defer st.Close()
		n, err := acquire(t.Context(), st, nil, dir(t), names.Lock, recipe.Predecessor)
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		h := recipe.NewHold(st, n, recipe.HoldOptions{Deleted: errDeleted, Disconnected: errDisconnected, Lazy: true})
		disc := st.Disconnected()
		d.Disconnect(t, st)
		select {
		case <-disc:
		case <-time.After(timeout):
			t.Fatal("Disconnected() not closed")
		}
		d.Reconnect(t, st)
		// Nobody watched, and the connection is back: Release still knows.
		lost, err := h.Release(t.Context(), errReleased)
		if !errors.Is(lost, errDisconnected) || err != nil {
			t.Errorf("Release() = %v, %v; want %v, nil", lost, err, errDisconnected)
		}
	})
}

// staleLister is a store without CreateLister whose next Children call runs
// before after, and returns what it read before after ran: a reply that
// arrives after the tree changed.
type staleLister struct {
	store.Store
	after func()
}

func (s *staleLister) Children(ctx context.Context, p string) ([]store.Child, error) {
	kids, err := s.Store.Children(ctx, p)
	if s.after != nil {
		s.after()
		s.after = nil
	}
	return kids, err
}

// TestAcquireWaitsForIdentity: the contender a waiter lists in front of it
// is deleted and made again under the same name, behind the waiter, before
// the waiter watches it (as etcd's own clients do on every Lock of a
// session). The node at that name is another node, behind us: the waiter
// must not wait for it, or the two wait for each other for ever.
func TestAcquireWaitsForIdentity(t *testing.T) {
	srv := memstore.NewServer()
	other, own := srv.Open(), srv.Open()
	defer other.Close()
	defer own.Close()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	d := dir(t)
	const lease = "694d7c1e8b3a2f04" // an etcd concurrency.Mutex key
	first, err := other.Create(ctx, d+"/"+lease, nil, store.Ephemeral)
	if err != nil {
		t.Fatal(err)
	}
	var again store.Node
	st := &staleLister{Store: own, after: func() {
		if err := other.Delete(ctx, first.Path); err != nil {
			t.Error(err)
		}
		if again, err = other.Create(ctx, first.Path, nil, store.Ephemeral); err != nil {
			t.Error(err)
		}
	}}
	n, err := acquire(ctx, st, nil, d, names.Lock, recipe.Predecessor)
	if err != nil {
		t.Fatalf("Acquire = %v; want the lock, since %q is behind it now", err, first.Path)
	}
	if again.Seq <= n.Seq {
		t.Fatalf("the node made again has Seq %d, not behind the waiter's %d", again.Seq, n.Seq)
	}
}

// TestWindowFallback: a contender that reads only a window of the
// contenders before its own never takes a window without a blocker for a
// grant while an earlier contender holds: nodes of no recipe, grandchildren
// (which share an etcd range) and other readers may fill the window, and
// the full listing must then find the holder.
func TestWindowFallback(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		holder, other := b.Open(t), b.Open(t)
		defer holder.Close()
		defer other.Close()
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		for _, tt := range []struct {
			name         string
			holderPrefix string
			fill         func(d string, i int) (string, store.Mode)
			prefix       string
			blocker      recipe.Order
			fills, kids  int // kids: the children once the contender waits
		}{
			{"NodesOfNoRecipe", names.Lock, func(d string, i int) (string, store.Mode) {
				return fmt.Sprintf("%s/config%d", d, i), store.Persistent
			}, names.Lock, recipe.Predecessor, 40, 42},
			{"Grandchildren", names.Lock, func(d string, i int) (string, store.Mode) {
				return fmt.Sprintf("%s/sub/k%d", d, i), store.Persistent
			}, names.Lock, recipe.Predecessor, 40, 3},
			{"Readers", names.Write, func(d string, _ int) (string, store.Mode) {
				return d + "/" + names.Read, store.EphemeralSequential
			}, names.Read, recipe.LastWriter, 40, 42},
		} {
			t.Run(tt.name, func(t *testing.T) {
				d := dir(t)
				h, err := acquire(ctx, holder, nil, d, tt.holderPrefix, recipe.Predecessor)
				if err != nil {
					t.Fatalf("Acquire(holder) = %v", err)
				}
				for i := range tt.fills {
					p, mode := tt.fill(d, i)
					if _, err := holder.Create(ctx, p, nil, mode); err != nil {
						t.Fatalf("Create(%q) = %v", p, err)
					}
				}
				if _, ok, err := tryAcquire(ctx, other, nil, d, tt.prefix, tt.blocker); ok || err != nil {
					t.Fatalf("TryAcquire behind the holder = %v, %v; want false, nil", ok, err)
				}
				got := make(chan error, 1)
				go func() {
					_, err := acquire(ctx, other, nil, d, tt.prefix, tt.blocker)
					got <- err
				}()
				waitChildren(t, holder, d, tt.kids)
				select {
				case err := <-got:
					t.Fatalf("Acquire behind the holder returned %v while it held", err)
				default:
				}
				if err := recipe.Remove(ctx, holder, nil, h); err != nil {
					t.Fatalf("Remove(holder) = %v", err)
				}
				select {
				case err := <-got:
					if err != nil {
						t.Fatalf("Acquire after the release = %v", err)
					}
				case <-ctx.Done():
					t.Fatal("Acquire did not return after the release")
				}
			})
		}
	})
}

// RemoveOwned deletes a node only while it is the owner's: a node at the
// same path made by another session, meanwhile, stays, now and when the
// cleaner retries after a lost connection.
func TestRemoveOwned(t *testing.T) {
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	ctx := t.Context()
	const p = "/claims/x"
	if _, err := a.Create(ctx, p, nil, store.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if err := recipe.RemoveOwned(ctx, a, nil, p, a.SessionID()); err != nil {
		t.Fatalf("RemoveOwned(own) = %v; want nil", err)
	}
	if _, err := b.Get(ctx, p); !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Get after RemoveOwned = %v; want %v", err, store.ErrNoNode)
	}
	if _, err := b.Create(ctx, p, nil, store.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if err := recipe.RemoveOwned(ctx, a, nil, p, a.SessionID()); err != nil {
		t.Fatalf("RemoveOwned(another's) = %v; want nil", err)
	}
	if n, err := a.Get(ctx, p); err != nil || n.Owner != b.SessionID() {
		t.Fatalf("Get after RemoveOwned(another's) = %+v, %v; want b's node", n, err)
	}
	if err := b.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}

	// Handed to the cleaner in an outage; meanwhile the node went and b
	// made its own.
	if _, err := a.Create(ctx, p, nil, store.Ephemeral); err != nil {
		t.Fatal(err)
	}
	a.Disconnect()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := recipe.RemoveOwned(cctx, a, nil, p, a.SessionID()); !errors.Is(err, recipe.ErrRemovalPending) {
		t.Fatalf("RemoveOwned(disconnected) = %v; want %v", err, recipe.ErrRemovalPending)
	}
	if err := b.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, p, nil, store.Ephemeral); err != nil {
		t.Fatal(err)
	}
	a.Reconnect()
	select {
	case <-recipe.Pending(a, store.Node{Path: p}):
	case <-time.After(10 * time.Second):
		t.Fatal("cleaner still pending 10s after the reconnection")
	}
	if n, err := a.Get(ctx, p); err != nil || n.Owner != b.SessionID() {
		t.Fatalf("Get after the cleaner ran = %+v, %v; want b's node", n, err)
	}
}

// TestFrontHandoff: where the store records the release of an exclusive
// holder (store.FrontDeleter), the waiter behind it is granted on one point
// read and no listing; a predecessor that gave up leaves no record, so the
// waiter reads the contenders again and waits for the holder. Elsewhere
// the waiter lists after every wait, as before.
func TestFrontHandoff(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		holderSt, quitterSt := b.Open(t), b.Open(t)
		waiter := countstore.New(b.Open(t))
		defer holderSt.Close()
		defer quitterSt.Close()
		defer waiter.Close()
		_, front := holderSt.(store.FrontDeleter)
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		d := dir(t)

		n, err := acquire(ctx, holderSt, nil, d, names.Lock, recipe.Predecessor)
		if err != nil {
			t.Fatalf("Acquire(holder) = %v", err)
		}
		hold := recipe.NewHold(holderSt, n, recipe.HoldOptions{Deleted: errDeleted, Lazy: true, Front: true})
		qctx, quit := context.WithCancel(ctx)
		quitter := make(chan error, 1)
		go func() {
			_, err := acquire(qctx, quitterSt, nil, d, names.Lock, recipe.Predecessor)
			quitter <- err
		}()
		waitChildren(t, holderSt, d, 2)
		got := make(chan error, 1)
		go func() {
			_, err := acquire(ctx, waiter, nil, d, names.Lock, recipe.Predecessor)
			got <- err
		}()
		watches := func(n int) {
			t.Helper()
			if err := waiter.Wait(ctx, func(c countstore.Counts) bool { return c.NodeWatches() >= n }); err != nil {
				t.Fatalf("waiting for the waiter's watch #%d: %v", n, err)
			}
		}
		watches(1) // on the quitter
		quit()
		if err := receive(t, ctx, quitter); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire(quitter) = %v; want context.Canceled", err)
		}
		watches(2) // on the holder, found by reading again
		select {
		case err := <-got:
			t.Fatalf("Acquire(waiter) returned %v after the quitter left, while the holder held", err)
		default:
		}
		before := waiter.Counts()
		if lost, err := hold.Release(ctx, errReleased); lost != nil || err != nil {
			t.Fatalf("Release = %v, %v", lost, err)
		}
		if err := receive(t, ctx, got); err != nil {
			t.Fatalf("Acquire(waiter) = %v", err)
		}
		after := waiter.Counts()
		reads := func(c countstore.Counts) int { return c.Calls["ChildrenUpTo"] + c.Calls["Children"] }
		if front {
			if got := after.Calls["FollowsFront"] - before.Calls["FollowsFront"]; got != 1 {
				t.Errorf("FollowsFront calls after the release = %d; want 1", got)
			}
			if got := reads(after) - reads(before); got != 0 {
				t.Errorf("listings after the release = %d; want none", got)
			}
		} else if got := reads(after) - reads(before); got == 0 {
			t.Errorf("listings after the release = 0; want the view read again")
		}
	})
}

// receive returns the error ch delivers, or fails the test when ctx ends
// first.
func receive(t *testing.T, ctx context.Context, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		t.Fatalf("no result before the test's deadline: %v", ctx.Err())
		return nil
	}
}
