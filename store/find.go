package store

import (
	"context"
	"fmt"
)

// Find returns st as the optional capability T (one of the interfaces of
// this package a Store may implement: CreateLister, WindowLister,
// SeqDeleter, FrontDeleter, GetDeleter, ChildrenFollower, ChildCounter,
// Leaser, GuardedCreator, BatchCreator, ImplicitDirLister, NodeWatcher)
// and true, or T's zero value and false when st does not implement it or
// is nil. Recipes find capabilities only through Find and the helpers
// below (WatchNode, ImplicitDirs), never by their own type assertion, so
// that the rule for finding one (and any fallback) lives in one place.
func Find[T any](st Store) (T, bool) {
	c, ok := st.(T)
	return c, ok
}

// ImplicitDirs returns the directories below path that are no node but
// have nodes below them, as [ImplicitDirLister.ImplicitDirs] does. A store
// without the capability has no such directory: it returns none, or the
// session's end as an error once the session has ended, as a store that
// reads would. A nil st fails with ErrInvalidArgument.
func ImplicitDirs(ctx context.Context, st Store, path string) ([]string, error) {
	if st == nil {
		return nil, fmt.Errorf("store: implicit dirs %q: %w: nil store", path, ErrInvalidArgument)
	}
	if l, ok := Find[ImplicitDirLister](st); ok {
		return l.ImplicitDirs(ctx, path)
	}
	if err := context.Cause(st.Context()); err != nil {
		return nil, fmt.Errorf("store: implicit dirs %q: %w", path, err)
	}
	return nil, nil
}
