package etcdstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/store"
)

// A watch call opens an etcd watch at the current revision (no start
// revision) with created-notify, reads the watched range, and only then
// trusts the watch: the watch reports every change after the revision R_w
// in its created notification, the read sees the state at a revision R_r,
// and the read is repeated until R_r >= R_w. Events at or below R_r are
// already in the read and are skipped, so exactly the changes after the
// check are reported: no gap, no stale event.
//
// The watch is opened first and the read sent without waiting for the
// created notification, so both travel together: one round trip in the
// common case. A watch opened at the current revision joins etcd's synced
// watcher group and is notified as soon as a change commits, where a watch
// from "read revision + 1" usually lands in the unsynced group, caught up
// only every 100 ms (see docs/architecture.md, "Rules learned from faults").
//
// Watches carry require-leader, so a watch served by a member that lost its
// leader is cancelled by the server instead of hanging; the event then
// carries ErrDisconnected. If the client resumes the watch after a broken
// stream from a revision that has since been compacted, the watch is opened
// again and the range re-read; a difference from the last read is reported
// as the event, otherwise the wait goes on.

// watchSpec says what one kind of watch watches and what counts as its
// event.
type watchSpec struct {
	op, path  string
	key       string
	readOpts  []clientv3.OpOption
	watchOpts []clientv3.OpOption
	// event returns the event a change reported by etcd means, if any.
	event func(ev *clientv3.Event) (store.EventType, bool)
	// diff returns the event the difference between two reads means, if
	// any.
	diff func(old, cur []*mvccpb.KeyValue) (store.EventType, bool)
	// exists, when set, says whether the read found the watched node;
	// a missing node fails the call with ErrNoNode and keeps no watch.
	exists func(kvs []*mvccpb.KeyValue) bool
}

// ExistsW reports whether p exists and returns a one-shot channel (capacity
// 1) that delivers the next creation, deletion or data change of p, then is
// closed. If ctx ends, the session ends or the Store is closed first, or
// the watch fails (ErrDisconnected), the event carries Err. It blocks for
// about one round trip. The root always exists and never changes: its
// channel only ever delivers an Err.
func (s *Store) ExistsW(ctx context.Context, p string) (bool, store.Stat, <-chan store.Event, error) {
	if err := store.ValidatePath(p); err != nil {
		return false, store.Stat{}, nil, err
	}
	if p == "/" {
		if err := s.sessionErr(); err != nil {
			return false, store.Stat{}, nil, fmt.Errorf("etcdstore: exists %q: %w", store.ShortPath(p), err)
		}
		out := make(chan store.Event, 1)
		if !s.goWatch(func() { s.idle(ctx, "exists", p, out) }) {
			return false, store.Stat{}, nil, fmt.Errorf("etcdstore: exists %q: %w", store.ShortPath(p), s.sessionErr())
		}
		return true, store.Stat{}, out, nil
	}
	kvs, out, err := s.watch(ctx, nodeSpec("exists", p))
	if err != nil {
		return false, store.Stat{}, nil, err
	}
	if kv := find(p, kvs); kv != nil {
		return true, node(kv).Stat(), out, nil
	}
	return false, store.Stat{}, out, nil
}

// NodeW returns the Stat of the node at p and a one-shot channel (capacity
// 1) that delivers its next data change or its deletion, then is closed;
// see [store.NodeWatcher]. The Err rules are those of ExistsW. ErrNoNode,
// with no watch, when p does not exist: the watch opened beside the read
// is cancelled at once.
func (s *Store) NodeW(ctx context.Context, p string) (store.Stat, <-chan store.Event, error) {
	if p == "/" {
		_, stat, ev, err := s.ExistsW(ctx, p)
		return stat, ev, err
	}
	if err := store.ValidatePath(p); err != nil {
		return store.Stat{}, nil, err
	}
	spec := nodeSpec("watch", p)
	spec.exists = func(kvs []*mvccpb.KeyValue) bool { return find(p, kvs) != nil }
	kvs, out, err := s.watch(ctx, spec)
	if err != nil {
		return store.Stat{}, nil, err
	}
	return node(find(p, kvs)).Stat(), out, nil
}

