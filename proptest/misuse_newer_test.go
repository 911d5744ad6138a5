package proptest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/twophase"
)

// newerCalls draws the calls of the newer APIs: MultiMutex, StripedMutex
// and its stripes (the nil one of a TryLock that got none included), and
// two-phase commit with its coordinators and participants, kept across
// calls as a program keeps them.
func newerCalls(t *rapid.T, dir, p string, n int) []misuseCall {
	q := drawPath(t, dir)
	names := rapid.SampledFrom([][]string{nil, {"a"}, {"a", "b"}, {"a", "a"}, {"", "b"}, {"a/b"}}).Draw(t, "participants")
	name := rapid.SampledFrom([]string{"a", "b", "z", "", "x/y"}).Draw(t, "participant")
	deadline := rapid.SampledFrom([]time.Time{{}, time.Now().Add(time.Hour), time.Now().Add(-time.Second)}).Draw(t, "deadline")
	return []misuseCall{
		{"MultiMutex.TryLock", func(ctx context.Context, s *misuseSession, st store.Store) error {
			_, err := s.multiAt(st, p, q).TryLock(ctx)
			return err
		}},
		{"MultiMutex.Lock(cancelled)", func(ctx context.Context, s *misuseSession, st store.Store) error {
			return s.multiAt(st, p, q).Lock(cancelled(ctx))
		}},
		{"MultiMutex.Unlock", func(ctx context.Context, s *misuseSession, st store.Store) error {
			return s.multiAt(st, p, q).Unlock(ctx)
		}},
		{"StripedMutex.TryLock", func(ctx context.Context, s *misuseSession, st store.Store) error {
			x, ok, err := sync.NewStripedMutex(st, p, n).TryLock(ctx)
			if err == nil {
				if ok != (x != nil) {
					return fmt.Errorf("TryLock = %v, %v: ok and the stripe disagree", x, ok)
				}
				s.stripe = append(s.stripe, x) // nil when all were busy
			}
			return err
		}},
		{"StripedMutex.Lock(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := sync.NewStripedMutex(st, p, n).Lock(cancelled(ctx))
			return err
		}},
		{"Stripe.Unlock", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			if len(s.stripe) == 0 {
				return new(sync.Stripe).Unlock(ctx)
			}
			x := s.stripe[0]
			s.stripe = s.stripe[1:]
			return x.Unlock(ctx)
		}},
		{"twophase.Begin", func(ctx context.Context, s *misuseSession, st store.Store) error {
			c, err := twophase.Begin(ctx, st, p, names, deadline)
			if err == nil {
				s.coord = append(s.coord, c)
			}
			return err
		}},
		{"twophase.Resume", func(ctx context.Context, s *misuseSession, st store.Store) error {
			c, err := twophase.Resume(ctx, st, p)
			if err == nil {
				s.coord = append(s.coord, c)
			}
			return err
		}},
		{"twophase.Join", func(ctx context.Context, s *misuseSession, st store.Store) error {
			pt, err := twophase.Join(ctx, st, p, name)
			if err == nil {
				s.part = append(s.part, pt)
			}
			return err
		}},
		{"twophase.Await(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return twophase.Await(cancelled(ctx), st, p)
		}},
		{"twophase.Collect", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return twophase.Collect(ctx, st, p)
		}},
		{"Coordinator.Wait(cancelled)", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			return s.coordinator().Wait(cancelled(ctx))
		}},
		{"Coordinator.Abort", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			return s.coordinator().Abort(ctx)
		}},
		{"Coordinator.Forget", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			return s.coordinator().Forget(ctx)
		}},
		{"Participant.Vote", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			return s.participant().Vote(ctx, n%2 == 0)
		}},
		{"Participant.Wait(cancelled)", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			return s.participant().Wait(cancelled(ctx))
		}},
		{"Participant.Forget", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			return s.participant().Forget(ctx)
		}},
	}
}

// multiAt returns the MultiMutex on p and q, kept across calls on the live
// store.
func (s *misuseSession) multiAt(st store.Store, p, q string) *sync.MultiMutex {
	if st != s.live {
		return sync.NewMultiMutex(st, []string{p, q})
	}
	key := p + "\x00" + q
	if s.multi[key] == nil {
		s.multi[key] = sync.NewMultiMutex(st, []string{p, q})
	}
	return s.multi[key]
}

// coordinator returns the oldest coordinator a call made, or nil (whose
// methods must fail cleanly).
func (s *misuseSession) coordinator() *twophase.Coordinator {
	if len(s.coord) == 0 {
		return nil
	}
	return s.coord[0]
}

// participant returns the oldest participant a call made, or a zero one.
func (s *misuseSession) participant() *twophase.Participant {
	if len(s.part) == 0 {
		return new(twophase.Participant)
	}
	return s.part[0]
}

