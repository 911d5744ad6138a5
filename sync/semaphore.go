package sync

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/corral-go/corral/store"
)

// Errors of the Semaphore and the DoubleBarrier.
var (
	// ErrInvalidLimit: a Semaphore or DoubleBarrier was made with a limit
	// under 1.
	ErrInvalidLimit = errors.New("sync: limit must be at least 1")
	// ErrLimitMismatch: the limit stored with a Semaphore or DoubleBarrier
	// differs from the caller's; the error is a *LimitError.
	ErrLimitMismatch = errors.New("sync: limit differs from the stored one")
)

// LimitError reports that a participant's limit differs from the one stored
// with the Semaphore or DoubleBarrier it joins: every participant of one
// semaphore or barrier must agree on its limit. It matches ErrLimitMismatch
// with errors.Is.
type LimitError struct {
	Path   string // the node of the semaphore or barrier
	Limit  int    // the caller's limit
	Stored int    // the stored limit; 0 when the node holds something else
}

func (e *LimitError) Error() string {
	if e.Stored == 0 {
		return fmt.Sprintf("sync: %q holds no limit, want %d", e.Path, e.Limit)
	}
	return fmt.Sprintf("sync: %q has limit %d, not %d", e.Path, e.Stored, e.Limit)
}

// Unwrap returns ErrLimitMismatch.
func (e *LimitError) Unwrap() error { return ErrLimitMismatch }

// storeLimit makes sure the node at path stores the limit n: it creates the
// node holding n, or fills it in when it exists empty (made as the parent of
// a participant that came first), and otherwise checks that the stored limit
// is n. Concurrent callers agree through the node's version.
func storeLimit(ctx context.Context, st store.Store, path string, n int) error {
	want := []byte(strconv.Itoa(n))
	for {
		_, err := st.Create(ctx, path, want, store.Persistent)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrNodeExists) {
			return err
		}
		node, err := st.Get(ctx, path)
		if errors.Is(err, store.ErrNoNode) {
			continue // deleted meanwhile: try again
		}
		if err != nil {
			return err
		}
		if len(node.Data) == 0 {
			_, err := st.Set(ctx, path, want, node.Version)
			if errors.Is(err, store.ErrBadVersion) || errors.Is(err, store.ErrNoNode) {
				continue // someone else got there first: check theirs
			}
			return err
		}
		got, err := strconv.Atoi(string(node.Data))
		if err != nil || got < 1 {
			got = 0
		}
		if got != n {
			return &LimitError{Path: path, Limit: n, Stored: got}
		}
		return nil
	}
}
