package store

import (
	"context"
	"fmt"
)

// Find returns st as the optional capability T (one of the interfaces of
// this package a Store may implement: CreateLister, WindowLister,
// SeqDeleter, FrontDeleter, GetDeleter, ChildrenFollower, ChildCounter,
// Leaser, GuardedCreator, BatchCreator, ImplicitDirLister, NodeWatcher,
// GuardedWriter, TreeFollower) and true, or T's zero value and false when
// st does not implement it or is nil. Recipes find capabilities only
// through Find and the helpers (WatchNode, ImplicitDirs, FollowTree,
// Write), never by their own type assertion, so
// that the rule for finding one (and any fallback) lives in one place.
//
// Find looks through a [Wrapper] to the store it wraps, as errors.Is looks
// through Unwrap: st has T exactly when the wrapped store has it, so that
// wrapping a store never changes the path a recipe takes. Where the
// wrapper implements T too, Find returns the wrapper (which sees the
// calls); where it does not, the wrapped store's T (which the wrapper does
// not see).
func Find[T any](st Store) (T, bool) {
	w, ok := st.(Wrapper)
	if !ok {
		c, ok := st.(T)
		return c, ok
	}
	inner, ok := Find[T](w.Unwrap())
	if !ok {
		return inner, false // a wrapper offers nothing its store lacks
	}
	if c, ok := st.(T); ok {
		return c, true
	}
	return inner, true
}

// Wrapper is a Store that forwards to another store of the same session
// (a test's counting store, a caller's instrumentation) and says which.
// [Find] follows Unwrap, so that a wrapper neither hides a capability of
// the store it wraps (the http.ResponseWriter trap, which
// http.ResponseController's Unwrap answers in the same way) nor offers one
// that store lacks.
type Wrapper interface {
	Store
	// Unwrap returns the wrapped store.
	Unwrap() Store
}

// ImplicitDirs returns the directories below path that are no node but
// have nodes below them, as [ImplicitDirLister.ImplicitDirs] does. A store
// without the capability has no such directory: it returns none, or the
// session's end as an error once the session has ended, as a store that
// reads would. A nil st fails with ErrInvalidArgument.
func ImplicitDirs(ctx context.Context, st Store, path string) ([]string, error) {
	if st == nil {
		return nil, fmt.Errorf("store: implicit dirs %q: %w: nil store", ShortPath(path), ErrInvalidArgument)
	}
	if l, ok := Find[ImplicitDirLister](st); ok {
		return l.ImplicitDirs(ctx, path)
	}
	if err := context.Cause(st.Context()); err != nil {
		return nil, fmt.Errorf("store: implicit dirs %q: %w", ShortPath(path), err)
	}
	return nil, nil
}
