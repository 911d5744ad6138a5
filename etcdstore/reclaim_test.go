package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// TestReclaimRoundTrips pins what reclaiming costs on etcd with no reclaim
// delay, by the cluster's revision, which every applied write transaction
// moves by one and nothing else moves: a delete that empties a chain of directories made
// implicitly removes them all in its own transaction, and a create whose
// parent is missing (a name used again after its directories went) makes
// the missing ones in its own transaction too. A chain longer than their
// bounds costs one transaction more to make, and one per directory past
// the delete's nesting bound to remove.
func TestReclaimRoundTrips(t *testing.T) {
	cluster := etcdserver.Start(t, 1)
	st := open(t, etcdbackend.New(cluster, etcdstore.WithReclaimDelay(0)))
	cli := cluster.Client(t)
	ctx := ctxFor(t)
	rev := func() int64 { return revision(t, cli) }
	// writes runs f and checks that it applied want write transactions.
	writes := func(what string, want int64, f func()) {
		t.Helper()
		before := rev()
		f()
		if got := rev() - before; got != want {
			t.Errorf("%s: %d write transactions; want %d", what, got, want)
		}
	}
	isGone := func(paths ...string) {
		t.Helper()
		for _, p := range paths {
			if _, err := st.Get(ctx, p); !errors.Is(err, store.ErrNoNode) {
				t.Errorf("Get(%q) = %v; want ErrNoNode", p, err)
			}
		}
	}
	must[store.Node](t)(st.Create(ctx, "/r", nil, store.Persistent))

	// A name used over and over: its directory goes with each Unlock and
	// comes back with the next Lock's create, in the same transaction.
	for i := range 3 {
		var n store.Node
		writes("Create in a reclaimed directory", 1, func() {
			n = must[store.Node](t)(st.Create(ctx, "/r/lock/n-", nil, store.EphemeralSequential))
		})
		if d := must[store.Node](t)(st.Get(ctx, "/r/lock")); d.Seq != n.Seq {
			t.Errorf("round %d: directory Seq %d, node Seq %d; want the directory made by the node's transaction", i, d.Seq, n.Seq)
		}
		writes("DeleteSeq of the last node", 1, func() {
			if err := st.DeleteSeq(ctx, n.Path, n.Seq); err != nil {
				t.Fatal(err)
			}
		})
		isGone("/r/lock")
	}

	// Two missing levels: both made by the create's transaction, and
	// taken by one delete.
	var n store.Node
	writes("Create two levels down", 1, func() {
		n = must[store.Node](t)(st.Create(ctx, "/r/a/b/n-", nil, store.EphemeralSequential))
	})
	for _, d := range []string{"/r/a", "/r/a/b"} {
		if got := must[store.Node](t)(st.Get(ctx, d)); got.Seq != n.Seq {
			t.Errorf("Get(%q).Seq = %d; want %d, the node's: made by its transaction", d, got.Seq, n.Seq)
		}
	}
	writes("Delete of the last node two levels down", 1, func() {
		if err := st.Delete(ctx, n.Path); err != nil {
			t.Fatal(err)
		}
	})
	isGone("/r/a/b", "/r/a")

	// A grandparent attached to a lease: nothing is written.
	must[store.Node](t)(st.Create(ctx, "/r/e", nil, store.Ephemeral))
	writes("Create below an ephemeral grandparent", 0, func() {
		_, err := st.Create(ctx, "/r/e/d/n", nil, store.Persistent)
		if !errors.Is(err, store.ErrEphemeralParent) {
			t.Errorf("Create(/r/e/d/n) = %v; want ErrEphemeralParent", err)
		}
	})
	if err := st.Delete(ctx, "/r/e"); err != nil {
		t.Fatal(err)
	}

	// Past the bounds, one transaction more to make the directories, and
	// one per directory past the delete's nesting.
	deep := "/r/d" + strings.Repeat("/d", etcdstore.InlineDepth)
	extra := strings.Count(deep, "/") - 1 - etcdstore.MaxNest
	writes("Create below a deep chain", 2, func() {
		n = must[store.Node](t)(st.Create(ctx, deep+"/n", nil, store.Persistent))
	})
	writes("Delete of the last node of a deep chain", 1+int64(extra), func() {
		if err := st.Delete(ctx, n.Path); err != nil {
			t.Fatal(err)
		}
	})
	isGone("/r/d")
	if kids := must[[]store.Child](t)(st.Children(ctx, "/r")); len(kids) != 0 {
		t.Errorf("Children(/r) = %v; want none", kids)
	}
}