// nodeSpec is the watch of the key p: its creation, deletion or data
// change.
func nodeSpec(op, p string) *watchSpec {
	return &watchSpec{
		op: op, path: p, key: p,
		event: func(ev *clientv3.Event) (store.EventType, bool) {
			switch {
			case ev.Type == mvccpb.DELETE:
				return store.EventDeleted, true
			case ev.IsCreate():
				return store.EventCreated, true
			}
			return store.EventDataChanged, true
		},
		diff: diffNode(p),
	}
}

// ChildrenW returns the children of p as Children does and a one-shot
// channel (capacity 1) that delivers the next creation or deletion of a
// direct child (EventChildrenChanged) or the deletion of p (EventDeleted),
// then is closed; a change to the data of p or of a child is not reported.
// The Err rules are those of ExistsW. ErrNoNode, with no watch, when p does
// not exist.
func (s *Store) ChildrenW(ctx context.Context, p string) ([]store.Child, <-chan store.Event, error) {
	if err := store.ValidatePath(p); err != nil {
		return nil, nil, err
	}
	key, readOpts := listRange(p)
	watchOpts := []clientv3.OpOption{clientv3.WithRange(p + "0")}
	if p == "/" {
		watchOpts = []clientv3.OpOption{clientv3.WithPrefix()}
	}
	spec := &watchSpec{
		op: "children", path: p, key: key,
		readOpts: readOpts, watchOpts: watchOpts,
		event: func(ev *clientv3.Event) (store.EventType, bool) {
			k := string(ev.Kv.Key)
			if k == p && p != "/" {
				return store.EventDeleted, ev.Type == mvccpb.DELETE
			}
			if !isChild(p, k) {
				return store.EventNone, false
			}
			return store.EventChildrenChanged, ev.Type == mvccpb.DELETE || ev.IsCreate()
		},
		diff: diffChildren(p),
		exists: func(kvs []*mvccpb.KeyValue) bool {
			ok, _ := children(p, kvs)
			return ok
		},
	}
	kvs, out, err := s.watch(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	_, kids := children(p, kvs)
	return kids, out, nil
}

func isChild(p, k string) bool {
	prefix := p + "/"
	if p == "/" {
		prefix = "/"
	}
	name, ok := strings.CutPrefix(k, prefix)
	return ok && name != "" && !strings.Contains(name, "/")
}

// diffNode compares two reads of the key p.
func diffNode(p string) func(old, cur []*mvccpb.KeyValue) (store.EventType, bool) {
	return func(old, cur []*mvccpb.KeyValue) (store.EventType, bool) {
		o, c := find(p, old), find(p, cur)
		switch {
		case o == nil && c == nil:
			return store.EventNone, false
		case o == nil:
			return store.EventCreated, true
		case c == nil, o.CreateRevision != c.CreateRevision:
			return store.EventDeleted, true
		case o.ModRevision != c.ModRevision:
			return store.EventDataChanged, true
		}
		return store.EventNone, false
	}
}

// diffChildren compares two reads of listRange(p).
func diffChildren(p string) func(old, cur []*mvccpb.KeyValue) (store.EventType, bool) {
	return func(old, cur []*mvccpb.KeyValue) (store.EventType, bool) {
		if p != "/" {
			o, c := find(p, old), find(p, cur)
			if c == nil || o == nil || o.CreateRevision != c.CreateRevision {
				return store.EventDeleted, true
			}
		}
		_, ok := children(p, old)
		_, ck := children(p, cur)
		if !slices.Equal(ok, ck) {
			return store.EventChildrenChanged, true
		}
		return store.EventNone, false
	}
}

func find(key string, kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv
		}
	}
	return nil
}

// watcher is one open etcd watch.
type watcher struct {
	ch     clientv3.WatchChan
	cancel context.CancelFunc
}

