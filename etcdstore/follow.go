package etcdstore

import (
	"context"
	"fmt"
	gosync "sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/internal/backlog"
	"github.com/corral-go/corral/store"
)

var _ store.ChildrenFollower = (*Store)(nil)

// A follow is one etcd watch on the range of a node's subtree, opened as
// ExistsW and ChildrenW open theirs (at the current revision, beside a read
// of the range, with no gap), and served for as long as the follow lives:
// every creation or deletion of a direct child becomes a ChildChange. The
// read is the only listing: it walks the keys of the range and, until the
// next compaction, the deleted ones too; the changes after it cost what
// the changes themselves cost.
//
// Sync reads the current revision (one small read that walks nothing) and
// waits until the watch has delivered everything up to it: the header of
// every watch response tells the revision the watch is complete up to,
// and when nothing in the range changes, a progress request (on the
// session's watch stream, sent again every 50 ms while it goes unanswered:
// the server answers it only once all the stream's watches are caught up)
// gets one.
//
// A follow ends with ErrDisconnected when the watch breaks in a way that
// may lose changes (no leader, a compacted revision, a closed stream): the
// caller follows anew, from a new listing.

// FollowChildren lists the children of p and follows their changes; see
// [store.ChildrenFollower]. Setting it up is one attempt, bounded by ctx;
// once set up, the follow lives until Stop, the session's end or a broken
// watch.
func (s *Store) FollowChildren(ctx context.Context, p string) (store.ChildrenFollow, []store.Child, error) {
	if err := store.ValidatePath(p); err != nil {
		return nil, nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, nil, fmt.Errorf("etcdstore: follow %q: %w", store.ShortPath(p), err)
	}
	key, readOpts := listRange(p)
	watchOpts := []clientv3.OpOption{clientv3.WithRange(p + "0")}
	if p == "/" {
		watchOpts = []clientv3.OpOption{clientv3.WithPrefix()}
	}
	spec := &watchSpec{op: "follow", path: p, key: key, readOpts: readOpts, watchOpts: watchOpts}
	w, resp, err := s.open(ctx, spec)
	if err != nil {
		return nil, nil, s.fail(ctx, "follow", p, err)
	}
	_, kids := children(p, resp.Kvs)
	f := &follow{s: s, path: p, w: w, listed: resp.Header.Revision, rev: resp.Header.Revision,
		moved: make(chan struct{}), stopped: make(chan struct{}), ended: make(chan struct{})}
	if !s.goWatch(f.serve) {
		w.cancel()
		return nil, nil, fmt.Errorf("etcdstore: follow %q: %w", store.ShortPath(p), s.sessionErr())
	}
	return f, kids, nil
}

// follow is a store.ChildrenFollow on etcd.
type follow struct {
	s       *Store
	path    string
	w       watcher
	listed  int64         // the listing's revision: events up to it are in it
	stopped chan struct{} // closed by Stop
	ended   chan struct{} // closed when serve has returned
	stop    gosync.Once

	mu      gosync.Mutex
	changes backlog.Backlog[store.ChildChange]
	rev     int64         // every change up to rev has been delivered
	moved   chan struct{} // closed, and replaced, when rev grows or the follow ends
}

// serve turns the watch's responses into changes until the follow ends.
func (f *follow) serve() {
	defer close(f.ended)
	defer f.w.cancel()
	s := f.s
	for {
		select {
		case <-f.stopped:
			f.end(fmt.Errorf("etcdstore: follow %q stopped: %w", store.ShortPath(f.path), store.ErrClosed))
			return
		case <-s.ctx.Done():
			f.end(fmt.Errorf("etcdstore: follow %q: %w", store.ShortPath(f.path), s.sessionErr()))
			return
		case wr, ok := <-f.w.ch:
			switch {
			case !ok && s.ctx.Err() != nil:
				f.end(fmt.Errorf("etcdstore: follow %q: %w", store.ShortPath(f.path), s.sessionErr()))
				return
			case !ok:
				s.probe()
				f.end(fmt.Errorf("etcdstore: follow %q: %w: watch closed", store.ShortPath(f.path), store.ErrDisconnected))
				return
			case wr.CompactRevision != 0:
				f.end(fmt.Errorf("etcdstore: follow %q: %w: changes since revision %d were compacted", store.ShortPath(f.path), store.ErrDisconnected, wr.CompactRevision))
				return
			case wr.Err() != nil:
				s.probe()
				f.end(fmt.Errorf("etcdstore: follow %q: %w: %w", store.ShortPath(f.path), store.ErrDisconnected, wr.Err()))
				return
			}
			f.deliver(wr)
		}
	}
}

