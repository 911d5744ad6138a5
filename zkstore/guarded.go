package zkstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/store"
)

var _ store.GuardedCreator = (*Store)(nil)

// errGuard is the outcome of a guarded create whose guard is missing.
var errGuard = errors.New("zkstore: guard missing")

// CreateIf creates the node at path provided the node at guard exists, in
// one multi request (a check of guard and the create); see
// [store.GuardedCreator]. Missing parents are made first, as Create makes
// them. If ctx ends first, CreateIf returns ctx.Err() at most UndoWait
// later, and an ephemeral node the server makes is deleted as soon as the
// connection allows while the session lives.
func (s *Store) CreateIf(ctx context.Context, path string, data []byte, mode store.Mode, guard string) (store.Node, error) {
	if err := store.ValidateCreate(path, data, mode); err != nil {
		return store.Node{}, err
	}
	if mode&store.Sequential != 0 {
		return store.Node{}, fmt.Errorf("zkstore: create %s: %w: a guarded create cannot be sequential", store.ShortPath(path), store.ErrInvalidArgument)
	}
	if err := store.ValidatePath(guard); err != nil {
		return store.Node{}, err
	}
	var flags int32
	if mode&store.Ephemeral != 0 {
		flags |= zk.FlagEphemeral
	}
	data = slices.Clone(data)
	created, err := call(s, ctx,
		func(*caller) (string, error) { return s.createIf(path, data, flags, guard) },
		func(created string, err error) {
			if errors.Is(err, errGuard) {
				return // nothing was made
			}
			s.undoCreate(path, mode, created, err)
		})
	if errors.Is(err, errGuard) {
		return store.Node{}, fmt.Errorf("zkstore: create %s: guard %s: %w", store.ShortPath(path), store.ShortPath(guard), store.ErrNoNode)
	}
	if err != nil {
		return store.Node{}, s.fail("create", path, err)
	}
	n := node(created, data, &zk.Stat{})
	if mode&store.Ephemeral != 0 {
		n.Owner = s.SessionID()
	}
	return n, nil
}

// createIf sends the multi, making the parents of path when they are
// missing, and taking back those it made for a node it then does not make
// (the guard's absence refuses it, or an error ends it: leftEmpty).
func (s *Store) createIf(path string, data []byte, flags int32, guard string) (_ string, err error) {
	parent := store.Parent(path)
	s.later.Keep(parent)
	madeDir := false
	defer func() {
		if err != nil {
			s.leftEmpty(parent, madeDir)
		}
	}()
	for attempt := 0; ; attempt++ {
		res, err := s.conn.CreateIfExists(guard, path, data, flags, s.acl)
		switch {
		case err == nil:
			return res[1].String, nil
		case len(res) == 2 && errors.Is(res[0].Error, zk.ErrNoNode):
			return "", errGuard
		case len(res) == 2 && errors.Is(res[1].Error, zk.ErrNoNode) && attempt < 100:
			madeDir = true
			if err := s.makeParents(parent); err != nil {
				return "", err
			}
		case len(res) == 2 && res[1].Error != nil && !errors.Is(res[1].Error, zk.ErrAPIError):
			return "", res[1].Error
		default:
			return "", err
		}
	}
}
