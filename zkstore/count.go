package zkstore

import (
	"context"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/store"
)

var _ store.ChildCounter = (*Store)(nil)

// counts reads the child counts out of a node's stat: its cversion counts
// the creations and deletions of children (32 bits, wrapping).
func counts(st *zk.Stat) store.ChildCounts {
	return store.ChildCounts{Children: int64(st.NumChildren), Changes: int64(st.Cversion), Made: st.Czxid}
}

// CountChildren returns the child counts of path (one exists request); see
// [store.ChildCounter].
func (s *Store) CountChildren(ctx context.Context, path string) (store.ChildCounts, error) {
	if err := store.ValidatePath(path); err != nil {
		return store.ChildCounts{}, err
	}
	st, err := call(s, ctx, func(*caller) (*zk.Stat, error) {
		ok, st, err := s.conn.Exists(path)
		if err == nil && !ok {
			err = zk.ErrNoNode
		}
		return st, err
	}, nil)
	if err != nil {
		return store.ChildCounts{}, s.fail("children", path, err)
	}
	return counts(st), nil
}

// ChildrenCounted returns the children of path as Children does, with the
// child counts the server sent with them; see [store.ChildCounter].
func (s *Store) ChildrenCounted(ctx context.Context, path string) ([]store.Child, store.ChildCounts, error) {
	if err := store.ValidatePath(path); err != nil {
		return nil, store.ChildCounts{}, err
	}
	names, st, err := s.list(ctx, path)
	if err != nil {
		return nil, store.ChildCounts{}, err
	}
	return children(names), counts(st), nil
}
