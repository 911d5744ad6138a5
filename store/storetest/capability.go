package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/store"
)

// The optional capabilities of the store package, each tested only when
// the opened session has it.

func (s *suite) getDelete(t *testing.T) {
	a, b := s.open(t), s.open(t)
	gd, ok := a.(store.GetDeleter)
	if !ok {
		t.Skip("no store.GetDeleter")
	}
	ctx, dir := ctxFor(t), ns(t)
	n := req(t).node(b.Create(ctx, dir+"/q/item-", []byte("data"), store.Sequential))
	got, err := gd.GetDelete(ctx, n.Path)
	if err != nil || got.Path != n.Path || string(got.Data) != "data" || got.Seq != n.Seq {
		t.Errorf("GetDelete(%q) = %+v, %v; want the node as created", n.Path, got, err)
	}
	if _, err := b.Get(ctx, n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get after GetDelete = %v; want %v", err, store.ErrNoNode)
	}
	_, err = gd.GetDelete(ctx, n.Path)
	wantErr(t, "GetDelete(gone)", err, store.ErrNoNode)
	s.gone(ctx, t, b, dir+"/q")
	_, err = gd.GetDelete(ctx, dir+"/q")
	wantErr(t, "GetDelete(emptied implicit dir)", err, store.ErrNoNode)
	req(t).node(b.Create(ctx, dir+"/p/c", nil, store.Persistent))
	_, err = gd.GetDelete(ctx, dir+"/p")
	wantErr(t, "GetDelete(parent)", err, store.ErrNotEmpty)
	_, err = gd.GetDelete(ctx, "/")
	wantErr(t, "GetDelete(/)", err, store.ErrInvalidPath)
	_, err = gd.GetDelete(ctx, "bad")
	wantErr(t, "GetDelete(bad)", err, store.ErrInvalidPath)
	_, err = gd.GetDelete(cancelled(), dir+"/p/c")
	wantErr(t, "GetDelete(cancelled ctx)", err, context.Canceled)
}

// drain collects the changes of f until want of them have come, or fails.
func drain(t *testing.T, f store.ChildrenFollow, want int) []store.ChildChange {
	t.Helper()
	var got []store.ChildChange
	timeout := time.After(Timeout)
	for len(got) < want {
		cs, ready, err := f.Changes()
		got = append(got, cs...)
		if err != nil {
			t.Fatalf("Changes() = %v after %v; want %d changes", err, got, want)
		}
		if len(got) >= want {
			break
		}
		select {
		case <-ready:
		case <-timeout:
			t.Fatalf("Changes(): %v after %v; want %d changes", got, Timeout, want)
		}
	}
	return got
}

