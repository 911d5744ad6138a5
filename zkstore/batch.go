package zkstore

import (
	"context"
	"errors"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/store"
)

var _ store.BatchCreator = (*Store)(nil)

// CreateBatch creates the nodes of batch under parent in one multi request
// of creates, which the server applies all or none; see
// [store.BatchCreator] (a batch of one goes as a plain create, all or none
// as well). A missing parent is made first, as Create makes it.
// Sequential nodes get ZooKeeper's 10-digit suffixes in batch order. A
// multi whose reply is lost is not sent again (its outcome is unknown:
// ErrDisconnected), nor undone when ctx ends first.
func (s *Store) CreateBatch(ctx context.Context, parent string, batch []store.BatchNode, mode store.Mode) ([]store.Node, error) {
	if err := store.ValidateBatch(parent, batch, mode); err != nil {
		return nil, err
	}
	var flags int32
	if mode&store.Sequential != 0 {
		flags |= zk.FlagSequence
	}
	paths := make([]string, len(batch))
	data := make([][]byte, len(batch))
	for i, b := range batch {
		paths[i], data[i] = store.Join(parent, b.Name), slices.Clone(b.Data)
	}
	created, err := s.createBatch(ctx, parent, paths, data, flags)
	if err != nil {
		return nil, s.fail("create", parent, err)
	}
	nodes := make([]store.Node, len(created))
	for i, p := range created {
		nodes[i] = node(p, data[i], &zk.Stat{})
	}
	return nodes, nil
}

// createBatch sends the multi as a direct request (see direct.go) when a
// link takes one, and else, or when parent is missing, on the client's
// path (createMany), which makes parent first.
func (s *Store) createBatch(ctx context.Context, parent string, paths []string, data [][]byte, flags int32) ([]string, error) {
	client := func(*caller) ([]string, error) { return s.createMany(parent, paths, data, flags) }
	if s.dirs.get(parent) == dirRemoved {
		return call(s, ctx, client, nil)
	}
	created, err := callDirect(s, ctx, func(l *link) ([]string, error) {
		s.later.Keep(parent)
		if len(paths) == 1 { // a plain create, as CreateMany sends it
			made, err := wait(ctx, s.askCreate(l, paths[0], data[0], flags))
			return []string{made}, err
		}
		return wait(ctx, s.askCreateMany(l, paths, data, flags))
	}, client)
	var answered *answeredErr
	if errors.As(err, &answered) && errors.Is(err, zk.ErrNoNode) {
		// The server answered the direct request: parent is missing.
		return call(s, ctx, client, nil)
	}
	return created, err
}

// createMany sends the multi, making parent first when it is missing, and
// returns the paths made; parents it made for a batch it then does not
// make go to the reclaimer (leftEmpty).
func (s *Store) createMany(parent string, paths []string, data [][]byte, flags int32) (_ []string, err error) {
	s.later.Keep(parent)
	madeDir := false
	defer func() {
		if err != nil {
			s.leftEmpty(parent, madeDir)
		}
	}()
	for attempt := 0; ; attempt++ {
		res, err := s.conn.CreateMany(paths, data, flags, s.acl)
		if err == nil {
			created := make([]string, len(res))
			for i, r := range res {
				created[i] = r.String
			}
			return created, nil
		}
		cause := opError(res, err)
		if !errors.Is(cause, zk.ErrNoNode) || attempt >= 100 {
			return nil, cause
		}
		madeDir = true
		if err := s.makeParents(parent); err != nil {
			return nil, err
		}
	}
}

// opError returns the error of the operation that failed a multi, rather
// than the "runtime inconsistency" the server reports for the others.
func opError(res []zk.MultiResponse, err error) error {
	for _, r := range res {
		if r.Error != nil && !errors.Is(r.Error, zk.ErrAPIError) {
			return r.Error
		}
	}
	return err
}
