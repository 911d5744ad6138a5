package storetest

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/store"
)

// gone checks that none of paths exists: at once, or within the
// backend's ReclaimWithin when it is a Reclaimer.
func (s *suite) gone(ctx context.Context, t *testing.T, st store.Store, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := s.waitGone(ctx, st, p); err != nil {
			t.Errorf("%v: a directory Create made outlived its last node", err)
		}
	}
}

// waitGone returns nil once nothing is at p: at once, or within the
// backend's ReclaimWithin when it is a Reclaimer, waiting on a watch.
func (s *suite) waitGone(ctx context.Context, st store.Store, p string) error {
	var bound time.Duration
	if r, ok := s.b.(Reclaimer); ok {
		bound = r.ReclaimWithin()
	}
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		ok, _, ch, err := st.ExistsW(ctx, p)
		if err != nil {
			return fmt.Errorf("ExistsW(%q) = %w", p, err)
		}
		if !ok {
			return nil
		}
		select {
		case <-ch:
		case <-wctx.Done():
			return fmt.Errorf("%q still there %v after the delete of its last node", p, bound)
		}
	}
}

// explicitParents: what Create was asked to make stays, empty or not; what
// it made on the way is removed with its last node, by any kind of delete,
// and only up to the first node made explicitly.
func (s *suite) explicitParents(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(a.Create(ctx, dir, nil, store.Persistent))
	req(t).node(a.Create(ctx, dir+"/x", []byte("mine"), store.Persistent))

	// An explicit node with implicit directories above it and below it.
	c := req(t).node(a.Create(ctx, dir+"/x/i/j/c-", nil, store.EphemeralSequential))
	_, err := b.Create(ctx, dir+"/x/i", nil, store.Persistent)
	wantErr(t, "Create(implicit dir)", err, store.ErrNodeExists)
	req(t).ok(b.Delete(ctx, c.Path))
	s.gone(ctx, t, b, dir+"/x/i/j", dir+"/x/i")
	if n, err := b.Get(ctx, dir+"/x"); err != nil || string(n.Data) != "mine" {
		t.Errorf("Get(explicit %q) = %+v, %v; want it kept", dir+"/x", n, err)
	}
	req(t).node(b.Get(ctx, dir))

	// An explicit leaf in an implicit directory: deleting it is the
	// last one out.
	req(t).node(a.Create(ctx, dir+"/d/leaf", nil, store.Persistent))
	req(t).ok(a.Delete(ctx, dir+"/d/leaf"))
	s.gone(ctx, t, a, dir+"/d")

	// Every delete of the optional capabilities is a last one out too.
	if sd, ok := a.(store.SeqDeleter); ok {
		n := req(t).node(a.Create(ctx, dir+"/s/n-", nil, store.EphemeralSequential))
		req(t).ok(sd.DeleteSeq(ctx, n.Path, n.Seq))
		s.gone(ctx, t, a, dir+"/s")
	}
	if fd, ok := a.(store.FrontDeleter); ok {
		n := req(t).node(a.Create(ctx, dir+"/f/n-", nil, store.EphemeralSequential))
		req(t).ok(fd.DeleteFront(ctx, n.Path, n.Seq))
		s.gone(ctx, t, a, dir+"/f")
		// The record went with its directory: a new one has none.
		m := req(t).node(a.Create(ctx, dir+"/f/n-", nil, store.EphemeralSequential))
		if ok, err := fd.FollowsFront(ctx, m.Path, m.Seq, n.Seq); err != nil || ok {
			t.Errorf("FollowsFront in a re-made directory = %v, %v; want false: the record outlived its directory", ok, err)
		}
		req(t).ok(a.Delete(ctx, m.Path))
		s.gone(ctx, t, a, dir+"/f")
	}
	if gd, ok := a.(store.GetDeleter); ok {
		n := req(t).node(a.Create(ctx, dir+"/g/n-", nil, store.Sequential))
		_, err := gd.GetDelete(ctx, n.Path)
		req(t).ok(err)
		s.gone(ctx, t, a, dir+"/g")
	}
	// A directory left empty by a session's end and deleted by name
	// leaves no trace: a node created at its path is the creator's.
	c2 := s.open(t)
	req(t).node(c2.Create(ctx, dir+"/k/e", nil, store.Ephemeral))
	if err := c2.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := b.Delete(ctx, dir+"/k"); err != nil && !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Delete(emptied directory) = %v", err)
	}
	req(t).node(b.Create(ctx, dir+"/k", nil, store.Persistent))
	req(t).node(b.Create(ctx, dir+"/k/c", nil, store.Persistent))
	req(t).ok(b.Delete(ctx, dir+"/k/c"))
	req(t).node(b.Get(ctx, dir+"/k"))
	req(t).ok(b.Delete(ctx, dir+"/k"))

	kids := req(t).kids(b.Children(ctx, dir))
	if len(kids) != 1 || kids[0].Name != "x" {
		t.Errorf("Children(%q) = %v; want only the explicit x", dir, kids)
	}
}

