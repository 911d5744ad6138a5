package shared_test

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// Every hold handle of corral is a Holder.
var (
	_ shared.Holder = (*sync.Mutex)(nil)
	_ shared.Holder = (*sync.RWMutex)(nil)
	_ shared.Holder = (*sync.ReadHold)(nil)
	_ shared.Holder = (*sync.Lease)(nil)
	_ shared.Holder = (*sync.Stripe)(nil)
	_ shared.Holder = (*election.Leadership)(nil)
	_ shared.Holder = (*group.Membership)(nil)
	_ shared.Holder = (*partition.Shard)(nil)
)

// TestEveryHoldGuards: a write under each kind of hold (a lock, a write
// and a read hold of an RWMutex, a semaphore lease, a leadership, a group
// membership) is applied while it is held, refused once it was released
// (before any I/O where the handle then holds nothing, by the server where
// it still names its node), and refused by the server with ErrLost once
// its session expired, on every store.
func TestEveryHoldGuards(t *testing.T) {
	type hold struct {
		name string
		take func(ctx context.Context, st store.Store, dir string) (shared.Holder, func(context.Context) error, error)
	}
	holds := []hold{
		{"mutex", func(ctx context.Context, st store.Store, dir string) (shared.Holder, func(context.Context) error, error) {
			m := sync.NewMutex(st, dir)
			return m, m.Unlock, m.Lock(ctx)
		}},
		{"rwmutex", func(ctx context.Context, st store.Store, dir string) (shared.Holder, func(context.Context) error, error) {
			m := sync.NewRWMutex(st, dir)
			return m, m.Unlock, m.Lock(ctx)
		}},
		{"read hold", func(ctx context.Context, st store.Store, dir string) (shared.Holder, func(context.Context) error, error) {
			r, err := sync.NewRWMutex(st, dir).RLock(ctx)
			return r, r.Unlock, err
		}},
		{"lease", func(ctx context.Context, st store.Store, dir string) (shared.Holder, func(context.Context) error, error) {
			l, err := sync.NewSemaphore(st, dir, 2).Acquire(ctx)
			return l, l.Release, err
		}},
		{"leadership", func(ctx context.Context, st store.Store, dir string) (shared.Holder, func(context.Context) error, error) {
			l, err := election.New(st, dir).Campaign(ctx, []byte("me"))
			return l, l.Resign, err
		}},
		{"membership", func(ctx context.Context, st store.Store, dir string) (shared.Holder, func(context.Context) error, error) {
			m, err := group.Join(ctx, st, dir, []byte("me"))
			return m, m.Leave, err
		}},
	}
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, h := range holds {
			t.Run(h.name, func(t *testing.T) {
				ctx := ctxFor(t)
				sts := backends.Open(t, b, 3)
				dir := testDir(t)
				v := shared.NewValue(sts[2], dir+"/state")

				held, release, err := h.take(ctx, sts[0], dir+"/hold")
				if err != nil {
					t.Fatal(err)
				}
				got, err := v.SetWhile(ctx, held, []byte("held"))
				wantSnap(t, "SetWhile(held)", got, err, "held", 0)
				if err := release(ctx); err != nil {
					t.Fatal(err)
				}
				_, err = v.SetWhile(ctx, held, []byte("released"))
				if !errors.Is(err, shared.ErrNotHeld) && !errors.Is(err, shared.ErrLost) {
					t.Errorf("SetWhile(released) = %v; want ErrNotHeld (a handle that holds nothing now) or ErrLost", err)
				}

				held, _, err = h.take(ctx, sts[1], dir+"/hold")
				if err != nil {
					t.Fatal(err)
				}
				b.Expire(t, sts[1])
				_, err = v.SetWhile(ctx, held, []byte("expired"))
				if !errors.Is(err, shared.ErrLost) {
					t.Errorf("SetWhile(hold of an expired session) = %v; want ErrLost", err)
				}
				got, err = v.Get(ctx)
				wantSnap(t, "Get after the refused writes", got, err, "held", 0)
			})
		}
	})
}
