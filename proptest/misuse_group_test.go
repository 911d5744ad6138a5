package proptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
)

// groupCalls draws the calls of group and partition: joins with bad
// paths, values, ids, numbers of shards and options, memberships and
// members kept across calls and left (the zero ones included), watches
// with live and cancelled contexts, and the assignment itself.
func groupCalls(t *rapid.T, p string, data []byte) []misuseCall {
	gopts := drawGroupOptions(t)
	popts := drawPartitionOptions(t)
	shards := rapid.SampledFrom([]int{-1, 0, 1, 2, 3, partition.MaxShards + 1}).Draw(t, "shards")
	id := rapid.SampledFrom([]string{"a", "b", "", "\x00", strings.Repeat("x", store.MaxDataSize+1)}).Draw(t, "id")
	ids := rapid.SampledFrom([][]string{nil, {"a"}, {"b", "a"}, {"a", "a"}, {"", "a"}}).Draw(t, "ids")
	return []misuseCall{
		{"group.Join", func(ctx context.Context, s *misuseSession, st store.Store) error {
			m, err := group.Join(ctx, st, p, data, gopts...)
			if err == nil {
				s.memberships = append(s.memberships, m)
			}
			return err
		}},
		{"group.Join(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			m, err := group.Join(cancelled(ctx), st, p, data, gopts...)
			if err == nil {
				return fmt.Errorf("group.Join with a cancelled ctx made %s", m.Path())
			}
			return err
		}},
		{"Membership.Leave", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			m := new(group.Membership)
			if len(s.memberships) > 0 {
				m, s.memberships = s.memberships[0], s.memberships[1:]
			}
			return m.Leave(ctx)
		}},
		{"Membership.SetValue", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			m := new(group.Membership)
			if len(s.memberships) > 0 {
				m = s.memberships[0]
			}
			return m.SetValue(ctx, data)
		}},
		{"group.Watch", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return watchGroup(ctx, st, p, watchOptions(gopts))
		}},
		{"group.Watch(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return watchGroup(cancelled(ctx), st, p, watchOptions(gopts))
		}},
		{"group options(zero)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			m, err := group.Join(ctx, st, p, data, group.WithLogger(nil), group.WithMeterProvider(nil), group.WithDisconnectPolicy(0))
			if err != nil {
				return err
			}
			return m.Leave(ctx)
		}},
		{"partition.Join", func(ctx context.Context, s *misuseSession, st store.Store) error {
			m, err := partition.Join(ctx, st, p, shards, id, popts...)
			if err == nil {
				s.members = append(s.members, m)
				s.shared[p] = true
			}
			return err
		}},
		{"partition.Join(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			m, err := partition.Join(cancelled(ctx), st, p, shards, id, popts...)
			if err == nil {
				return fmt.Errorf("partition.Join with a cancelled ctx made member %q", m.ID())
			}
			return err
		}},
		{"partition.Member.Run", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			m := new(partition.Member)
			if len(s.members) > 0 {
				m = s.members[0]
			}
			// A short run: it returns once ctx ends, and the member
			// has left then.
			rctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			defer cancel()
			return m.Run(rctx, func(ctx context.Context, _ *partition.Shard) error {
				<-ctx.Done()
				return ctx.Err()
			})
		}},
		{"partition.Member.Leave", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			m := new(partition.Member)
			if len(s.members) > 0 {
				m, s.members = s.members[0], s.members[1:]
			}
			return m.Leave(ctx)
		}},
		{"partition options(zero)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			m, err := partition.Join(ctx, st, p, 1, "a", partition.WithGrace(0), partition.WithRetryDelay(0), partition.WithLogger(nil), partition.WithMeterProvider(nil))
			if err != nil {
				return err
			}
			return m.Leave(ctx)
		}},
		{"partition.Assign", func(context.Context, *misuseSession, store.Store) error {
			owners, err := partition.Assign(ids, shards)
			if err != nil {
				return err
			}
			if len(owners) != shards {
				return fmt.Errorf("Assign(%q, %d) = %d owners", ids, shards, len(owners))
			}
			for i, o := range owners {
				if o != "" && !slices.Contains(ids, o) || o == "" && len(ids) > 0 {
					return fmt.Errorf("Assign(%q, %d): shard %d owned by %q", ids, shards, i, o)
				}
			}
			return nil
		}},
		{"partition.Dirs", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			// What a tool does with them: watch the members, walk
			// the shards. An invalid path must give an invalid one.
			if _, err := inspect.Read(ctx, st, partition.MembersDir(p)); err != nil && !errors.Is(err, store.ErrNoNode) {
				return err
			}
			err := inspect.Walk(ctx, st, partition.ShardsDir(p), func(inspect.Report) error { return nil })
			if errors.Is(err, store.ErrNoNode) {
				return nil // no shard taken yet
			}
			return err
		}},
	}
}

// drawGroupOptions draws the options of a group: none, good, an unknown
// policy, a nil option.
func drawGroupOptions(t *rapid.T) []group.JoinOption {
	switch rapid.IntRange(0, 4).Draw(t, "group options") {
	case 1:
		return []group.JoinOption{group.WithDisconnectPolicy(group.LoseOnDisconnect)}
	case 2:
		return []group.JoinOption{group.WithDisconnectPolicy(7)}
	case 3:
		return []group.JoinOption{nil}
	case 4:
		return []group.JoinOption{group.Option(nil)}
	}
	return nil
}

// watchOptions returns the options of opts that a watcher takes (those
// that are group.Options), with a nil one for each nil one.
func watchOptions(opts []group.JoinOption) []group.Option {
	var wo []group.Option
	for _, o := range opts {
		switch o := o.(type) {
		case nil:
			wo = append(wo, nil)
		case group.Option:
			wo = append(wo, o)
		}
	}
	return wo
}

// drawPartitionOptions draws the options of a partition member: none, no
// grace, a negative grace, a nil option.
func drawPartitionOptions(t *rapid.T) []partition.Option {
	switch rapid.IntRange(0, 5).Draw(t, "partition options") {
	case 1:
		return []partition.Option{partition.WithGrace(0)}
	case 2:
		return []partition.Option{partition.WithGrace(-1)}
	case 3:
		return []partition.Option{nil}
	case 4:
		return []partition.Option{partition.WithRetryDelay(0)}
	case 5:
		return []partition.Option{partition.WithRetryDelay(-1)}
	}
	return nil
}

// watchGroup watches the group at path until the first member list or the
// watcher's end, and returns why it ended, if it did by itself.
func watchGroup(ctx context.Context, st store.Store, path string, opts []group.Option) error {
	w := group.Watch(ctx, st, path, opts...)
	defer w.Close()
	select {
	case _, ok := <-w.Members():
		if ok {
			return nil
		}
	case <-time.After(misuseCallTimeout + misuseOverrun):
		// Not ctx.Done: a watcher that ends with its ctx is told apart
		// from one that outlives it.
		return fmt.Errorf("group.Watch(%q) neither sent members nor stopped", path)
	}
	<-w.Done()
	return w.Err()
}

// leaveAll ends the memberships and partition members the calls left, as
// a program does before it closes its session.
func (s *misuseSession) leaveAll(ctx context.Context) error {
	var errs []error
	for _, m := range s.members {
		errs = append(errs, m.Leave(ctx))
	}
	for _, m := range s.memberships {
		errs = append(errs, m.Leave(ctx))
	}
	s.members, s.memberships = nil, nil
	return errors.Join(errs...)
}
