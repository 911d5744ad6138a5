package countstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-go/corral/store"
)

// Every optional capability of package store: store.Find hands out the
// wrapper's where the wrapped store has the capability, so that its calls
// are counted.
var (
	_ store.NodeWatcher       = (*Store)(nil)
	_ store.CreateLister      = (*Store)(nil)
	_ store.WindowLister      = (*Store)(nil)
	_ store.SeqDeleter        = (*Store)(nil)
	_ store.FrontDeleter      = (*Store)(nil)
	_ store.GetDeleter        = (*Store)(nil)
	_ store.ChildrenFollower  = (*Store)(nil)
	_ store.ChildCounter      = (*Store)(nil)
	_ store.Leaser            = (*Store)(nil)
	_ store.GuardedCreator    = (*Store)(nil)
	_ store.BatchCreator      = (*Store)(nil)
	_ store.ImplicitDirLister = (*Store)(nil)
	_ store.TreeFollower      = (*Store)(nil)
)

// capability counts a call of method and returns the wrapped store's T, or
// an error wrapping errors.ErrUnsupported when it has none (only a direct
// call gets there: store.Find offers no capability the wrapped store
// lacks).
func capability[T any](s *Store, method string) (T, error) {
	c, ok := store.Find[T](s.inner)
	if !ok {
		return c, fmt.Errorf("countstore: %s: %w", method, errors.ErrUnsupported)
	}
	s.count(method)
	return c, nil
}

// NodeW implements store.NodeWatcher. Its event is a wakeup as ExistsW's is.
func (s *Store) NodeW(ctx context.Context, path string) (store.Stat, <-chan store.Event, error) {
	nw, err := capability[store.NodeWatcher](s, "NodeW")
	if err != nil {
		return store.Stat{}, nil, err
	}
	stat, ev, err := nw.NodeW(ctx, path)
	if err != nil {
		return store.Stat{}, nil, err
	}
	return stat, s.forward(path, ev), nil
}

// CreateAndList implements store.CreateLister.
func (s *Store) CreateAndList(ctx context.Context, path string, data []byte, mode store.Mode) (store.Node, []store.Child, error) {
	cl, err := capability[store.CreateLister](s, "CreateAndList")
	if err != nil {
		return store.Node{}, nil, err
	}
	n, kids, err := cl.CreateAndList(ctx, path, data, mode)
	s.made(n, err)
	return n, kids, err
}

// CreateAndWindow implements store.WindowLister.
func (s *Store) CreateAndWindow(ctx context.Context, path string, data []byte, mode store.Mode, n int) (store.Node, []store.Child, bool, error) {
	wl, err := capability[store.WindowLister](s, "CreateAndWindow")
	if err != nil {
		return store.Node{}, nil, false, err
	}
	node, kids, complete, err := wl.CreateAndWindow(ctx, path, data, mode, n)
	s.made(node, err)
	return node, kids, complete, err
}

// ChildrenUpTo implements store.WindowLister.
func (s *Store) ChildrenUpTo(ctx context.Context, path string, seq int64, n int) ([]store.Child, bool, error) {
	wl, err := capability[store.WindowLister](s, "ChildrenUpTo")
	if err != nil {
		return nil, false, err
	}
	return wl.ChildrenUpTo(ctx, path, seq, n)
}

// DeleteSeq implements store.SeqDeleter.
func (s *Store) DeleteSeq(ctx context.Context, path string, seq int64) error {
	sd, err := capability[store.SeqDeleter](s, "DeleteSeq")
	if err != nil {
		return err
	}
	return sd.DeleteSeq(ctx, path, seq)
}

// DeleteFront implements store.FrontDeleter.
func (s *Store) DeleteFront(ctx context.Context, path string, seq int64) error {
	fd, err := capability[store.FrontDeleter](s, "DeleteFront")
	if err != nil {
		return err
	}
	return fd.DeleteFront(ctx, path, seq)
}

// FollowsFront implements store.FrontDeleter.
func (s *Store) FollowsFront(ctx context.Context, path string, seq, prev int64) (bool, error) {
	fd, err := capability[store.FrontDeleter](s, "FollowsFront")
	if err != nil {
		return false, err
	}
	return fd.FollowsFront(ctx, path, seq, prev)
}