func (s *suite) followChildren(t *testing.T) {
	a, b := s.open(t), s.open(t)
	fl, ok := a.(store.ChildrenFollower)
	if !ok {
		t.Skip("no store.ChildrenFollower")
	}
	ctx, dir := ctxFor(t), ns(t)
	p := dir + "/q"
	// A missing node is followed all the same.
	f, kids, err := fl.FollowChildren(ctx, p)
	if err != nil || len(kids) != 0 {
		t.Fatalf("FollowChildren(missing) = %v, %v; want no children", kids, err)
	}
	defer f.Stop()
	x := req(t).node(b.Create(ctx, p+"/x-", nil, store.Sequential))
	y := req(t).node(b.Create(ctx, p+"/y-", nil, store.EphemeralSequential))
	req(t).node(b.Set(ctx, x.Path, []byte("changed"), store.AnyVersion))
	req(t).node(b.Create(ctx, x.Path+"/grandchild", nil, store.Persistent))
	req(t).ok(b.Delete(ctx, x.Path+"/grandchild"))
	req(t).ok(b.Delete(ctx, x.Path))
	req(t).node(b.Create(ctx, dir+"/q-sibling", nil, store.Persistent))
	z := req(t).node(b.Create(ctx, p+"/z", nil, store.Persistent))
	want := []store.ChildChange{
		{Type: store.EventCreated, Name: x.Name(), Seq: x.Seq},
		{Type: store.EventCreated, Name: y.Name(), Seq: y.Seq},
		{Type: store.EventDeleted, Name: x.Name()},
		{Type: store.EventCreated, Name: z.Name(), Seq: z.Seq},
	}
	if got := drain(t, f, len(want)); !slices.Equal(got, want) {
		t.Errorf("Changes() = %+v; want %+v (children only, in order, no data changes)", got, want)
	}
	// Sync: a change made before it returns is there when it returns.
	req(t).ok(b.Delete(ctx, z.Path))
	if err := f.Sync(ctx); err != nil {
		t.Fatalf("Sync() = %v", err)
	}
	if cs, _, err := f.Changes(); err != nil || !slices.Equal(cs, []store.ChildChange{{Type: store.EventDeleted, Name: z.Name()}}) {
		t.Errorf("Changes() after Sync = %+v, %v; want the deletion of %q", cs, err, z.Name())
	}
	// Sync with nothing new returns too.
	if err := f.Sync(ctx); err != nil {
		t.Fatalf("quiet Sync() = %v", err)
	}
	if cs, _, err := f.Changes(); len(cs) != 0 || err != nil {
		t.Errorf("Changes() after a quiet Sync = %+v, %v; want none", cs, err)
	}
	// The ephemeral child goes with b's session.
	s.b.Expire(t, b)
	if got := drain(t, f, 1); got[0] != (store.ChildChange{Type: store.EventDeleted, Name: y.Name()}) {
		t.Errorf("Changes() after expiry = %+v; want the deletion of %q", got, y.Name())
	}

	// A second follow starts from its own listing.
	c := s.open(t)
	w := req(t).node(c.Create(ctx, p+"/w", nil, store.Persistent))
	g, kids, err := fl.FollowChildren(ctx, p)
	if err != nil || len(kids) != 1 || kids[0].Name != "w" || kids[0].Seq != w.Seq {
		t.Fatalf("FollowChildren = %v, %v; want [w]", kids, err)
	}
	g.Stop()
	g.Stop()
	if _, _, err := g.Changes(); err == nil {
		t.Errorf("Changes() after Stop = nil; want an error")
	}
	_, _, err = fl.FollowChildren(ctx, "bad")
	wantErr(t, "FollowChildren(bad)", err, store.ErrInvalidPath)
	_, _, err = fl.FollowChildren(cancelled(), p)
	wantErr(t, "FollowChildren(cancelled ctx)", err, context.Canceled)
}

// A follow ends with its session, and says why; its ctx bounds only the
// listing.
func (s *suite) followEnds(t *testing.T) {
	ends := []struct {
		name string
		end  func(store.Store, context.CancelFunc)
		want error
	}{

		{"close", func(st store.Store, _ context.CancelFunc) { st.Close() }, store.ErrClosed},
		{"expire", func(st store.Store, _ context.CancelFunc) { s.b.Expire(t, st) }, store.ErrSessionExpired},
	}
	for _, e := range ends {
		t.Run(e.name, func(t *testing.T) {
			st := s.open(t)
			fl, ok := st.(store.ChildrenFollower)
			if !ok {
				t.Skip("no store.ChildrenFollower")
			}
			ctx, cancel := context.WithCancel(ctxFor(t))
			f, _, err := fl.FollowChildren(ctx, ns(t))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Stop()
			cancel()
			if err := f.Sync(ctxFor(t)); err != nil {
				t.Fatalf("Sync() after FollowChildren's ctx ended = %v; want nil", err)
			}
			e.end(st, cancel)
			timeout := time.After(Timeout)
			for {
				_, ready, err := f.Changes()
				if err != nil {
					if !errors.Is(err, e.want) {
						t.Errorf("Changes() after the end = %v; want %v", err, e.want)
					}
					if err := f.Sync(context.Background()); err == nil {
						t.Errorf("Sync() after the end = nil; want an error")
					}
					return
				}
				select {
				case <-ready:
				case <-timeout:
					t.Fatalf("follow still running %v after its end", Timeout)
				}
			}
		})
	}
}