// TestReclaimLater: with a reclaim delay, a name used again within it keeps
// its directory and costs one write transaction a create and one a delete,
// with no directory key written; a directory left alone goes by itself
// once the delay is up; and Close removes those still due, for a delay
// longer than the session.
func TestReclaimLater(t *testing.T) {
	cluster := etcdserver.Start(t, 1)
	long := open(t, etcdbackend.New(cluster, etcdstore.WithReclaimDelay(time.Hour)))
	short := open(t, etcdbackend.New(cluster, etcdstore.WithReclaimDelay(50*time.Millisecond)))
	cli := cluster.Client(t)
	ctx := ctxFor(t)
	must[store.Node](t)(long.Create(ctx, "/r", nil, store.Persistent))
	cycle := func(st *etcdstore.Store, p string) {
		t.Helper()
		n := must[store.Node](t)(st.Create(ctx, p+"/n-", nil, store.EphemeralSequential))
		if err := st.Delete(ctx, n.Path); err != nil {
			t.Fatal(err)
		}
	}
	rev := func() int64 { return revision(t, cli) }
	cycle(long, "/r/hot")
	before := rev()
	for range 5 {
		cycle(long, "/r/hot")
		must[store.Node](t)(long.Get(ctx, "/r/hot"))
	}
	if got := rev() - before; got != 10 {
		t.Errorf("5 cycles on a name in use: %d write transactions; want 10, one a create and one a delete", got)
	}

	cycle(short, "/r/idle")
	backends.WaitGone(t, long, "/r/idle")

	for i := range 3 {
		cycle(long, fmt.Sprintf("/r/e-%d/d", i))
	}
	if err := long.Close(); err != nil {
		t.Fatal(err)
	}
	kids, err := short.Children(ctx, "/r")
	if err != nil || len(kids) != 0 {
		t.Errorf("Children(/r) after Close = %v, %v; want none", kids, err)
	}
}

// revision returns the cluster's revision, which every applied write
// transaction moves by one and nothing else moves.
func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(ctxFor(t), "\x00probe")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// TestAbandonedCreateLeavesNoParent: a create whose parent, gone since
// this Store last saw it, it makes in a transaction of its own, and whose
// caller then leaves before the node is made, takes the directory it made
// back with it: no delete in it would ever come to reclaim it. At once with
// no reclaim delay (when the call returns), else once the delay is up. So
// does a batch.
func TestAbandonedCreateLeavesNoParent(t *testing.T) {
	cluster := etcdserver.Start(t, 1)
	for _, delay := range []time.Duration{0, 50 * time.Millisecond} {
		for _, kind := range []string{"ephemeral-sequential", "persistent", "batch"} {
			t.Run(fmt.Sprintf("delay %v/%s", delay, kind), func(t *testing.T) {
				leave := func() {} // the caller leaves right after makeParents, once set
				a := open(t, etcdbackend.New(cluster, etcdstore.WithReclaimDelay(delay),
					etcdstore.WithMadeParentsHook(func() { leave() })))
				b := open(t, etcdbackend.New(cluster, etcdstore.WithReclaimDelay(0)))
				ctx := ctxFor(t)
				root := fmt.Sprintf("/abandoned/%d-%s", delay, kind)
				parentGone(t, a, b, root)
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				leave = cancel
				var err error
				switch kind {
				case "ephemeral-sequential":
					_, err = a.Create(cctx, root+"/x/y/n-", nil, store.EphemeralSequential)
				case "persistent":
					_, err = a.Create(cctx, root+"/x/y/n", nil, store.Persistent)
				case "batch":
					_, err = a.CreateBatch(cctx, root+"/x/y", []store.BatchNode{{Name: "i-"}, {Name: "i-"}}, store.Sequential)
				}
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("create left after its parents were made = %v; want context.Canceled", err)
				}
				if delay == 0 {
					if _, err := b.Get(ctx, root+"/x"); !errors.Is(err, store.ErrNoNode) {
						t.Fatalf("Get(%s/x) once the abandoned create returned = %v; want ErrNoNode", root, err)
					}
				}
				backends.WaitGone(t, b, root+"/x")
				if kids := must[[]store.Child](t)(b.Children(ctx, root)); len(kids) != 0 {
					t.Errorf("Children(%s) = %v; want none", root, kids)
				}
			})
		}
	}
}

