package zkstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// directHook is a proxy hook that acts on the Store's direct requests
// (xids from 2^29 up) on demand: it cuts the link right after the next
// direct create reaches the server (its answer is lost), or drops every
// direct answer until told otherwise.
type directHook struct {
	cutCreate atomic.Bool
	drop      atomic.Bool
	dropped   chan struct{} // closed at the first answer dropped
	once      atomic.Bool
}

func (h *directHook) hook(m tcpproxy.Message) tcpproxy.Action {
	if m.Index == 0 {
		return tcpproxy.Forward
	}
	xid, op, ok := zkserver.RequestHeader(m.Data)
	if !ok || xid < 1<<29 {
		return tcpproxy.Forward
	}
	switch {
	case m.Dir == tcpproxy.Upstream && op == 1 && h.cutCreate.CompareAndSwap(true, false):
		return tcpproxy.ForwardThenCut
	case m.Dir == tcpproxy.Downstream && h.drop.Load():
		if h.once.CompareAndSwap(false, true) {
			close(h.dropped)
		}
		return tcpproxy.Drop
	}
	return tcpproxy.Forward
}

// openHooked opens a Store through a proxy of its own to the server at
// addr, with a directHook on its traffic, and opts; both are closed when t
// ends.
func openHooked(t *testing.T, ctx context.Context, addr string, opts ...zkstore.Option) (*zkstore.Store, *tcpproxy.Proxy, *directHook) {
	t.Helper()
	h := &directHook{dropped: make(chan struct{})}
	p, err := tcpproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.SetHook(tcpproxy.LengthPrefixed, h.hook)
	st, err := zkstore.Open(ctx, []string{p.Addr()}, append([]zkstore.Option{zkstore.WithSessionTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, p, h
}

// TestDirectCreate: CreateAndList writes its create and its listing as
// direct requests, and keeps the client's promises when they fail: a
// create whose answer is lost is found again (one node, listed, fenced);
// one whose caller leaves first is deleted once its outcome is known; one
// the server refuses fails with the server's reason; one in a missing
// directory makes the directory.
func TestDirectCreate(t *testing.T) {
	srv, b := server(t)
	other := b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	st, p, h := openHooked(t, ctx, srv.Addr())
	must[store.Node](t)(st.Create(ctx, dir, nil, store.Persistent))
	// createList runs CreateAndList once a link takes direct requests,
	// and checks that it sent at least one.
	createList := func(ctx context.Context, path string) (store.Node, []store.Child, error) {
		t.Helper()
		waitDirectUp(t, st)
		before := zkstore.Directs(st)
		n, kids, err := st.CreateAndList(ctx, path, []byte("x"), store.EphemeralSequential)
		if zkstore.Directs(st) == before {
			t.Fatalf("CreateAndList(%s) sent no direct request", path)
		}
		return n, kids, err
	}

	// The plain case: one round trip's worth of requests, both direct.
	before := zkstore.Directs(st)
	waitDirectUp(t, st)
	n, kids, err := st.CreateAndList(ctx, dir+"/lock-", []byte("x"), store.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	if got := zkstore.Directs(st) - before; got != 2 {
		t.Errorf("CreateAndList sent %d direct requests; want 2 (the create and the listing)", got)
	}
	if !protected.MatchString(n.Name()) || len(kids) != 1 || kids[0].Name != n.Name() || n.Token == 0 || n.Owner != st.SessionID() {
		t.Fatalf("CreateAndList = %+v, %v; want a protected node of this session, listed, with a token", n, kids)
	}
	if got := must[store.Node](t)(other.Get(ctx, n.Path)); string(got.Data) != "x" || got.Owner != st.SessionID() {
		t.Fatalf("the node as another session reads it: %+v; want data %q, owned by %#x", got, "x", st.SessionID())
	}
	if err := st.Delete(ctx, n.Path); err != nil {
		t.Fatal(err)
	}

	// The answer is lost (the link is cut right behind the create): the
	// node is found by its name, once, and listed.
	h.cutCreate.Store(true)
	n, kids, err = createList(ctx, dir+"/lock-")
	if err != nil {
		t.Fatalf("CreateAndList with its answer lost = %v", err)
	}
	if h.cutCreate.Load() {
		t.Fatal("the create was not cut off")
	}
	all := must[[]store.Child](t)(other.Children(ctx, dir))
	if len(all) != 1 || all[0].Name != n.Name() || len(kids) != 1 || kids[0].Name != n.Name() || n.Token == 0 {
		t.Fatalf("after a lost answer: CreateAndList = %+v, %v; the directory holds %v; want that one node, listed, with a token", n, kids, all)
	}
	if err := st.Delete(ctx, n.Path); err != nil {
		t.Fatal(err)
	}

	// The caller leaves while the answer is held back: the call returns
	// at its ctx (and UndoWait), and the node the server made is deleted
	// once the link's end tells that the answer will not come.
	const wait = 200 * time.Millisecond
	h.drop.Store(true)
	cctx, cancel := context.WithTimeout(ctx, wait)
	start := time.Now()
	_, _, err = createList(cctx, dir+"/lock-")
	took := time.Since(start)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreateAndList with its answer held back = %v; want DeadlineExceeded", err)
	}
	if took > wait+zkstore.UndoWait+500*time.Millisecond {
		t.Errorf("CreateAndList returned after %v; want at most its ctx (%v) + UndoWait (%v)", took, wait, zkstore.UndoWait)
	}
	select {
	case <-h.dropped:
	case <-ctx.Done():
		t.Fatal("no direct answer was dropped")
	}
	waitChildren(t, other, dir, 1) // the server made it
	h.drop.Store(false)
	p.Cut()
	waitChildren(t, other, dir, 0)
	if err := st.Context().Err(); err != nil {
		t.Fatalf("session ended: %v", context.Cause(st.Context()))
	}

	// The server refuses: its reason, and nothing else.
	eph := must[store.Node](t)(st.Create(ctx, dir+"/eph", nil, store.Ephemeral))
	if _, _, err := createList(ctx, eph.Path+"/lock-"); !errors.Is(err, store.ErrEphemeralParent) {
		t.Fatalf("CreateAndList under an ephemeral node = %v; want ErrEphemeralParent", err)
	}

	// A missing directory is made, and the node in it.
	n, kids, err = createList(ctx, dir+"/new/deeper/lock-")
	if err != nil {
		t.Fatalf("CreateAndList in a missing directory = %v", err)
	}
	if len(kids) != 1 || kids[0].Name != n.Name() || !strings.HasPrefix(n.Path, dir+"/new/deeper/") {
		t.Fatalf("CreateAndList in a missing directory = %+v, %v; want the node, listed", n, kids)
	}
}

// TestDirectCreateLeftInMissingDir: a direct create answered that its
// directory is missing (someone else removed it) after its caller left
// makes nothing: not the directory, which no node would then come to fill
// and no delete to reclaim. (With no reclaim delay, so that a create that
// went on, its caller not gone yet, takes the directory back before the
// call returns too.)
func TestDirectCreateLeftInMissingDir(t *testing.T) {
	srv, b := server(t)
	other := b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	st, p, _ := openHooked(t, ctx, srv.Addr(), zkstore.WithReclaimDelay(0))
	must[store.Node](t)(st.Create(ctx, dir, nil, store.Persistent))
	// st learns that dir/x is a directory it made; other takes it away.
	n, _, err := st.CreateAndList(ctx, dir+"/x/lock-", nil, store.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(ctx, n.Path); err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(ctx, dir+"/x"); err != nil && !errors.Is(err, store.ErrNoNode) {
		t.Fatal(err)
	}
	// The create's answer comes as the link thaws, once its caller left;
	// the caller waits for what follows (up to UndoWait).
	waitDirectUp(t, st)
	before := zkstore.Directs(st)
	p.Freeze()
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	go func() {
		<-cctx.Done()
		p.Restore()
	}()
	_, _, err = st.CreateAndList(cctx, dir+"/x/lock-", nil, store.EphemeralSequential)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreateAndList left while the link was frozen = %v; want DeadlineExceeded", err)
	}
	if zkstore.Directs(st) == before {
		t.Fatal("CreateAndList sent no direct request")
	}
	if _, err := other.Get(ctx, dir+"/x"); !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Get(%s/x) after the create left = %v; want ErrNoNode", dir, err)
	}
}

// TestDirectBatch: CreateBatch sends its creates, one as a plain create and
// more as a multi request, as direct requests, and meets a missing parent
// and a refused batch as on the client's path.
func TestDirectBatch(t *testing.T) {
	_, b := server(t)
	st, other := b.Open(t).(*zkstore.Store), b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	batch := func(parent string, nodes []store.BatchNode, mode store.Mode) ([]store.Node, error) {
		t.Helper()
		waitDirectUp(t, st)
		before := zkstore.Directs(st)
		made, err := st.CreateBatch(ctx, parent, nodes, mode)
		if zkstore.Directs(st) == before {
			t.Fatalf("CreateBatch(%s, %d nodes) sent no direct request", parent, len(nodes))
		}
		return made, err
	}
	for _, n := range []int{1, 3} {
		parent := fmt.Sprintf("%s/b%d", dir, n)
		var nodes []store.BatchNode
		for i := range n {
			nodes = append(nodes, store.BatchNode{Name: fmt.Sprintf("i%d-", i), Data: []byte{byte('a' + i)}})
		}
		for round := range 2 { // the parent is missing, then there
			made, err := batch(parent, nodes, store.Sequential)
			if err != nil || len(made) != n {
				t.Fatalf("CreateBatch(%d nodes), round %d = %v, %v", n, round, made, err)
			}
			for i, m := range made {
				got := must[store.Node](t)(other.Get(ctx, m.Path))
				if string(got.Data) != string(nodes[i].Data) || got.Seq != m.Seq || m.Seq != int64(round*n+i) {
					t.Fatalf("node %d of round %d: made %+v, read %+v; want data %q, Seq %d", i, round, m, got, nodes[i].Data, round*n+i)
				}
			}
		}
	}
	fixed := dir + "/fixed"
	must[store.Node](t)(other.Create(ctx, fixed+"/y", nil, store.Persistent))
	for _, names := range [][]string{{"y"}, {"x", "y", "z"}} {
		var nodes []store.BatchNode
		for _, name := range names {
			nodes = append(nodes, store.BatchNode{Name: name})
		}
		if _, err := batch(fixed, nodes, store.Persistent); !errors.Is(err, store.ErrNodeExists) {
			t.Fatalf("CreateBatch(%q) with y there = %v; want ErrNodeExists", names, err)
		}
	}
	if kids := must[[]store.Child](t)(other.Children(ctx, fixed)); len(kids) != 1 {
		t.Fatalf("after refused batches %s holds %v; want y alone", fixed, kids)
	}
}

// TestDirectChroot: a Store with a chroot sends its direct creates and
// listings under the chroot and names what they made below it.
func TestDirectChroot(t *testing.T) {
	srv, b := server(t)
	other := b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	must[store.Node](t)(other.Create(ctx, dir+"/app", nil, store.Persistent))
	st, err := zkstore.Open(ctx, []string{srv.Addr()}, zkstore.WithChroot(dir+"/app"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitDirectUp(t, st)
	before := zkstore.Directs(st)
	n, kids, err := st.CreateAndList(ctx, "/locks/x/lock-", nil, store.EphemeralSequential)
	if err != nil || store.Parent(n.Path) != "/locks/x" || len(kids) != 1 || kids[0].Name != n.Name() {
		t.Fatalf("CreateAndList under a chroot = %+v, %v, %v; want a node of /locks/x, listed", n, kids, err)
	}
	made, err := st.CreateBatch(ctx, "/q", []store.BatchNode{{Name: "a-"}, {Name: "b-"}}, store.Sequential)
	if err != nil || len(made) != 2 || store.Parent(made[1].Path) != "/q" {
		t.Fatalf("CreateBatch under a chroot = %+v, %v; want two nodes of /q", made, err)
	}
	if zkstore.Directs(st) == before {
		t.Fatal("no direct request under a chroot")
	}
	for _, p := range []string{n.Path, made[0].Path, made[1].Path} {
		if _, err := other.Get(ctx, dir+"/app"+p); err != nil {
			t.Fatalf("%s, made under the chroot %s/app: %v", p, dir, err)
		}
	}
}

// waitDirectUp waits until st has a link that takes direct requests: the
// client re-sends its credentials on a new connection first.
func waitDirectUp(t *testing.T, st *zkstore.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !zkstore.DirectUp(st) {
		if time.Now().After(deadline) {
			t.Fatal("no link takes direct requests")
		}
		if _, err := st.Get(t.Context(), "/"); err != nil {
			t.Fatal(err)
		}
	}
}