func (s *suite) childCounter(t *testing.T) {
	a, b := s.open(t), s.open(t)
	cc, ok := a.(store.ChildCounter)
	if !ok {
		t.Skip("no store.ChildCounter")
	}
	ctx, dir := ctxFor(t), ns(t)
	_, err := cc.CountChildren(ctx, dir)
	wantErr(t, "CountChildren(missing)", err, store.ErrNoNode)
	_, _, err = cc.ChildrenCounted(ctx, dir)
	wantErr(t, "ChildrenCounted(missing)", err, store.ErrNoNode)
	req(t).node(b.Create(ctx, dir, nil, store.Persistent))
	c0, err := cc.CountChildren(ctx, dir)
	if err != nil || c0.Children != 0 || c0.Created() != 0 {
		t.Fatalf("CountChildren(empty) = %+v, %v; want zero", c0, err)
	}
	x := req(t).node(b.Create(ctx, dir+"/x-", nil, store.Sequential))
	req(t).node(b.Create(ctx, dir+"/y", nil, store.Ephemeral))
	req(t).node(b.Set(ctx, dir, []byte("d"), store.AnyVersion))
	req(t).node(b.Set(ctx, x.Path, []byte("d"), store.AnyVersion))
	req(t).node(b.Create(ctx, x.Path+"/grandchild", nil, store.Persistent))
	kids, c1, err := cc.ChildrenCounted(ctx, dir)
	if err != nil || len(kids) != 2 || c1.Children != 2 || c1.Created() != 2 {
		t.Fatalf("ChildrenCounted = %v, %+v, %v; want 2 children, 2 created", kids, c1, err)
	}
	req(t).ok(b.Delete(ctx, x.Path+"/grandchild"))
	if c, err := cc.CountChildren(ctx, dir); err != nil || c != c1 {
		t.Errorf("CountChildren after changes below a child = %+v, %v; want %+v", c, err, c1)
	}
	req(t).ok(b.Delete(ctx, x.Path))
	c2, err := cc.CountChildren(ctx, dir)
	if err != nil || c2.Children != 1 || c2.Created() != 2 || c2 == c1 {
		t.Errorf("CountChildren after a deletion = %+v, %v; want 1 child, 2 created", c2, err)
	}
	// A create and a delete change the counts even though the number of
	// children is the same.
	z := req(t).node(b.Create(ctx, dir+"/z", nil, store.Persistent))
	req(t).ok(b.Delete(ctx, z.Path))
	if c3, err := cc.CountChildren(ctx, dir); err != nil || c3.Children != 1 || c3.Created() != 3 {
		t.Errorf("CountChildren after a create and a delete = %+v, %v; want 1 child, 3 created", c3, err)
	}
	_, err = cc.CountChildren(cancelled(), dir)
	wantErr(t, "CountChildren(cancelled ctx)", err, context.Canceled)
}

func (s *suite) leased(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ls, ok := a.(store.Leaser)
	if !ok {
		t.Skip("no store.Leaser")
	}
	ctx, dir := ctxFor(t), ns(t)
	before := time.Now()
	const ttl = time.Second
	n, l, err := ls.CreateLeased(ctx, dir+"/claim", []byte("c"), ttl)
	if err != nil {
		t.Fatalf("CreateLeased = %v", err)
	}
	if d := l.Deadline(); d.Before(before.Add(ttl)) || d.After(time.Now().Add(time.Minute)) {
		t.Errorf("Deadline() = %v from now; want at least %v", time.Until(d), ttl)
	}
	got := req(t).node(b.Get(ctx, n.Path))
	if got.Owner == 0 || got.Owner == a.SessionID() || got.Owner != n.Owner || string(got.Data) != "c" {
		t.Errorf("Get(leased) = %+v; want the node, owned by its lease (%d), not the session (%d)", got, n.Owner, a.SessionID())
	}
	_, _, err = ls.CreateLeased(ctx, dir+"/claim", nil, ttl)
	wantErr(t, "CreateLeased(existing)", err, store.ErrNodeExists)
	_, _, err = ls.CreateLeased(ctx, dir+"/other", nil, 0)
	wantErr(t, "CreateLeased(ttl 0)", err, store.ErrInvalidArgument)
	old := l.Deadline()
	req(t).ok(l.Renew(ctx))
	if !l.Deadline().After(old) {
		t.Errorf("Deadline() after Renew = %v; want after %v", l.Deadline(), old)
	}
	req(t).ok(l.Revoke(ctx))
	if _, err := b.Get(ctx, n.Path); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get after Revoke = %v; want %v", err, store.ErrNoNode)
	}
	wantErr(t, "Renew after Revoke", l.Renew(ctx), store.ErrNoNode)
	req(t).ok(l.Revoke(ctx))

	// The lease outlives its session, and ends by itself.
	n, l, err = ls.CreateLeased(ctx, dir+"/orphan", nil, ttl)
	if err != nil {
		t.Fatalf("CreateLeased = %v", err)
	}
	req(t).ok(a.Close())
	exists, ev := req(t).watch(b.ExistsW(ctx, n.Path))
	if !exists {
		t.Fatalf("leased node gone with its session; want it kept until its lease ends")
	}
	wantEvent(t, fmt.Sprintf("leased node %q expiring", n.Path), ev, store.EventDeleted)
	if time.Now().Before(l.Deadline()) {
		t.Errorf("leased node deleted %v before its Deadline", time.Until(l.Deadline()))
	}
}

