package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