// TestReclaimCutShort: a directory whose removal's request fails for a
// cause that may pass (here it is held until its attempt timed out) is
// removed by a later try, while the session lasts: etcd has no reaper,
// and nobody may ever use the name again to take it along.
func TestReclaimCutShort(t *testing.T) {
	cluster := etcdserver.Start(t, 1)
	// Once set to 2, the first transaction (the delete) goes through and
	// the second (the removal of its directory) is held past its attempt
	// timeout.
	var txns atomic.Int32
	held := make(chan struct{})
	hook := func(ctx context.Context, method string) {
		if method != "/etcdserverpb.KV/Txn" || txns.Add(-1) != 0 {
			return
		}
		<-ctx.Done() // the attempt's timeout
		close(held)
	}
	a := etcdbackend.New(cluster, etcdstore.WithReclaimDelay(50*time.Millisecond)).
		OpenHooked(t, etcdbackend.Hooks{Request: hook}, etcdstore.WithAttemptTimeout(300*time.Millisecond))
	b := open(t, etcdbackend.New(cluster))
	ctx := ctxFor(t)
	must[store.Node](t)(b.Create(ctx, "/cut", nil, store.Persistent))
	n := must[store.Node](t)(a.Create(ctx, "/cut/d/n-", nil, store.EphemeralSequential))
	txns.Store(2)
	if err := a.Delete(ctx, n.Path); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the removal of /cut/d was never sent")
	}
	backends.WaitGone(t, b, "/cut/d")
}

// TestCreateAfterParentsFails: a create that made its parents apart
// (makeParents: its parent was gone since it last saw it) and then fails,
// its caller still there, takes the parents back: nothing else would, etcd
// having no reaper. Here the node's transaction is held past its attempt
// timeout, so it is never applied, and the create fails with
// ErrDisconnected. And a lost reply of the parents' own transaction is no
// failure: it makes directories, no node, so the create sends it again and
// goes on. With no reclaim delay and with one.
func TestCreateAfterParentsFails(t *testing.T) {
	cluster := etcdserver.Start(t, 1)
	for _, delay := range []time.Duration{0, 50 * time.Millisecond} {
		for _, fault := range []string{"node held", "parents' reply lost"} {
			t.Run(fmt.Sprintf("delay %v/%s", delay, fault), func(t *testing.T) {
				backend := etcdbackend.New(cluster, etcdstore.WithReclaimDelay(delay))
				// Once txns is set, the transactions go: the create
				// (refused, its parent gone), the read of why, the
				// parents' own, the node's.
				var txns atomic.Int32
				var a *etcdstore.Store
				faulted := make(chan struct{})
				hook := func(ctx context.Context, method string) {
					if method != "/etcdserverpb.KV/Txn" || txns.Add(-1) != 0 {
						return
					}
					defer close(faulted)
					if fault == "node held" {
						<-ctx.Done() // the attempt's timeout: never sent
						return
					}
					backend.LoseNextCreateReply(t, a) // this one
				}
				a = backend.OpenHooked(t, etcdbackend.Hooks{Request: hook}, etcdstore.WithAttemptTimeout(300*time.Millisecond))
				b := open(t, etcdbackend.New(cluster, etcdstore.WithReclaimDelay(0)))
				ctx := ctxFor(t)
				root := fmt.Sprintf("/afterparents/%d-%d", delay.Milliseconds(), len(fault))
				parentGone(t, a, b, root)
				if fault == "node held" {
					txns.Store(4)
				} else {
					txns.Store(3)
				}
				_, err := a.Create(ctx, root+"/x/y/n", nil, store.Persistent)
				select {
				case <-faulted:
				default:
					t.Fatalf("Create(%s/x/y/n) = %v, and the fault never came", root, err)
				}
				if fault != "node held" {
					if err != nil {
						t.Fatalf("Create(%s/x/y/n) with its parents' reply lost = %v; want nil, sent again", root, err)
					}
					must[store.Node](t)(b.Get(ctx, root+"/x/y/n"))
					return
				}
				if !errors.Is(err, store.ErrDisconnected) {
					t.Fatalf("Create(%s/x/y/n) held past its attempt = %v; want ErrDisconnected", root, err)
				}
				backends.WaitGone(t, b, root+"/x")
			})
		}
	}
}

// parentGone makes root, has a learn that root/x/y is there, and has b
// (with no reclaim delay) take root/x away: a's next create under root/x/y
// finds its parent gone and makes it apart (makeParents).
func parentGone(t *testing.T, a, b *etcdstore.Store, root string) {
	t.Helper()
	ctx := ctxFor(t)
	must[store.Node](t)(b.Create(ctx, root, nil, store.Persistent))
	n := must[store.Node](t)(a.Create(ctx, root+"/x/y/n-", nil, store.EphemeralSequential))
	if err := b.Delete(ctx, n.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, root+"/x"); !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Get(%s/x) after the last node in it went = %v; want ErrNoNode", root, err)
	}
}