// optionCalls make the primitives with every option given its zero value
// (a nil logger, meter provider or label function, nil data, an empty
// label): each must be quiet or refused, never panic.
func optionCalls(p string, data []byte) []misuseCall {
	return []misuseCall{
		{"sync options(zero)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			m := sync.NewMutex(st, p, sync.WithLogger(nil), sync.WithMeterProvider(nil), sync.WithPathLabel(nil),
				sync.WithData(data), sync.WithLabel(""), sync.WithDisconnectPolicy(0))
			ok, err := m.TryLock(ctx)
			if ok {
				return m.Unlock(ctx)
			}
			return err
		}},
		{"queue options(zero)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return withQueue(st, p, []queue.Option{queue.WithLogger(nil), queue.WithMeterProvider(nil), queue.WithPathLabel(nil)},
				func(q *queue.Queue) error { _, err := q.Len(ctx); return err })
		}},
		{"election options(zero)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			e := election.New(st, p, election.WithLogger(nil), election.WithMeterProvider(nil), election.WithPathLabel(nil),
				election.WithDisconnectPolicy(0))
			_, err := e.Leader(ctx)
			return err
		}},
		{"inspect.Read", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := inspect.Read(ctx, st, p)
			return err
		}},
		{"inspect.Walk", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			fn := func(inspect.Report) error { return nil }
			if len(data) == 0 {
				fn = nil // a walk with nowhere to report
			}
			return inspect.Walk(ctx, st, p, fn)
		}},
		{"inspect.Watch(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			w := inspect.Watch(cancelled(ctx), st, p)
			defer w.Close()
			for range w.Reports() {
			}
			<-w.Done()
			if err := w.Err(); err != nil && !errors.Is(err, errCause) && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		}},
		{"inspect.Watch", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			w := inspect.Watch(ctx, st, p)
			defer w.Close()
			select {
			case _, ok := <-w.Reports():
				if ok {
					return nil
				}
			case <-time.After(misuseCallTimeout + misuseOverrun):
				return fmt.Errorf("inspect.Watch(%q) neither sent a report nor stopped", p)
			}
			<-w.Done()
			return w.Err()
		}},
		{"inspect.ImplicitDirs", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := inspect.ImplicitDirs(ctx, st, p)
			return err
		}},
		{"inspect.ParseIdentity", func(context.Context, *misuseSession, store.Store) error {
			inspect.ParseIdentity(data)
			inspect.IdentityRecord(string(data))
			inspect.SessionString(int64(len(data)) - 1)
			var c inspect.Claim
			if err := c.UnmarshalJSON(data); err == nil {
				if _, err := c.MarshalJSON(); err != nil {
					return err
				}
			}
			return nil
		}},
	}
}

// storeCalls make the methods of store.Store itself, the adapters' own
// API, with the drawn path, data and mode, on the live or the closed
// session: a nil store.Store has no method to call, so the "nil" draw
// makes them on the closed one.
func storeCalls(t *rapid.T, p string, data []byte) []misuseCall {
	mode := rapid.SampledFrom([]store.Mode{store.Persistent, store.Ephemeral, store.Sequential, store.EphemeralSequential, store.Mode(99)}).Draw(t, "mode")
	version := rapid.SampledFrom([]int64{store.AnyVersion, 0, 1, -7}).Draw(t, "version")
	session := func(s *misuseSession, st store.Store) store.Store {
		if st == nil {
			return s.closed
		}
		return st
	}
	return []misuseCall{
		{"Store.Create", func(ctx context.Context, s *misuseSession, st store.Store) error {
			_, err := session(s, st).Create(ctx, p, data, mode)
			return err
		}},
		{"Store.Get", func(ctx context.Context, s *misuseSession, st store.Store) error {
			_, err := session(s, st).Get(ctx, p)
			return err
		}},
		{"Store.Set", func(ctx context.Context, s *misuseSession, st store.Store) error {
			_, err := session(s, st).Set(ctx, p, data, version)
			return err
		}},
		{"Store.Children", func(ctx context.Context, s *misuseSession, st store.Store) error {
			_, err := session(s, st).Children(ctx, p)
			return err
		}},
		{"Store.ExistsW(cancelled)", func(ctx context.Context, s *misuseSession, st store.Store) error {
			_, _, ev, err := session(s, st).ExistsW(cancelled(ctx), p)
			if err == nil {
				select {
				case e := <-ev:
					err = e.Err
				case <-ctx.Done():
					return fmt.Errorf("a watch set with a cancelled ctx did not fire")
				}
			}
			return err
		}},
		{"Store.Delete", func(ctx context.Context, s *misuseSession, st store.Store) error {
			return session(s, st).Delete(ctx, p)
		}},
		{"Store.Session", func(ctx context.Context, s *misuseSession, st store.Store) error {
			st = session(s, st)
			st.SessionID()
			select {
			case <-st.Disconnected():
			default:
			}
			if st == s.closed && st.Context().Err() == nil {
				return fmt.Errorf("a closed session's Context is not done")
			}
			return s.closed.Close() // again: idempotent
		}},
	}
}
