package zkstore

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/store"
	"github.com/go-zookeeper/zk"
)

// Watches: one-shot ZooKeeper watches, turned into store.Events that also
// carry the end of the caller's ctx or of the session.

// ExistsW reports whether path exists and sets a one-shot watch on its
// creation, deletion or data change; see [store.Store]. The watch survives
// reconnections: a change made while disconnected is delivered after the
// reconnection. Its event carries Err when ctx ends or the session ends.
func (s *Store) ExistsW(ctx context.Context, path string) (bool, store.Stat, <-chan store.Event, error) {
	if err := store.ValidatePath(path); err != nil {
		return false, store.Stat{}, nil, err
	}
	type result struct {
		ok bool
		st *zk.Stat
		ch <-chan zk.Event
	}
	r, err := call(s, ctx, func(<-chan struct{}) (result, error) {
		ok, st, ch, err := s.conn.ExistsW(path)
		return result{ok, st, ch}, err
	}, nil)
	if err != nil {
		return false, store.Stat{}, nil, s.fail("exists", path, err)
	}
	var stat store.Stat
	if r.ok {
		stat = node(path, nil, r.st).Stat()
	}
	return r.ok, stat, s.watch(ctx, path, r.ch), nil
}

// NodeW returns the Stat of the node at path and sets a one-shot watch on
// its data change or deletion; see [store.NodeWatcher]. It asks with
// getData, which the server answers with NoNode, and no watch, when the
// node is missing, where an exists request would leave a watch on the
// node's creation: a watch on a sequential node's name, never made again,
// stays in the server's watch table and in go-zookeeper's map until the
// session ends. The node's data comes back with the answer, unused.
func (s *Store) NodeW(ctx context.Context, path string) (store.Stat, <-chan store.Event, error) {
	if err := store.ValidatePath(path); err != nil {
		return store.Stat{}, nil, err
	}
	type result struct {
		st *zk.Stat
		ch <-chan zk.Event
	}
	r, err := call(s, ctx, func(<-chan struct{}) (result, error) {
		_, st, ch, err := s.conn.GetW(path)
		return result{st, ch}, err
	}, nil)
	if err != nil {
		return store.Stat{}, nil, s.fail("watch", path, err)
	}
	return node(path, nil, r.st).Stat(), s.watch(ctx, path, r.ch), nil
}

// ChildrenW returns the children of path as Children does and sets a
// one-shot watch on a change to them or the deletion of path; see
// [store.ChildrenWatcher] and ExistsW.
func (s *Store) ChildrenW(ctx context.Context, path string) ([]store.Child, <-chan store.Event, error) {
	if err := store.ValidatePath(path); err != nil {
		return nil, nil, err
	}
	type result struct {
		names []string
		ch    <-chan zk.Event
	}
	r, err := call(s, ctx, func(<-chan struct{}) (result, error) {
		names, _, ch, err := s.conn.ChildrenW(path)
		return result{names, ch}, err
	}, nil)
	if err != nil {
		return nil, nil, s.fail("children", path, err)
	}
	return children(r.names), s.watch(ctx, path, r.ch), nil
}

// watch turns a client watch into a store one: exactly one event, then
// closed, with Err when ctx or the session ends first.
func (s *Store) watch(ctx context.Context, path string, zch <-chan zk.Event) <-chan store.Event {
	out := make(chan store.Event, 1)
	if err := s.begin(); err != nil {
		out <- store.Event{Path: path, Err: fmt.Errorf("zkstore: watch %s: %w", path, err)}
		close(out)
		return out
	}
	go func() {
		defer s.calls.Done()
		defer close(out)
		select {
		case ev := <-zch:
			if err := s.endErr(); err != nil {
				// Delivered after the session's deadline: the session
				// is over, whatever the server last said.
				out <- store.Event{Path: path, Err: fmt.Errorf("zkstore: watch %s: %w", path, err)}
				return
			}
			out <- s.event(path, ev)
		case <-ctx.Done():
			out <- store.Event{Path: path, Err: fmt.Errorf("zkstore: watch %s: %w", path, ctx.Err())}
		case <-s.ctx.Done():
			out <- store.Event{Path: path, Err: fmt.Errorf("zkstore: watch %s: %w", path, s.endErr())}
		}
	}()
	return out
}

func (s *Store) event(path string, ev zk.Event) store.Event {
	switch ev.Type {
	case zk.EventNodeCreated:
		return store.Event{Type: store.EventCreated, Path: path}
	case zk.EventNodeDeleted:
		return store.Event{Type: store.EventDeleted, Path: path}
	case zk.EventNodeDataChanged:
		return store.Event{Type: store.EventDataChanged, Path: path}
	case zk.EventNodeChildrenChanged:
		return store.Event{Type: store.EventChildrenChanged, Path: path}
	}
	err := ev.Err
	if err == nil {
		err = fmt.Errorf("unexpected event %v", ev.Type)
	}
	return store.Event{Path: path, Err: s.fail("watch", path, err)}
}