// reclaimedOnSessionEnd: a session's end that takes a directory's last
// nodes takes the directory too, on a backend whose store sees it.
func (s *suite) reclaimedOnSessionEnd(t *testing.T) {
	r, ok := s.b.(Reaper)
	if !ok {
		t.Skip("the backend's store does not see a session's nodes go")
	}
	a, b := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(b.Create(ctx, dir, nil, store.Persistent))
	req(t).node(a.Create(ctx, dir+"/e/f/n-", nil, store.EphemeralSequential))
	ok, ch := req(t).watch(b.ExistsW(ctx, dir+"/e"))
	if !ok {
		t.Fatalf("ExistsW(%q) = false; want true", dir+"/e")
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, r.ReapWithin()+Timeout)
	defer cancel()
	for {
		select {
		case ev := <-ch:
			if ev.Err != nil {
				t.Fatalf("watch on %q: %v", dir+"/e", ev.Err)
			}
		case <-wctx.Done():
			t.Fatalf("%q still there %v after the session ended", dir+"/e", r.ReapWithin()+Timeout)
		}
		var exists bool
		exists, _, ch, _ = b.ExistsW(ctx, dir+"/e")
		if ch == nil {
			t.Fatalf("ExistsW(%q) failed", dir+"/e")
		}
		if !exists {
			break
		}
	}
	s.gone(ctx, t, b, dir+"/e/f")
	req(t).node(b.Get(ctx, dir))
}

// reclaimRace: contenders that come and go in directories being removed
// under them all succeed, each create in a directory it makes again when
// it must, and every directory is gone in the end.
func (s *suite) reclaimRace(t *testing.T) {
	const workers, rounds = 6, 25
	ctx, dir := ctxFor(t), ns(t)
	sts := make([]store.Store, 3)
	for i := range sts {
		sts[i] = s.open(t)
	}
	req(t).node(sts[0].Create(ctx, dir, nil, store.Persistent))
	var wg gosync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := sts[w%len(sts)]
			for i := range rounds {
				// Half share one directory, half use their own.
				p := fmt.Sprintf("%s/shared/d/n-", dir)
				if w%2 == 1 {
					p = fmt.Sprintf("%s/own-%d-%d/n-", dir, w, i)
				}
				n, err := st.Create(ctx, p, nil, store.EphemeralSequential)
				if err != nil {
					errs <- fmt.Errorf("Create(%q) in round %d: %w", p, i, err)
					return
				}
				if err := st.Delete(ctx, n.Path); err != nil {
					errs <- fmt.Errorf("Delete(%q): %w", n.Path, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, k := range req(t).kids(sts[0].Children(ctx, dir)) {
		s.gone(ctx, t, sts[0], store.Join(dir, k.Name))
	}
}

// reclaimWatch: a watch on a directory, or on a node in it, fires when the
// directory goes, so that nobody waits on a directory that is no more.
func (s *suite) reclaimWatch(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	n := req(t).node(a.Create(ctx, dir+"/d/n-", nil, store.EphemeralSequential))
	_, onDir := req(t).watch(b.ExistsW(ctx, dir+"/d"))
	_, onNode := req(t).watch(b.ExistsW(ctx, n.Path))
	var onKids <-chan store.Event
	_, onKids = req(t).kidsW(b.ChildrenW(ctx, dir+"/d"))
	req(t).ok(a.Delete(ctx, n.Path))
	wantEvent(t, "watch on the node", onNode, store.EventDeleted)
	wantEvent(t, "watch on its directory", onDir, store.EventDeleted)
	if onKids != nil {
		ev := event(t, "children watch on the directory", onKids)
		if ev.Err != nil || (ev.Type != store.EventChildrenChanged && ev.Type != store.EventDeleted) {
			t.Errorf("children watch on the directory: %+v; want a change", ev)
		}
	}
}

// reclaimSiblings: a directory emptied of one child's subtree stays while
// it holds anything else, whatever its name: siblings whose names continue
// the emptied child's ("r.x", "q0") keep it, level after level.
func (s *suite) reclaimSiblings(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(st.Create(ctx, dir, nil, store.Persistent))
	n := req(t).node(st.Create(ctx, dir+"/p/q/r/n-", nil, store.EphemeralSequential))
	req(t).node(st.Create(ctx, dir+"/p/q/r.x", nil, store.Persistent))
	req(t).node(st.Create(ctx, dir+"/p/q0", nil, store.Persistent))
	req(t).ok(st.Delete(ctx, n.Path))
	s.gone(ctx, t, st, dir+"/p/q/r")
	req(t).node(st.Get(ctx, dir+"/p/q"))
	req(t).ok(st.Delete(ctx, dir+"/p/q/r.x"))
	s.gone(ctx, t, st, dir+"/p/q")
	req(t).node(st.Get(ctx, dir+"/p"))
	req(t).ok(st.Delete(ctx, dir+"/p/q0"))
	s.gone(ctx, t, st, dir+"/p")
	req(t).node(st.Get(ctx, dir))
}

// reclaimReuse: a name used again after its directory went (a lock
// locked and unlocked over and over) makes the directory again, as
// implicit as the first time, at one level as at two.
func (s *suite) reclaimReuse(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(st.Create(ctx, dir, nil, store.Persistent))
	for _, p := range []string{dir + "/one/n-", dir + "/two/d/n-"} {
		for i := range 3 {
			n := req(t).node(st.Create(ctx, p, nil, store.EphemeralSequential))
			if kids := req(t).kids(st.Children(ctx, store.Parent(n.Path))); len(kids) != 1 || kids[0].Name != n.Name() {
				t.Errorf("round %d: Children(%q) = %v; want only %q", i, store.Parent(n.Path), kids, n.Name())
			}
			req(t).ok(st.Delete(ctx, n.Path))
			s.gone(ctx, t, st, dir+"/one", dir+"/two")
		}
	}
	req(t).node(st.Get(ctx, dir))
}