// open opens the watch of spec and reads its range, as the comment at the
// top of this file explains, as one attempt: ctx and the attempt timeout
// bound the call, not the watch, which lives until its cancel is called or
// the session ends.
//
// clientv3's Watch blocks until its stream is (re)established, on the
// watch's own context: after a lost connection that can take as long as
// the outage. So until the watch is set up, its context also ends with the
// attempt; once it is, only its cancel or the session's end stop it.
func (s *Store) open(ctx context.Context, spec *watchSpec) (watcher, *clientv3.GetResponse, error) {
	a, err := s.startAttempt(ctx) // ends with the session too (see call.go)
	if err != nil {
		return watcher{}, nil, err
	}
	defer a.end()
	actx := a.ctx
	wctx, cancel := context.WithCancel(s.watchCtx)
	detach := context.AfterFunc(actx, cancel)
	fail := func(err error) (watcher, *clientv3.GetResponse, error) {
		cancel()
		if serr := s.sessionErr(); serr != nil {
			return watcher{}, nil, serr
		}
		if ctx.Err() == nil && actx.Err() == context.DeadlineExceeded {
			s.log.Debug("etcdstore: attempt given up", "op", spec.op, "path", spec.path, "timeout", s.attempt, "err", err)
			err = fmt.Errorf("%w: watch not set up within the attempt timeout (%v): %w", store.ErrDisconnected, s.attempt, err)
		}
		return watcher{}, nil, err
	}
	w := watcher{
		ch:     s.watcher.Watch(wctx, spec.key, append(spec.watchOpts, clientv3.WithCreatedNotify())...),
		cancel: cancel,
	}
	resp, err := s.kv.Get(actx, spec.key, spec.readOpts...)
	if err != nil {
		return fail(err)
	}
	var created clientv3.WatchResponse
	select {
	case wr, ok := <-w.ch:
		if !ok {
			if err := actx.Err(); err != nil {
				return fail(context.Cause(actx))
			}
			return fail(fmt.Errorf("%w: watch closed before it was created", store.ErrDisconnected))
		}
		if err := wr.Err(); err != nil {
			return fail(watchErr(err))
		}
		created = wr
	case <-actx.Done():
		return fail(context.Cause(actx))
	}
	if resp.Header.Revision < created.Header.Revision {
		// The read was served at an older revision than the watch
		// starts from (another member, or a write in between): read
		// again, now at or after the watch's start.
		if resp, err = s.kv.Get(actx, spec.key, spec.readOpts...); err != nil {
			return fail(err)
		}
	}
	if !detach() {
		// The attempt ended just now, and the watch with it.
		return fail(context.Cause(actx))
	}
	// A read answered after the session's end proves nothing.
	if err := s.sessionErr(); err != nil {
		return fail(err)
	}
	return w, resp, nil
}

// watch opens the watch of spec and serves it in a goroutine owned by the
// Store. It returns the read, the event channel, or an error and no watch.
func (s *Store) watch(ctx context.Context, spec *watchSpec) ([]*mvccpb.KeyValue, <-chan store.Event, error) {
	if err := s.enter(ctx); err != nil {
		return nil, nil, fmt.Errorf("etcdstore: %s %q: %w", spec.op, store.ShortPath(spec.path), err)
	}
	w, resp, err := s.open(ctx, spec)
	if err != nil {
		return nil, nil, s.fail(ctx, spec.op, spec.path, err)
	}
	if spec.exists != nil && !spec.exists(resp.Kvs) {
		w.cancel()
		return nil, nil, fmt.Errorf("etcdstore: %s %q: %w", spec.op, store.ShortPath(spec.path), store.ErrNoNode)
	}
	out := make(chan store.Event, 1)
	if !s.goWatch(func() { s.serve(ctx, spec, w, resp, out) }) {
		w.cancel()
		return nil, nil, fmt.Errorf("etcdstore: %s %q: %w", spec.op, store.ShortPath(spec.path), s.sessionErr())
	}
	return resp.Kvs, out, nil
}

