package memstore

import (
	"context"
	"fmt"

	"github.com/corral-go/corral/internal/backlog"
	"github.com/corral-go/corral/store"
)

// GetDelete implements store.GetDeleter.
func (st *Store) GetDelete(ctx context.Context, p string) (store.Node, error) {
	if p == "/" {
		return store.Node{}, fmt.Errorf("%w %q: the root cannot be deleted", store.ErrInvalidPath, store.ShortPath(p))
	}
	if err := st.begin(ctx, "delete", p); err != nil {
		return store.Node{}, err
	}
	defer st.srv.mu.Unlock()
	n := st.srv.lookup(p)
	if n == nil {
		return store.Node{}, fmt.Errorf("memstore: delete: %w: %q", store.ErrNoNode, store.ShortPath(p))
	}
	was := n.public(p)
	if err := st.srv.delete(p); err != nil {
		return store.Node{}, fmt.Errorf("memstore: delete: %w", err)
	}
	return was, nil
}

// CountChildren implements store.ChildCounter.
func (st *Store) CountChildren(ctx context.Context, p string) (store.ChildCounts, error) {
	_, c, err := st.counted(ctx, p, false)
	return c, err
}

// ChildrenCounted implements store.ChildCounter.
func (st *Store) ChildrenCounted(ctx context.Context, p string) ([]store.Child, store.ChildCounts, error) {
	return st.counted(ctx, p, true)
}

func (st *Store) counted(ctx context.Context, p string, list bool) ([]store.Child, store.ChildCounts, error) {
	if err := st.begin(ctx, "children", p); err != nil {
		return nil, store.ChildCounts{}, err
	}
	defer st.srv.mu.Unlock()
	n := st.srv.lookup(p)
	if n == nil {
		return nil, store.ChildCounts{}, fmt.Errorf("memstore: children: %w: %q", store.ErrNoNode, store.ShortPath(p))
	}
	c := store.ChildCounts{Children: int64(len(n.children)), Changes: n.changes, Made: n.seq}
	if !list {
		return nil, c, nil
	}
	return children(n), c, nil
}

// FollowChildren implements store.ChildrenFollower. Changes are recorded
// as part of the change itself, so Sync has nothing to wait for. A follow
// keeps delivering while the session is disconnected, as watches do.
func (st *Store) FollowChildren(ctx context.Context, p string) (store.ChildrenFollow, []store.Child, error) {
	if err := st.begin(ctx, "follow", p); err != nil {
		return nil, nil, err
	}
	defer st.srv.mu.Unlock()
	kids := []store.Child{}
	if n := st.srv.lookup(p); n != nil {
		kids = children(n)
	}
	f := &follow{srv: st.srv, owner: st, path: p}
	if st.srv.follows[p] == nil {
		st.srv.follows[p] = map[*follow]struct{}{}
	}
	st.srv.follows[p][f] = struct{}{}
	st.follows[f] = struct{}{}
	return f, kids, nil
}

// follow is one ChildrenFollow. Guarded by srv.mu.
type follow struct {
	srv     *Server
	owner   *Store
	path    string
	changes backlog.Backlog[store.ChildChange]
}

// tell records a change of the children of p for every follow of p.
func (s *Server) tell(p string, c store.ChildChange) {
	for f := range s.follows[p] {
		if f.owner.frozen {
			f.changes.Hold(c) // told on Thaw
		} else {
			f.changes.Add(c)
		}
	}
}

// endFollow ends f with err, unless it has ended.
func (s *Server) endFollow(f *follow, err error) {
	if !f.changes.End(err) {
		return
	}
	delete(s.follows[f.path], f)
	if len(s.follows[f.path]) == 0 {
		delete(s.follows, f.path)
	}
	delete(f.owner.follows, f)
}

func (f *follow) Changes() ([]store.ChildChange, <-chan struct{}, error) {
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	return f.changes.Take()
}

func (f *follow) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: sync %q: %w", store.ShortPath(f.path), err)
	}
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	return f.changes.Err()
}

func (f *follow) Stop() {
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	f.srv.endFollow(f, fmt.Errorf("memstore: follow %q stopped: %w", store.ShortPath(f.path), store.ErrClosed))
}

// CreateIf implements store.GuardedCreator.
func (st *Store) CreateIf(ctx context.Context, p string, data []byte, mode store.Mode, guard string) (store.Node, error) {
	if err := store.ValidateCreate(p, data, mode); err != nil {
		return store.Node{}, err
	}
	if mode&store.Sequential != 0 {
		return store.Node{}, fmt.Errorf("memstore: create %q: %w: a guarded create cannot be sequential", store.ShortPath(p), store.ErrInvalidArgument)
	}
	if err := store.ValidatePath(guard); err != nil {
		return store.Node{}, err
	}
	if err := st.begin(ctx, "create", p); err != nil {
		return store.Node{}, err
	}
	defer st.srv.mu.Unlock()
	if st.srv.lookup(guard) == nil {
		return store.Node{}, fmt.Errorf("memstore: create %q: guard %q: %w", store.ShortPath(p), store.ShortPath(guard), store.ErrNoNode)
	}
	n, err := st.srv.create(p, data, mode, st.id)
	if err != nil {
		return store.Node{}, fmt.Errorf("memstore: create: %w", err)
	}
	return n, nil
}

// CreateBatch implements store.BatchCreator: the nodes are made under the
// server's lock, after every check, so either all are made or none. When
// LoseNextCreateReply was called, they are made and the call fails with
// store.ErrDisconnected.
func (st *Store) CreateBatch(ctx context.Context, parent string, batch []store.BatchNode, mode store.Mode) ([]store.Node, error) {
	if err := store.ValidateBatch(parent, batch, mode); err != nil {
		return nil, err
	}
	if err := st.begin(ctx, "create", parent); err != nil {
		return nil, err
	}
	defer st.srv.mu.Unlock()
	dir, err := st.srv.mkdirs(parent)
	if err == nil && dir.owner != 0 {
		err = fmt.Errorf("%w: parent %q", store.ErrEphemeralParent, store.ShortPath(parent))
	}
	if err == nil && mode == store.Persistent {
		seen := map[string]bool{}
		for _, b := range batch {
			if _, ok := dir.children[b.Name]; ok || seen[b.Name] {
				err = fmt.Errorf("%w: %q", store.ErrNodeExists, store.ShortPath(store.Join(parent, b.Name)))
				break
			}
			seen[b.Name] = true
		}
	}
	if err != nil {
		return nil, fmt.Errorf("memstore: create batch: %w", err)
	}
	nodes := make([]store.Node, len(batch))
	for i, b := range batch {
		if nodes[i], err = st.srv.create(store.Join(parent, b.Name), b.Data, mode, st.id); err != nil {
			// Unreachable: every way a create can fail was checked above.
			return nil, fmt.Errorf("memstore: create batch: %w", err)
		}
	}
	if st.loseReply {
		st.loseReply = false
		st.blip()
		return nil, fmt.Errorf("memstore: create batch %q: reply lost: %w", store.ShortPath(parent), store.ErrDisconnected)
	}
	return nodes, nil
}
