package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/internal/backlog"
	"github.com/corral-go/corral/store"
)

var _ store.TreeFollower = (*Store)(nil)

// A follow of a tree is one etcd watch on the range of the subtree, opened
// as the other watches are (at the current revision, beside a read of the
// range, with no gap; see watch.go), and served for as long as the follow
// lives: every put or delete of a key within the depth becomes a change,
// with the key's value and revisions, so no change costs a read. The read
// goes in pages of treePage keys, all at the revision of the first, so
// that a large subtree is never one reply, and it stops past the limit.
//
// clientv3 resumes the watch by itself when its stream breaks, from the
// revision after the last it delivered. When the server cancels the watch
// instead (a member that lost its leader: the watches carry require-leader)
// or it closes, the follow opens it again from that revision, paced as
// the adapter's retries are, for as long as the session lives: a lost
// connection costs no read of the subtree. Only a compaction of the
// revisions it would resume from ends the follow, with ErrDisconnected:
// the changes in between are lost, and its caller reads anew.
//
// Sync is the follow of children's (syncFollow).

// treePage is how many keys one read of a subtree's pages brings.
const treePage = 1000

// FollowTree reads the nodes of the subtree at p down to depth and follows
// their changes; see [store.TreeFollower]. Setting it up is bounded by
// ctx; once set up, the follow lives until Stop, the session's end or a
// compaction of the revisions it must resume from. The root "/", which is
// no key, is a node with no data, as Get reports it.
func (s *Store) FollowTree(ctx context.Context, p string, depth, limit int) (store.TreeFollow, []store.Node, error) {
	if err := store.ValidateTree(p, depth, limit); err != nil {
		return nil, nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, nil, fmt.Errorf("etcdstore: follow %q: %w", p, err)
	}
	f := &tree{s: s, path: p, depth: depth, end: p + "0",
		moved: make(chan struct{}), ended: make(chan struct{})}
	if p == "/" {
		f.end = "0" // every key that starts with '/'
	}
	spec := &watchSpec{op: "follow", path: p, key: p,
		readOpts:  []clientv3.OpOption{clientv3.WithRange(f.end), clientv3.WithLimit(treePage)},
		watchOpts: []clientv3.OpOption{clientv3.WithRange(f.end)}}
	w, resp, err := s.open(ctx, spec)
	if err != nil {
		return nil, nil, s.fail(ctx, "follow", p, err)
	}
	nodes, err := f.read(ctx, resp, limit)
	if err != nil {
		w.cancel()
		return nil, nil, err
	}
	f.w, f.listed, f.rev = w, resp.Header.Revision, resp.Header.Revision
	f.life, f.stop = context.WithCancel(s.watchCtx)
	if !s.goWatch(f.serve) {
		f.stop()
		w.cancel()
		return nil, nil, fmt.Errorf("etcdstore: follow %q: %w", p, s.sessionErr())
	}
	return f, nodes, nil
}

// read returns the nodes of the subtree within the depth, from first, the
// first page of the range, and the pages after it, read at first's
// revision.
func (f *tree) read(ctx context.Context, first *clientv3.GetResponse, limit int) ([]store.Node, error) {
	s := f.s
	var nodes []store.Node
	if f.path == "/" {
		nodes = append(nodes, store.Node{Path: "/"})
	}
	for resp := first; ; {
		for _, kv := range resp.Kvs {
			if !f.holds(string(kv.Key)) {
				continue
			}
			if len(nodes) == limit {
				return nil, fmt.Errorf("etcdstore: follow %q: %w: more than %d nodes", f.path, store.ErrTooLarge, limit)
			}
			nodes = append(nodes, node(kv))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from := string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		var err error
		resp, err = do(s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
			return s.kv.Get(ctx, from, clientv3.WithRange(f.end), clientv3.WithLimit(treePage), clientv3.WithRev(first.Header.Revision))
		})
		if errors.Is(err, rpctypes.ErrCompacted) {
			err = fmt.Errorf("%w: the subtree's revision was compacted while it was read: %w", store.ErrDisconnected, err)
		}
		if err != nil {
			return nil, s.fail(ctx, "follow", f.path, err)
		}
	}
	// Keys sort by bytes, and '/' sorts below most bytes of a name: a
	// path's children do not always come right after it.
	slices.SortFunc(nodes, func(a, b store.Node) int { return strings.Compare(a.Path, b.Path) })
	return nodes, nil
}

// holds reports whether the key k is a node of the followed subtree,
// within its depth: the range also holds the siblings whose names
// continue the path's ("p-x"), and the keys that are no path (the
// adapter's own, under a chroot).
func (f *tree) holds(k string) bool {
	if store.ValidatePath(k) != nil {
		return false
	}
	d, ok := store.Depth(f.path, k)
	return ok && d <= f.depth
}