// deliver records the changes of one watch response and the revision it
// completes.
func (f *follow) deliver(wr clientv3.WatchResponse) {
	var cs []store.ChildChange
	for _, ev := range wr.Events {
		if ev.Kv.ModRevision <= f.listed {
			continue
		}
		k := string(ev.Kv.Key)
		if !isChild(f.path, k) {
			continue
		}
		name := k[len(f.path)+1:]
		if f.path == "/" {
			name = k[1:]
		}
		switch {
		case ev.Type == mvccpb.DELETE:
			cs = append(cs, store.ChildChange{Type: store.EventDeleted, Name: name})
		case ev.IsCreate():
			cs = append(cs, store.ChildChange{Type: store.EventCreated, Name: name, Seq: ev.Kv.CreateRevision})
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(cs) > 0 {
		f.changes.Add(cs...)
	}
	if wr.Header.Revision > f.rev {
		f.rev = wr.Header.Revision
		close(f.moved)
		f.moved = make(chan struct{})
	}
}

func (f *follow) end(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changes.End(err) {
		close(f.moved)
		f.moved = make(chan struct{})
	}
}

func (f *follow) Changes() ([]store.ChildChange, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes.Take()
}

// state returns the revision delivered up to, the channel that tells it
// moved, and the follow's end.
func (f *follow) state() (int64, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev, f.moved, f.changes.Err()
}

// Sync waits until the follow has delivered every change up to the
// current revision: see syncFollow.
func (f *follow) Sync(ctx context.Context) error { return f.s.syncFollow(ctx, f.path, f.state) }

// syncFollow waits until the follow of path whose state is state has
// delivered every change up to the current revision: one read, and
// progress requests while the range is quiet. Each request is one
// attempt. state returns the revision delivered up to, a channel closed
// when it moves, and the follow's end.
func (s *Store) syncFollow(ctx context.Context, path string, state func() (int64, <-chan struct{}, error)) error {
	if _, _, err := state(); err != nil {
		return err
	}
	octx, done, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("etcdstore: sync %q: %w", store.ShortPath(path), err)
	}
	defer done()
	resp, err := do(s, octx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		// One of the adapter's own keys, read for the current revision;
		// nobody writes it.
		return s.kv.Get(ctx, s.ownKeys+"sync", clientv3.WithCountOnly())
	})
	if err != nil {
		return s.fail(ctx, "sync", path, err)
	}
	want := resp.Header.Revision
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		rev, moved, ferr := state()
		switch {
		case ferr != nil:
			return ferr
		case rev >= want:
			return nil
		}
		// The session's watch stream is keyed by the watch's metadata.
		if err := s.cli.RequestProgress(clientv3.WithRequireLeader(octx)); err != nil {
			return s.fail(ctx, "sync", path, err)
		}
		if retry == nil {
			retry = time.NewTimer(50 * time.Millisecond)
		} else {
			retry.Reset(50 * time.Millisecond)
		}
		select {
		case <-moved:
		case <-retry.C:
		case <-octx.Done():
			return s.fail(ctx, "sync", path, context.Cause(octx))
		}
	}
}

// Stop ends the follow and waits for its goroutine.
func (f *follow) Stop() {
	f.stop.Do(func() { close(f.stopped) })
	<-f.ended
}
