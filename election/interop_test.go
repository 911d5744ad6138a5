package election_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TestNodeLayout checks the names of candidate nodes: Curator's LeaderLatch
// layout on ZooKeeper ("_c_<uuid>-latch-<10 digits>"), "latch-" plus a
// unique suffix elsewhere.
func TestNodeLayout(t *testing.T) {
	layouts := map[string]*regexp.Regexp{
		"mem":  regexp.MustCompile(`^latch-\d{10}$`),
		"zk":   regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-latch-\d{10}$`),
		"etcd": regexp.MustCompile(`^latch-[0-9a-f]+$`),
	}
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		want := layouts[t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]]
		st := open(t, b)
		ctx := ctxFor(t)
		l, err := election.New(st, dir(t)).Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatalf("Campaign = %v", err)
		}
		defer l.Resign(ctx)
		if name := store.Base(l.Path()); !want.MatchString(name) {
			t.Errorf("candidate node %q; want it to match %v", name, want)
		}
		n, err := st.Get(ctx, l.Path())
		if err != nil || string(n.Data) != "a" || n.Owner != st.SessionID() {
			t.Errorf("Get(%q) = %+v, %v; want data %q owned by %#x", l.Path(), n, err, "a", st.SessionID())
		}
	})
}

// TestEtcdInterop runs corral candidates beside etcd's own
// concurrency.Election on one prefix: a leader elected by either is the
// leader the other observes and waits for.
func TestEtcdInterop(t *testing.T) {
	if !backends.Selected("etcd") {
		t.Skip("etcd not in CORRAL_STORES")
	}
	b, ok := backends.Get(t, "etcd").(*etcdbackend.Backend)
	if !ok {
		t.Skip("no etcd backend")
	}
	ctx := ctxFor(t)
	path := dir(t)
	cli := b.Cluster().Client(t)
	// etcd's Election writes no key for its prefix, and etcdstore lists
	// the children of an existing node only: create the directory, as any
	// corral candidate's first campaign does.
	if _, err := open(t, b).Create(ctx, path, nil, store.Persistent); err != nil {
		t.Fatalf("Create(%q) = %v", path, err)
	}
	newElection := func(t *testing.T) *concurrency.Election {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		if err != nil {
			t.Fatalf("concurrency.NewSession = %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return concurrency.NewElection(s, path)
	}

	t.Run("etcd leads first", func(t *testing.T) {
		ee := newElection(t)
		if err := ee.Campaign(ctx, "etcd"); err != nil {
			t.Fatalf("concurrency Campaign = %v", err)
		}
		st := open(t, b)
		got, err := election.New(st, path).Leader(ctx)
		if err != nil || string(got.Value) != "etcd" || got.Path != ee.Key() || got.Token != ee.Rev() {
			t.Fatalf("Leader() = %v, %v; want %s (token %d, value %q)", got, err, ee.Key(), ee.Rev(), "etcd")
		}
		observed := election.New(st, path).Observe(ctx).Leaders()
		if l, _ := next(t, "observe", observed); l.Path != ee.Key() {
			t.Errorf("Observe saw %v; want %s", l, ee.Key())
		}
		ch := campaign(ctx, election.New(st, path), "corral")
		waitCandidates(t, st, path, 2)
		if err := ee.Proclaim(ctx, "etcd2"); err != nil {
			t.Fatalf("concurrency Proclaim = %v", err)
		}
		if l, _ := next(t, "observe", observed); string(l.Value) != "etcd2" {
			t.Errorf("Observe saw %v; want value %q", l, "etcd2")
		}
		if err := ee.Resign(ctx); err != nil {
			t.Fatalf("concurrency Resign = %v", err)
		}
		l := elected(t, "corral after etcd resigned", ch)
		if l.Token() <= ee.Rev() {
			t.Errorf("corral token %d after etcd's %d; want greater", l.Token(), ee.Rev())
		}
		if got, _ := next(t, "observe", observed); got.Path != l.Path() {
			t.Errorf("Observe saw %v; want %s", got, l.Path())
		}
		if err := l.Resign(ctx); err != nil {
			t.Errorf("Resign = %v", err)
		}
	})

	t.Run("corral leads first", func(t *testing.T) {
		st := open(t, b)
		l, err := election.New(st, path).Campaign(ctx, []byte("corral"))
		if err != nil {
			t.Fatalf("Campaign = %v", err)
		}
		ee := newElection(t)
		resp, err := ee.Leader(ctx)
		if err != nil || string(resp.Kvs[0].Key) != l.Path() || string(resp.Kvs[0].Value) != "corral" {
			t.Fatalf("concurrency Leader = %v, %v; want %s", resp, err, l.Path())
		}
		octx, stop := context.WithCancel(ctx)
		defer stop()
		observed := ee.Observe(octx)
		done := make(chan error, 1)
		go func() { done <- ee.Campaign(ctx, "etcd") }()
		waitCandidates(t, st, path, 2)
		if r := recv(t, "concurrency Observe", observed); string(r.Kvs[0].Key) != l.Path() {
			t.Errorf("concurrency Observe saw %s; want %s", r.Kvs[0].Key, l.Path())
		}
		select {
		case err := <-done:
			t.Fatalf("concurrency Campaign returned %v while corral leads", err)
		default:
		}
		if err := l.Resign(ctx); err != nil {
			t.Fatalf("Resign = %v", err)
		}
		if err := recv(t, "concurrency Campaign", done); err != nil {
			t.Fatalf("concurrency Campaign = %v", err)
		}
		if ee.Rev() <= l.Token() {
			t.Errorf("etcd's revision %d after corral's token %d; want greater", ee.Rev(), l.Token())
		}
		got, err := election.New(st, path).Leader(ctx)
		if err != nil || got.Path != ee.Key() {
			t.Errorf("Leader() = %v, %v; want %s", got, err, ee.Key())
		}
		if err := ee.Resign(ctx); err != nil {
			t.Errorf("concurrency Resign = %v", err)
		}
	})
}