// tree is a store.TreeFollow on etcd.
type tree struct {
	s      *Store
	path   string
	depth  int
	end    string          // the end of the subtree's range
	w      watcher         // serve's
	listed int64           // the read's revision: events up to it are in it
	life   context.Context // ends with Stop or the session; the watches' parent
	stop   context.CancelFunc
	ended  chan struct{} // closed when serve has returned

	mu      gosync.Mutex
	changes backlog.Backlog[store.TreeChange]
	rev     int64         // every change up to rev has been delivered
	moved   chan struct{} // closed, and replaced, when rev grows or the follow ends
}

// serve turns the watch's responses into changes until the follow ends,
// and opens the watch again when the server cancels it.
func (f *tree) serve() {
	defer close(f.ended)
	defer func() { f.w.cancel() }()
	s := f.s
	for tries := 0; ; {
		var (
			wr clientv3.WatchResponse
			ok bool
		)
		select {
		case <-f.life.Done():
		case wr, ok = <-f.w.ch:
		}
		switch {
		case f.life.Err() != nil:
			f.finish(f.lifeErr())
			return
		case ok && wr.CompactRevision != 0:
			f.finish(fmt.Errorf("etcdstore: follow %q: %w: changes since revision %d were compacted", f.path, store.ErrDisconnected, wr.CompactRevision))
			return
		case ok && errors.Is(watchErr(wr.Err()), store.ErrPermission):
			f.finish(fmt.Errorf("etcdstore: follow %q: %w", f.path, watchErr(wr.Err())))
			return
		case !ok || wr.Err() != nil:
			// No leader, most likely: find out whether the session can
			// still be renewed, and watch again meanwhile.
			s.probe()
			tries++
			if !f.resume(tries) {
				f.finish(f.lifeErr())
				return
			}
			continue
		}
		tries = 0
		if err := f.deliver(wr); err != nil {
			f.finish(err)
			return
		}
	}
}

// resume opens the watch again, after a pause, from the revision after the
// last one delivered. It reports false when the follow ended first.
func (f *tree) resume(tries int) bool {
	f.w.cancel()
	t := time.NewTimer(backoff(tries))
	defer t.Stop()
	select {
	case <-f.life.Done():
		return false
	case <-t.C:
	}
	f.mu.Lock()
	rev := f.rev
	f.mu.Unlock()
	// Watch blocks until the stream is up again, at most until the
	// follow ends, which ends wctx.
	wctx, cancel := context.WithCancel(f.life)
	f.w = watcher{ch: f.s.watcher.Watch(wctx, f.path, clientv3.WithRange(f.end), clientv3.WithRev(rev+1)), cancel: cancel}
	return f.life.Err() == nil
}

// lifeErr is the end of a follow whose life ended: Stop's or the
// session's.
func (f *tree) lifeErr() error {
	if err := f.s.sessionErr(); err != nil {
		return fmt.Errorf("etcdstore: follow %q: %w", f.path, err)
	}
	return fmt.Errorf("etcdstore: follow %q stopped: %w", f.path, store.ErrClosed)
}

// deliver records the changes of one watch response and the revision it
// completes.
func (f *tree) deliver(wr clientv3.WatchResponse) error {
	var cs []store.TreeChange
	for _, ev := range wr.Events {
		k := string(ev.Kv.Key)
		if ev.Kv.ModRevision <= f.listed || !f.holds(k) {
			continue
		}
		switch {
		case ev.Type == mvccpb.DELETE:
			cs = append(cs, store.TreeChange{Type: store.EventDeleted, Node: store.Node{Path: k}})
		case ev.IsCreate():
			cs = append(cs, store.TreeChange{Type: store.EventCreated, Node: node(ev.Kv)})
		default:
			cs = append(cs, store.TreeChange{Type: store.EventDataChanged, Node: node(ev.Kv)})
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(cs) > 0 {
		if f.changes.Len()+len(cs) > store.MaxTreeBacklog {
			return fmt.Errorf("etcdstore: follow %q: %w: more than %d changes not taken", f.path, store.ErrDisconnected, store.MaxTreeBacklog)
		}
		f.changes.Add(cs...)
	}
	if wr.Header.Revision > f.rev {
		f.rev = wr.Header.Revision
		close(f.moved)
		f.moved = make(chan struct{})
	}
	return nil
}

// finish ends the follow with err, unless it has ended.
func (f *tree) finish(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changes.End(err) {
		close(f.moved)
		f.moved = make(chan struct{})
	}
}

func (f *tree) Changes() ([]store.TreeChange, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes.Take()
}

// state returns the revision delivered up to, the channel that tells it
// moved, and the follow's end.
func (f *tree) state() (int64, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev, f.moved, f.changes.Err()
}

// Sync waits until the follow has delivered every change up to the
// current revision: one read, and progress requests while the subtree is
// quiet (see syncFollow).
func (f *tree) Sync(ctx context.Context) error { return f.s.syncFollow(ctx, f.path, f.state) }

// Stop ends the follow, cancels its watch and waits for its goroutine.
func (f *tree) Stop() {
	f.stop()
	<-f.ended
}