// goWatch runs f in a goroutine the Store waits for in Close, unless the
// session has ended.
func (s *Store) goWatch(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.wg.Go(f)
	return true
}

// serve waits for the event of a watch and delivers it on out.
func (s *Store) serve(ctx context.Context, spec *watchSpec, w watcher, last *clientv3.GetResponse, out chan<- store.Event) {
	defer func() { w.cancel() }()
	send := func(t store.EventType, err error) {
		if err == nil {
			// An event that arrives after the session's end
			// may come from the server's expiry of the lease.
			err = s.sessionErr()
		}
		ev := store.Event{Type: t, Path: spec.path}
		if err != nil {
			ev = store.Event{Path: spec.path, Err: fmt.Errorf("etcdstore: %s %q: %w", spec.op, store.ShortPath(spec.path), err)}
		}
		out <- ev
		close(out)
	}
	for {
		select {
		case <-s.ctx.Done():
			send(store.EventNone, s.sessionErr())
			return
		case <-ctx.Done():
			send(store.EventNone, ctx.Err())
			return
		case wr, ok := <-w.ch:
			switch {
			case !ok && s.ctx.Err() != nil:
				send(store.EventNone, s.sessionErr())
				return
			case !ok:
				s.probe()
				send(store.EventNone, fmt.Errorf("%w: watch closed", store.ErrDisconnected))
				return
			case wr.CompactRevision != 0:
				w.cancel()
				var err error
				var cur *clientv3.GetResponse
				if w, cur, err = s.reopen(ctx, spec); err != nil {
					send(store.EventNone, err)
					return
				}
				if t, changed := spec.diff(last.Kvs, cur.Kvs); changed {
					send(t, nil)
					return
				}
				last = cur
				continue
			case wr.Err() != nil:
				// No leader, most likely: find out whether the
				// session can still be renewed.
				s.probe()
				send(store.EventNone, watchErr(wr.Err()))
				return
			}
			for _, ev := range wr.Events {
				if ev.Kv.ModRevision <= last.Header.Revision {
					continue
				}
				if t, ok := spec.event(ev); ok {
					send(t, nil)
					return
				}
			}
		}
	}
}

// reopen opens a watch again after its revision was compacted.
func (s *Store) reopen(ctx context.Context, spec *watchSpec) (watcher, *clientv3.GetResponse, error) {
	if err := s.enter(ctx); err != nil {
		return watcher{}, nil, err
	}
	w, resp, err := s.open(ctx, spec)
	if err != nil {
		if serr := s.sessionErr(); serr != nil {
			return watcher{}, nil, serr
		}
		return watcher{}, nil, classify(ctx, err)
	}
	return w, resp, nil
}

// idle serves the watch of something that never changes (the root): it
// only ends with ctx or the session.
func (s *Store) idle(ctx context.Context, op, p string, out chan<- store.Event) {
	var err error
	select {
	case <-s.ctx.Done():
		err = s.sessionErr()
	case <-ctx.Done():
		err = ctx.Err()
	}
	out <- store.Event{Path: p, Err: fmt.Errorf("etcdstore: %s %q: %w", op, store.ShortPath(p), err)}
	close(out)
}

// anchor keeps one watch open on the session's watch stream for as long as
// the session lives. clientv3 tears a watch stream down when its last
// watcher is cancelled, and opens a new one for the next watch: without
// the anchor, a recipe that waits on one node at a time would pay a new
// gRPC stream for every ExistsW. The server holds one idle watcher per
// session for it.
func (s *Store) anchor() {
	defer s.wg.Done()
	for {
		ctx, cancel := context.WithCancel(s.watchCtx)
		for range s.watcher.Watch(ctx, s.anchorKey) {
			// Nobody writes the key; drain whatever comes.
		}
		cancel()
		// Cancelled by the server (no leader) or by the session's end.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