func (s *suite) guardedCreate(t *testing.T) {
	a, b := s.open(t), s.open(t)
	gc, ok := a.(store.GuardedCreator)
	if !ok {
		t.Skip("no store.GuardedCreator")
	}
	ctx, dir := ctxFor(t), ns(t)
	guard, p := dir+"/items/x", dir+"/claims/x"
	_, err := gc.CreateIf(ctx, p, nil, store.Ephemeral, guard)
	wantErr(t, "CreateIf(missing guard)", err, store.ErrNoNode)
	if _, err := b.Get(ctx, p); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get after a refused CreateIf = %v; want %v", err, store.ErrNoNode)
	}
	req(t).node(b.Create(ctx, guard, nil, store.Persistent))
	n, err := gc.CreateIf(ctx, p, []byte("c"), store.Ephemeral, guard)
	if err != nil || n.Path != p || n.Owner != a.SessionID() {
		t.Fatalf("CreateIf = %+v, %v; want %q owned by the session", n, err, p)
	}
	if got := req(t).node(b.Get(ctx, p)); string(got.Data) != "c" || got.Owner != a.SessionID() {
		t.Errorf("Get(%q) = %+v; want the node made", p, got)
	}
	_, err = gc.CreateIf(ctx, p, nil, store.Ephemeral, guard)
	wantErr(t, "CreateIf(existing)", err, store.ErrNodeExists)
	_, err = gc.CreateIf(ctx, dir+"/claims/y-", nil, store.Sequential, guard)
	wantErr(t, "CreateIf(sequential)", err, store.ErrInvalidArgument)
	_, err = gc.CreateIf(ctx, dir+"/claims/z", nil, store.Persistent, "bad")
	wantErr(t, "CreateIf(bad guard)", err, store.ErrInvalidPath)
	_, err = gc.CreateIf(cancelled(), dir+"/claims/z", nil, store.Persistent, guard)
	wantErr(t, "CreateIf(cancelled ctx)", err, context.Canceled)
	req(t).ok(b.Delete(ctx, guard))
	_, err = gc.CreateIf(ctx, dir+"/claims/z", nil, store.Persistent, guard)
	wantErr(t, "CreateIf(deleted guard)", err, store.ErrNoNode)
}

// nodeWatch checks store.NodeWatcher, and store.WatchNode over a store
// that hides it (the fallback through ExistsW): a watch on a node that
// exists reports its data change and its deletion; a missing node fails
// with ErrNoNode and gives no channel, so that nothing waits for a creation
// that may never come.
func (s *suite) nodeWatch(t *testing.T) {
	a, b := s.open(t), s.open(t)
	nw, ok := a.(store.NodeWatcher)
	if !ok {
		t.Skip("no store.NodeWatcher")
	}
	for _, bad := range []string{"", "rel", "/a//b", "/a/"} {
		if _, ch, err := nw.NodeW(ctxFor(t), bad); !errors.Is(err, store.ErrInvalidPath) || ch != nil {
			t.Errorf("NodeW(%q) = %v, %v; want no watch and ErrInvalidPath", bad, ch, err)
		}
	}
	for _, tc := range []struct {
		name string
		st   store.Store
	}{
		{"NodeW", a},
		{"fallback", struct{ store.Store }{a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, dir := ctxFor(t), ns(t)
			p := dir + "/w"
			stat, ch, err := store.WatchNode(ctx, tc.st, p)
			if !errors.Is(err, store.ErrNoNode) || ch != nil || stat != (store.Stat{}) {
				t.Fatalf("WatchNode(missing) = %+v, %v, %v; want no watch and %v", stat, ch, err, store.ErrNoNode)
			}
			n := req(t).node(b.Create(ctx, dir+"/c-", nil, store.EphemeralSequential))
			stat, ch, err = store.WatchNode(ctx, tc.st, n.Path)
			req(t).ok(err)
			if want := (store.Stat{Seq: n.Seq, Owner: b.SessionID()}); stat != want {
				t.Errorf("WatchNode(%q) = %+v; want %+v", n.Path, stat, want)
			}
			req(t).node(b.Set(ctx, n.Path, []byte("x"), store.AnyVersion))
			wantEvent(t, "set", ch, store.EventDataChanged)

			stat, ch, err = store.WatchNode(ctx, tc.st, n.Path)
			req(t).ok(err)
			if stat.Version != 1 {
				t.Errorf("WatchNode after Set: Version %d; want 1", stat.Version)
			}
			req(t).node(b.Create(ctx, p, nil, store.Persistent))
			req(t).node(b.Create(ctx, p+"/kid", nil, store.Persistent))
			quiet(t, "node watch after a sibling and its child were created", ch)
			req(t).ok(b.Delete(ctx, n.Path))
			wantEvent(t, "delete", ch, store.EventDeleted)

			wctx, cancel := context.WithCancel(ctx)
			_, ch, err = store.WatchNode(wctx, tc.st, p)
			req(t).ok(err)
			cancel()
			wantErrEvent(t, "WatchNode after cancel", ch, context.Canceled)

			_, _, err = store.WatchNode(ctx, tc.st, "bad")
			wantErr(t, "WatchNode(bad)", err, store.ErrInvalidPath)
			_, _, err = store.WatchNode(cancelled(), tc.st, p)
			wantErr(t, "WatchNode(cancelled ctx)", err, context.Canceled)
		})
	}
	// A pending watch ends with the session.
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(b.Create(ctx, dir+"/p", nil, store.Persistent))
	_, ch, err := store.WatchNode(ctx, a, dir+"/p")
	req(t).ok(err)
	_ = a.Close()
	wantErrEvent(t, "WatchNode after Close", ch, store.ErrClosed)
	_, _, err = store.WatchNode(ctx, a, dir+"/p")
	wantErr(t, "WatchNode after Close", err, store.ErrClosed)
}

