package shared

import (
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

var (
	// ErrVersionMoved: a compare-and-set found the value at another
	// version than the one given (someone else wrote it since it was
	// read, or it was deleted, or made, where none was expected).
	// Nothing was written. It wraps store.ErrBadVersion.
	ErrVersionMoved = fmt.Errorf("shared: version moved: %w", store.ErrBadVersion)
	// ErrLost: a guarded write found its hold's node gone (the hold was
	// released, lost with its session, or its node deleted), decided by
	// the server: nothing was written. It is the value of
	// sync.ErrLockLost, and of every hold family's lost error.
	ErrLost = holderr.ErrLost
	// ErrNotHeld: a guarded write was given a hold that holds nothing (a
	// nil Holder, or one whose Guard is the zero store.Guard). It is
	// refused before any I/O.
	ErrNotHeld = errors.New("shared: nothing held")
	// ErrKindMismatch: the path holds the nodes of another kind of
	// recipe (a lock's contenders below it, a queue's settings), or a
	// Counter's node holds data that is no counter's. It is the value of
	// sync.ErrKindMismatch.
	ErrKindMismatch = recipe.ErrKindMismatch
	// ErrOverflow: a Counter's add would leave the range of an int64 (or,
	// for a counter kept in SharedCount's 4 bytes, of an int32). Nothing
	// was written.
	ErrOverflow = errors.New("shared: counter overflows")
)
