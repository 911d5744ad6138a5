package proptest

import (
	"context"
	"errors"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
)

// misuseHolds is where the shared calls make the holds they write under:
// outside every drawn path, so that no call sees them as children.
const misuseHolds = "/proptest/misuse-holds"

// misuseHold is a hold as a shared call is given one.
type misuseHold struct{ g store.Guard }

func (h misuseHold) Guard() store.Guard { return h.g }

// sharedCalls draws the calls of package shared: values and counters at
// the drawn path with bad and good input, and guarded writes under a hold
// held, one whose node is gone, one of nothing, and none.
func sharedCalls(t *rapid.T, p string, n int, data []byte) []misuseCall {
	hold := rapid.IntRange(0, 3).Draw(t, "hold")
	ops := rapid.SampledFrom([][]store.Op{
		nil,
		{store.SetOp(p, data, int64(n))},
		{store.CreateOp(p, data)},
		{store.DeleteOp(p, int64(n))},
		{store.CheckOp(p, int64(n)), store.CreateOp(p+"/c", nil)},
	}).Draw(t, "ops")
	// holder returns the hold of the call on st: one it takes (an
	// ephemeral sequential node of its session), one whose node is gone,
	// the zero one, or none.
	holder := func(ctx context.Context, st store.Store) shared.Holder {
		switch hold {
		case 0:
			if st != nil {
				if nd, err := st.Create(ctx, misuseHolds+"/h-", nil, store.EphemeralSequential); err == nil {
					return misuseHold{store.Guard{Path: nd.Path, Seq: nd.Seq}}
				}
			}
			fallthrough
		case 1:
			return misuseHold{store.Guard{Path: misuseHolds + "/gone", Seq: 1}}
		case 2:
			return misuseHold{}
		}
		return nil
	}
	return []misuseCall{
		{"Value.Get", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := shared.NewValue(st, p).Get(ctx)
			return err
		}},
		{"Value.Set", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := shared.NewValue(st, p).Set(ctx, data)
			return err
		}},
		{"Value.CompareAndSet", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := shared.NewValue(st, p).CompareAndSet(ctx, data, int64(n))
			return err
		}},
		{"Value.SetWhile", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := shared.NewValue(st, p).SetWhile(ctx, holder(ctx, st), data)
			return err
		}},
		{"Value.CompareAndSetWhile", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := shared.NewValue(st, p).CompareAndSetWhile(ctx, holder(ctx, st), data, int64(n))
			return err
		}},
		{"Value.Watch", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return watchValue(ctx, shared.NewValue(st, p))
		}},
		{"Value.Watch(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return watchValue(cancelled(ctx), shared.NewValue(st, p))
		}},
		{"Counter.Get", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := shared.NewCounter(st, p).Get(ctx)
			return err
		}},
		{"Counter.Add", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := shared.NewCounter(st, p).Add(ctx, int64(n))
			return err
		}},
		{"shared.Write", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := shared.Write(ctx, st, holder(ctx, st), ops)
			return err
		}},
		{"shared options(zero)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := shared.NewCounter(st, p, shared.WithLogger(nil), shared.WithMeterProvider(nil), shared.WithPathLabel(nil)).Get(ctx)
			if err != nil {
				return err
			}
			_, err = shared.Write(ctx, st, holder(ctx, st), ops, shared.WithLogger(nil), nil)
			return err
		}},
	}
}

// watchValue watches v until the first snapshot or the watcher's end, and
// returns why it ended, if it did by itself.
func watchValue(ctx context.Context, v *shared.Value) error {
	w := v.Watch(ctx)
	defer w.Close()
	select {
	case _, ok := <-w.Snapshots():
		if ok {
			return nil
		}
	case <-time.After(misuseCallTimeout + misuseOverrun):
		return errors.New("Value.Watch neither sent a snapshot nor stopped")
	}
	<-w.Done()
	return w.Err()
}