// batchCreate checks store.BatchCreator: a batch is made whole, in order,
// under a parent made as Create makes it; one node that exists fails the
// whole batch and leaves nothing; misuse and the limits fail before any
// I/O.
func (s *suite) batchCreate(t *testing.T) {
	a, b := s.open(t), s.open(t)
	bc, ok := a.(store.BatchCreator)
	if !ok {
		t.Skip("no store.BatchCreator")
	}
	ctx, dir := ctxFor(t), ns(t)
	items := dir + "/items"
	batch := []store.BatchNode{{Name: "a-", Data: []byte("1")}, {Name: "b-", Data: []byte("2")}, {Name: "c-"}}
	nodes, err := bc.CreateBatch(ctx, items, batch, store.Sequential)
	if err != nil || len(nodes) != len(batch) {
		t.Fatalf("CreateBatch(sequential) = %v, %v; want %d nodes", nodes, err, len(batch))
	}
	for i, n := range nodes {
		if store.Parent(n.Path) != items || !strings.HasPrefix(n.Name(), batch[i].Name) {
			t.Errorf("CreateBatch node %d = %+v; want %q... under %q", i, n, batch[i].Name, items)
		}
		if i > 0 && n.Seq < nodes[i-1].Seq {
			t.Errorf("CreateBatch Seqs %d, %d; want them in batch order", nodes[i-1].Seq, n.Seq)
		}
		if got := req(t).node(b.Get(ctx, n.Path)); string(got.Data) != string(batch[i].Data) || got.Seq != n.Seq || got.Owner != 0 {
			t.Errorf("Get(%q) = %+v; want data %q, Seq %d, persistent", n.Path, got, batch[i].Data, n.Seq)
		}
	}
	// A later single create comes after the whole batch.
	later := req(t).node(b.Create(ctx, items+"/z-", nil, store.Sequential))
	if later.Seq <= nodes[len(nodes)-1].Seq {
		t.Errorf("Seq of a create after the batch = %d; want more than %d", later.Seq, nodes[len(nodes)-1].Seq)
	}

	// A batch of one is a batch too (an adapter may send it as a plain
	// create): made under a parent made for it, after the nodes before it.
	one, err := bc.CreateBatch(ctx, dir+"/one", []store.BatchNode{{Name: "o-", Data: []byte("1")}}, store.Sequential)
	if err != nil || len(one) != 1 || store.Parent(one[0].Path) != dir+"/one" || !strings.HasPrefix(one[0].Name(), "o-") {
		t.Fatalf("CreateBatch(one node) = %v, %v; want one o-... under %q", one, err, dir+"/one")
	}
	if got := req(t).node(b.Get(ctx, one[0].Path)); string(got.Data) != "1" || got.Seq != one[0].Seq || got.Owner != 0 {
		t.Errorf("Get(%q) = %+v; want data 1, Seq %d, persistent", one[0].Path, got, one[0].Seq)
	}
	if one, err := bc.CreateBatch(ctx, items, []store.BatchNode{{Name: "y-"}}, store.Sequential); err != nil || one[0].Seq <= later.Seq {
		t.Errorf("CreateBatch(one node after a create) = %v, %v; want a Seq above %d", one, err, later.Seq)
	}

	// All or none: one existing name fails the batch.
	fixed := dir + "/fixed"
	req(t).node(b.Create(ctx, fixed+"/y", nil, store.Persistent))
	_, err = bc.CreateBatch(ctx, fixed, []store.BatchNode{{Name: "y"}}, store.Persistent)
	wantErr(t, "CreateBatch(its one node exists)", err, store.ErrNodeExists)
	_, err = bc.CreateBatch(ctx, fixed, []store.BatchNode{{Name: "x"}, {Name: "y"}}, store.Persistent)
	wantErr(t, "CreateBatch(one node exists)", err, store.ErrNodeExists)
	if _, err := b.Get(ctx, fixed+"/x"); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get of a node of a refused batch = %v; want %v", err, store.ErrNoNode)
	}
	_, err = bc.CreateBatch(ctx, fixed, []store.BatchNode{{Name: "x"}, {Name: "x"}}, store.Persistent)
	wantErr(t, "CreateBatch(a name twice)", err, store.ErrNodeExists)

	eph := req(t).node(a.Create(ctx, dir+"/eph", nil, store.Ephemeral))
	_, err = bc.CreateBatch(ctx, eph.Path, batch, store.Sequential)
	wantErr(t, "CreateBatch(ephemeral parent)", err, store.ErrEphemeralParent)
	_, err = bc.CreateBatch(ctx, eph.Path, batch[:1], store.Sequential)
	wantErr(t, "CreateBatch(one node, ephemeral parent)", err, store.ErrEphemeralParent)

	// Misuse and limits, before any I/O.
	big := make([]store.BatchNode, store.MaxBatchNodes+1)
	for i := range big {
		big[i].Name = "n-"
	}
	heavy := []store.BatchNode{{Name: "h1", Data: make([]byte, store.MaxBatchSize/2)}, {Name: "h2", Data: make([]byte, store.MaxBatchSize/2)}}
	for _, c := range []struct {
		what   string
		parent string
		batch  []store.BatchNode
		mode   store.Mode
		want   error
	}{
		{"nil batch", items, nil, store.Sequential, store.ErrInvalidArgument},
		{"empty batch", items, []store.BatchNode{}, store.Sequential, store.ErrInvalidArgument},
		{"ephemeral mode", items, batch, store.Ephemeral, store.ErrInvalidArgument},
		{"ephemeral sequential mode", items, batch, store.EphemeralSequential, store.ErrInvalidArgument},
		{"unknown mode", items, batch, store.Mode(8), store.ErrInvalidArgument},
		{"bad parent", "bad", batch, store.Sequential, store.ErrInvalidPath},
		{"empty name", items, []store.BatchNode{{Name: ""}}, store.Sequential, store.ErrInvalidPath},
		{"name with a slash", items, []store.BatchNode{{Name: "a/b"}}, store.Sequential, store.ErrInvalidPath},
		{"too many nodes", items, big, store.Sequential, store.ErrTooLarge},
		{"too many bytes", items, heavy, store.Sequential, store.ErrTooLarge},
		{"data over MaxDataSize", items, []store.BatchNode{{Name: "d", Data: make([]byte, store.MaxDataSize+1)}}, store.Sequential, store.ErrTooLarge},
	} {
		_, err := bc.CreateBatch(ctx, c.parent, c.batch, c.mode)
		wantErr(t, "CreateBatch("+c.what+")", err, c.want)
	}
	_, err = bc.CreateBatch(cancelled(), items, batch, store.Sequential)
	wantErr(t, "CreateBatch(cancelled ctx)", err, context.Canceled)
	if kids := req(t).kids(b.Children(ctx, items)); len(kids) != len(batch)+2 {
		t.Errorf("Children after refused batches = %d nodes; want %d", len(kids), len(batch)+2)
	}
	if err := store.ValidateBatch(items, batch, store.Sequential); err != nil {
		t.Errorf("ValidateBatch(a good batch) = %v; want nil", err)
	}
}
