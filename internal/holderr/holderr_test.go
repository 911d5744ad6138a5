package holderr_test

import (
	"errors"
	"testing"

	"github.com/corral-go/corral/cache"
	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDistinct: each meaning is its own value; only ErrDisconnected
// matches the store's sentinel it wraps.
func TestDistinct(t *testing.T) {
	all := []error{holderr.ErrNodeDeleted, holderr.ErrReleased, holderr.ErrLost, holderr.ErrDisconnected}
	for i, a := range all {
		for j, b := range all {
			if got := errors.Is(a, b); got != (i == j) {
				t.Errorf("errors.Is(%v, %v) = %v; want %v", a, b, got, i == j)
			}
		}
	}
	if !errors.Is(holderr.ErrDisconnected, store.ErrDisconnected) {
		t.Errorf("errors.Is(ErrDisconnected, store.ErrDisconnected) = false; want true")
	}
}

// TestAliases: every package that re-exports a hold error re-exports the
// one value, so errors.Is matches across packages.
func TestAliases(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want error
	}{
		{"sync.ErrNodeDeleted", sync.ErrNodeDeleted, holderr.ErrNodeDeleted},
		{"election.ErrNodeDeleted", election.ErrNodeDeleted, holderr.ErrNodeDeleted},
		{"group.ErrNodeDeleted", group.ErrNodeDeleted, holderr.ErrNodeDeleted},
		{"partition.ErrNodeDeleted", partition.ErrNodeDeleted, holderr.ErrNodeDeleted},
		{"sync.ErrUnlocked", sync.ErrUnlocked, holderr.ErrReleased},
		{"partition.ErrReleased", partition.ErrReleased, holderr.ErrReleased},
		{"sync.ErrLockLost", sync.ErrLockLost, holderr.ErrLost},
		{"sync.ErrDisconnected", sync.ErrDisconnected, holderr.ErrDisconnected},
		{"election.ErrDisconnected", election.ErrDisconnected, holderr.ErrDisconnected},
		{"group.ErrDisconnected", group.ErrDisconnected, holderr.ErrDisconnected},
		{"partition.ErrDisconnected", partition.ErrDisconnected, holderr.ErrDisconnected},
		// One value for each meaning beyond holds too: a setting that
		// differs, a Close, another recipe's nodes.
		{"partition.ErrMismatch", partition.ErrMismatch, sync.ErrMismatch},
		{"queue.ErrMismatch", queue.ErrMismatch, sync.ErrMismatch},
		{"election.ErrObserverClosed", election.ErrObserverClosed, group.ErrWatcherClosed},
		{"inspect.ErrWatcherClosed", inspect.ErrWatcherClosed, group.ErrWatcherClosed},
		{"queue.ErrConsumerClosed", queue.ErrConsumerClosed, group.ErrWatcherClosed},
		{"cache.ErrClosed", cache.ErrClosed, group.ErrWatcherClosed},
		{"shared.ErrWatcherClosed", shared.ErrWatcherClosed, group.ErrWatcherClosed},
		{"shared.ErrLost", shared.ErrLost, sync.ErrLockLost},
		{"shared.ErrKindMismatch", shared.ErrKindMismatch, sync.ErrKindMismatch},
		{"partition.ErrKindMismatch", partition.ErrKindMismatch, sync.ErrKindMismatch},
		{"group.ErrKindMismatch", group.ErrKindMismatch, sync.ErrKindMismatch},
		{"election.ErrKindMismatch", election.ErrKindMismatch, sync.ErrKindMismatch},
		{"queue.ErrKindMismatch", queue.ErrKindMismatch, sync.ErrKindMismatch},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %p (%v); want the value %p (%v)", tc.name, tc.got, tc.got, tc.want, tc.want)
		}
	}
}
