// Package holderr defines, once, the errors that end or refuse a hold
// (a lock, a lease, a leadership, a membership, a shard): every primitive
// re-exports the ones it returns as aliases (var ErrX = holderr.ErrX), so
// that one meaning is one value, and errors.Is matches a cause whichever
// package's name the caller used.
package holderr

import (
	"errors"
	"fmt"

	"github.com/corral-go/corral/store"
)

var (
	// ErrNodeDeleted is the cause of a hold whose node someone else
	// deleted while the session lived.
	ErrNodeDeleted = errors.New("corral: hold node deleted")
	// ErrReleased is the cause of a hold's context after its owner
	// released it (Unlock, Release), and the error of a second release.
	ErrReleased = errors.New("corral: released")
	// ErrLost is the error of a release of a hold that had already ended
	// before it (session expired, node deleted, connection lost). The
	// error returned also wraps the cause.
	ErrLost = errors.New("corral: hold lost before release")
	// ErrDisconnected is the cause of a hold ended by a lost connection
	// under the LoseOnDisconnect policy: ownership is unknown. It wraps
	// store.ErrDisconnected.
	ErrDisconnected = fmt.Errorf("corral: connection lost, ownership unknown: %w", store.ErrDisconnected)
)