// GetDelete implements store.GetDeleter.
func (s *Store) GetDelete(ctx context.Context, path string) (store.Node, error) {
	gd, err := capability[store.GetDeleter](s, "GetDelete")
	if err != nil {
		return store.Node{}, err
	}
	return gd.GetDelete(ctx, path)
}

// FollowChildren implements store.ChildrenFollower. The follow's Sync is
// counted; the changes it delivers are not (see the package doc).
func (s *Store) FollowChildren(ctx context.Context, path string) (store.ChildrenFollow, []store.Child, error) {
	cf, err := capability[store.ChildrenFollower](s, "FollowChildren")
	if err != nil {
		return nil, nil, err
	}
	f, kids, err := cf.FollowChildren(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	return follow{f, s}, kids, nil
}

// follow counts the requests of a ChildrenFollow.
type follow struct {
	store.ChildrenFollow
	s *Store
}

func (f follow) Sync(ctx context.Context) error {
	f.s.count("ChildrenFollow.Sync")
	return f.ChildrenFollow.Sync(ctx)
}

// CountChildren implements store.ChildCounter.
func (s *Store) CountChildren(ctx context.Context, path string) (store.ChildCounts, error) {
	cc, err := capability[store.ChildCounter](s, "CountChildren")
	if err != nil {
		return store.ChildCounts{}, err
	}
	return cc.CountChildren(ctx, path)
}

// ChildrenCounted implements store.ChildCounter.
func (s *Store) ChildrenCounted(ctx context.Context, path string) ([]store.Child, store.ChildCounts, error) {
	cc, err := capability[store.ChildCounter](s, "ChildrenCounted")
	if err != nil {
		return nil, store.ChildCounts{}, err
	}
	return cc.ChildrenCounted(ctx, path)
}

// CreateLeased implements store.Leaser. The lease's Renew and Revoke are
// counted.
func (s *Store) CreateLeased(ctx context.Context, path string, data []byte, ttl time.Duration) (store.Node, store.Lease, error) {
	ls, err := capability[store.Leaser](s, "CreateLeased")
	if err != nil {
		return store.Node{}, nil, err
	}
	n, l, err := ls.CreateLeased(ctx, path, data, ttl)
	s.made(n, err)
	if err != nil {
		return n, l, err
	}
	return n, lease{l, s}, nil
}

// lease counts the requests of a Lease.
type lease struct {
	store.Lease
	s *Store
}

func (l lease) Renew(ctx context.Context) error {
	l.s.count("Lease.Renew")
	return l.Lease.Renew(ctx)
}

func (l lease) Revoke(ctx context.Context) error {
	l.s.count("Lease.Revoke")
	return l.Lease.Revoke(ctx)
}

// CreateIf implements store.GuardedCreator.
func (s *Store) CreateIf(ctx context.Context, path string, data []byte, mode store.Mode, guard string) (store.Node, error) {
	gc, err := capability[store.GuardedCreator](s, "CreateIf")
	if err != nil {
		return store.Node{}, err
	}
	n, err := gc.CreateIf(ctx, path, data, mode, guard)
	s.made(n, err)
	return n, err
}

// CreateBatch implements store.BatchCreator, counted as one call.
func (s *Store) CreateBatch(ctx context.Context, parent string, batch []store.BatchNode, mode store.Mode) ([]store.Node, error) {
	bc, err := capability[store.BatchCreator](s, "CreateBatch")
	if err != nil {
		return nil, err
	}
	nodes, err := bc.CreateBatch(ctx, parent, batch, mode)
	for _, n := range nodes {
		s.remember(n.Path)
	}
	return nodes, err
}

// ImplicitDirs implements store.ImplicitDirLister.
func (s *Store) ImplicitDirs(ctx context.Context, path string) ([]string, error) {
	l, err := capability[store.ImplicitDirLister](s, "ImplicitDirs")
	if err != nil {
		return nil, err
	}
	return l.ImplicitDirs(ctx, path)
}

// FollowTree implements store.TreeFollower. The calls of the follow are
// not counted.
func (s *Store) FollowTree(ctx context.Context, path string, depth, limit int) (store.TreeFollow, []store.Node, error) {
	tf, err := capability[store.TreeFollower](s, "FollowTree")
	if err != nil {
		return nil, nil, err
	}
	return tf.FollowTree(ctx, path, depth, limit)
}
