package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/corral-go/corral/internal/backlog"
	"github.com/corral-go/corral/store"
)

var _ store.TreeFollower = (*Store)(nil)

// FollowTree implements store.TreeFollower. A change is recorded in the
// step that makes it, for every follow whose subtree and depth hold it, so
// Sync has nothing to wait for. Unlike the follows of children, and as
// ZooKeeper's persistent watch does, a follow of a tree ends when its
// session's connection is cut (Disconnect), with store.ErrDisconnected:
// the store no longer vouches that it told every change.
func (st *Store) FollowTree(ctx context.Context, p string, depth, limit int) (store.TreeFollow, []store.Node, error) {
	if err := store.ValidateTree(p, depth, limit); err != nil {
		return nil, nil, err
	}
	if err := st.begin(ctx, "follow", p); err != nil {
		return nil, nil, err
	}
	defer st.srv.mu.Unlock()
	var nodes []store.Node
	if n := st.srv.lookup(p); n != nil {
		var err error
		if nodes, err = subtree(n, p, depth, limit, nodes); err != nil {
			return nil, nil, fmt.Errorf("memstore: follow %q: %w", p, err)
		}
	}
	slices.SortFunc(nodes, func(a, b store.Node) int { return strings.Compare(a.Path, b.Path) })
	f := &tree{srv: st.srv, owner: st, path: p, depth: depth}
	if st.srv.trees == nil {
		st.srv.trees = map[string]map[*tree]struct{}{}
	}
	if st.srv.trees[p] == nil {
		st.srv.trees[p] = map[*tree]struct{}{}
	}
	st.srv.trees[p][f] = struct{}{}
	if st.trees == nil {
		st.trees = map[*tree]struct{}{}
	}
	st.trees[f] = struct{}{}
	return f, nodes, nil
}

// subtree appends the node n at p and those below it down to depth to
// nodes, or fails past limit nodes.
func subtree(n *node, p string, depth, limit int, nodes []store.Node) ([]store.Node, error) {
	if len(nodes) == limit {
		return nil, fmt.Errorf("%w: more than %d nodes", store.ErrTooLarge, limit)
	}
	nodes = append(nodes, n.public(p))
	if depth == 0 {
		return nodes, nil
	}
	for name, c := range n.children {
		var err error
		if nodes, err = subtree(c, store.Join(p, name), depth-1, limit, nodes); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// tree is one TreeFollow. Guarded by srv.mu.
type tree struct {
	srv     *Server
	owner   *Store
	path    string
	depth   int
	changes backlog.Backlog[store.TreeChange]
}

// tellTrees records a change of the node at p (n nil: deleted) for every
// follow of a tree that holds p.
func (s *Server) tellTrees(p string, t store.EventType, n *node) {
	if len(s.trees) == 0 {
		return
	}
	for a, d := p, 0; ; a, d = store.Parent(a), d+1 {
		for f := range s.trees[a] {
			if d > f.depth {
				continue
			}
			c := store.TreeChange{Type: t, Node: store.Node{Path: p}}
			if n != nil {
				c.Node = n.public(p)
			}
			f.add(c)
		}
		if a == "/" {
			return
		}
	}
}

func (f *tree) add(c store.TreeChange) {
	if f.changes.Len() >= store.MaxTreeBacklog {
		f.srv.endTree(f, fmt.Errorf("memstore: follow %q: %w: more than %d changes not taken", f.path, store.ErrDisconnected, store.MaxTreeBacklog))
		return
	}
	if f.owner.frozen {
		f.changes.Hold(c) // told on Thaw
	} else {
		f.changes.Add(c)
	}
}

// endTree ends f with err, unless it has ended.
func (s *Server) endTree(f *tree, err error) {
	if !f.changes.End(err) {
		return
	}
	delete(s.trees[f.path], f)
	if len(s.trees[f.path]) == 0 {
		delete(s.trees, f.path)
	}
	delete(f.owner.trees, f)
}

// endTrees ends the follows of trees of st with err.
func (s *Server) endTrees(st *Store, err func(p string) error) {
	for f := range st.trees {
		s.endTree(f, err(f.path))
	}
}

func (f *tree) Changes() ([]store.TreeChange, <-chan struct{}, error) {
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	return f.changes.Take()
}

func (f *tree) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: sync %q: %w", f.path, err)
	}
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	return f.changes.Err()
}

func (f *tree) Stop() {
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	f.srv.endTree(f, fmt.Errorf("memstore: follow %q stopped: %w", f.path, store.ErrClosed))
}
