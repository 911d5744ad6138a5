package proptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/twophase"
)

// misuseCallTimeout is the ctx of a call that is not cancelled on purpose.
// Such calls never wait for another holder, so they end long before it.
const misuseCallTimeout = 10 * time.Second

// misuseOverrun is how long a call may take beyond its ctx: the cleanup
// grace (one second) and scheduling slack.
const misuseOverrun = 2 * time.Second

// errCause is the cause a cancelled ctx of the misuse test carries.
var errCause = errors.New("proptest: cancelled with a cause")

// The sentinels the misuse test accepts, in the order it classifies an
// error by: every error a call returns must match one of them.
var misuseSentinels = []error{
	store.ErrInvalidPath,
	store.ErrInvalidArgument,
	store.ErrTooLarge,
	store.ErrClosed,
	store.ErrSessionExpired,
	store.ErrNotEmpty,
	store.ErrNoNode, // inspect.Read and Walk of a missing path, Store.Get
	store.ErrNodeExists,
	store.ErrBadVersion,
	store.ErrEphemeralParent,
	errCause,
	context.Canceled,
	context.DeadlineExceeded,
	sync.ErrKindMismatch,
	sync.ErrInvalidLimit,
	sync.ErrMismatch,
	sync.ErrNotLocked,
	sync.ErrNotEntered,
	sync.ErrUnlocked,
	election.ErrNoLeader,
	election.ErrNotLeader,
	queue.ErrInvalidDelivery,
	queue.ErrMismatch,
	queue.ErrSettled,
	queue.ErrClaimLost,
	queue.ErrNoClaim,
	queue.ErrPeeked,
	twophase.ErrExists,
	twophase.ErrNoTransaction,
	twophase.ErrNotParticipant,
	twophase.ErrVoted,
	twophase.ErrUndecided,
	twophase.ErrAborted,
	twophase.ErrCommitted,
	shared.ErrLost,
	shared.ErrNotHeld,
	shared.ErrOverflow,
}

// classify names the first sentinel err matches, "ok" for nil, and ""
// when it matches none.
func classify(err error) string {
	if err == nil {
		return "ok"
	}
	for _, s := range misuseSentinels {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return ""
}

// misuseSession is one store's side of the lockstep: a live session, a
// closed one, and the handles the calls have made so far.
type misuseSession struct {
	name   string
	live   store.Store
	closed store.Store
	mutex  map[string]*sync.Mutex
	rw     map[string]*sync.RWMutex
	reads  []*sync.ReadHold
	leases []*sync.Lease
	double map[string]*sync.DoubleBarrier
	items  []*queue.Item // taken or peeked, not yet settled by a call
	multi  map[string]*sync.MultiMutex
	stripe []*sync.Stripe // granted, or nil from a TryLock that got none
	coord  []*twophase.Coordinator
	part   []*twophase.Participant
	// memberships and members are the group memberships and partition
	// members that calls made and no call has left yet.
	memberships []*group.Membership
	members     []*partition.Member
	// shared are the paths a partition member joined: its members take
	// and hand over shards in the background, so what lies below such a
	// path changes between calls (see treeShape).
	shared map[string]bool
}

// misuseCall is one call, drawn once and made on every store.
type misuseCall struct {
	desc string
	run  func(ctx context.Context, s *misuseSession, st store.Store) error
}

// The paths the calls draw from: good ones (under the check's own
// directory) and every kind of bad one.
func drawPath(t *rapid.T, dir string) string {
	return rapid.SampledFrom([]string{
		dir + "/a", dir + "/a", dir + "/b", dir + "/c/d",
		"", "/", "relative", dir + "/", dir + "//x", dir + "/./x", dir + "/..",
		dir + "/\x00", dir + "/\ue000", dir + "/\ufff5",
		"/" + strings.Repeat("x", store.MaxPathSize),
		dir + "/" + strings.Repeat("y", store.MaxPathSize-len(dir)-100),
	}).Draw(t, "path")
}

func drawData(t *rapid.T) []byte {
	switch rapid.IntRange(0, 3).Draw(t, "size") {
	case 0:
		return nil
	case 1:
		return []byte("data")
	case 2:
		return make([]byte, store.MaxDataSize)
	}
	return make([]byte, store.MaxDataSize+1)
}

// drawBatch returns the batch PutBatch gets with n and data: nil (n < 0),
// empty, n copies of data, or, for n = 3, one item over
// store.MaxBatchNodes.
func drawBatch(n int, data []byte) [][]byte {
	switch {
	case n < 0:
		return nil
	case n == 3:
		n = store.MaxBatchNodes + 1
	}
	items := make([][]byte, n)
	for i := range items {
		items[i] = data
	}
	return items
}

// drawCall draws one call of the public API with good or bad input.
func drawCall(t *rapid.T, dir string) misuseCall {
	p := drawPath(t, dir)
	n := rapid.IntRange(-1, 3).Draw(t, "n")
	data := drawData(t)
	c := rapid.SampledFrom(misuseCalls(t, dir, p, n, data)).Draw(t, "call")
	c.desc = fmt.Sprintf("%s(path %.60q, n %d, %d bytes)", c.desc, p, n, len(data))
	return c
}

// drawCallsAll draws the input of one call and returns every call the
// generator makes with it, named without their input (for
// TestMisuseCoverage).
func drawCallsAll(t *rapid.T, dir string) []misuseCall {
	return misuseCalls(t, dir, drawPath(t, dir), rapid.IntRange(-1, 3).Draw(t, "n"), drawData(t))
}

// misuseCalls returns every call of the public API the generator makes,
// on path p with n and data.
func misuseCalls(t *rapid.T, dir, p string, n int, data []byte) []misuseCall {
	calls := []misuseCall{
		{"Mutex.TryLock", func(ctx context.Context, s *misuseSession, st store.Store) error {
			_, err := s.mutexAt(st, p).TryLock(ctx)
			return err
		}},
		{"Mutex.Unlock", func(ctx context.Context, s *misuseSession, st store.Store) error {
			return s.mutexAt(st, p).Unlock(ctx)
		}},
		{"Mutex.Lock(cancelled)", func(ctx context.Context, s *misuseSession, st store.Store) error {
			return s.mutexAt(st, p).Lock(cancelled(ctx))
		}},
		{"RWMutex.TryRLock", func(ctx context.Context, s *misuseSession, st store.Store) error {
			r, ok, err := s.rwAt(st, p).TryRLock(ctx)
			if ok {
				s.reads = append(s.reads, r)
			}
			return err
		}},
		{"ReadHold.Unlock", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			if len(s.reads) == 0 {
				return new(sync.ReadHold).Unlock(ctx)
			}
			r := s.reads[0]
			s.reads = s.reads[1:]
			return r.Unlock(ctx)
		}},
		{"Semaphore.TryAcquire", func(ctx context.Context, s *misuseSession, st store.Store) error {
			l, ok, err := sync.NewSemaphore(st, p, n).TryAcquire(ctx)
			if ok {
				s.leases = append(s.leases, l)
			}
			return err
		}},
		{"Lease.Release", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			if len(s.leases) == 0 {
				var zero sync.Lease
				return zero.Release(ctx)
			}
			l := s.leases[0]
			s.leases = s.leases[1:]
			return l.Release(ctx)
		}},
		{"Barrier.Set", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return sync.NewBarrier(st, p).Set(ctx)
		}},
		{"Barrier.Remove", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return sync.NewBarrier(st, p).Remove(ctx)
		}},
		{"Barrier.Wait(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return sync.NewBarrier(st, p).Wait(cancelled(ctx))
		}},
		{"DoubleBarrier.Enter(cancelled)", func(ctx context.Context, s *misuseSession, st store.Store) error {
			return s.doubleAt(st, p, n).Enter(cancelled(ctx))
		}},
		{"DoubleBarrier.Leave", func(ctx context.Context, s *misuseSession, st store.Store) error {
			return s.doubleAt(st, p, n).Leave(ctx)
		}},
		{"Election.Campaign(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := election.New(st, p).Campaign(cancelled(ctx), data)
			return err
		}},
		{"Election.Leader", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			_, err := election.New(st, p).Leader(ctx)
			return err
		}},
		{"Election.Observe", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			octx, cancel := context.WithCancel(ctx)
			o := election.New(st, p).Observe(octx)
			select {
			case _, ok := <-o.Leaders():
				if ok {
					cancel()
				}
			case <-ctx.Done():
			}
			cancel()
			<-o.Done()
			if err := o.Err(); !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		}},
		{"Election.Candidate", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			c := election.New(st, p).Candidate(ctx, data)
			defer c.Close()
			select {
			case l, ok := <-c.Terms():
				if ok {
					return l.Resign(ctx)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			return c.Err()
		}},
	}
	qopts := drawQueueOptions(t, dir, n)
	calls = append(calls,
		misuseCall{"Queue.Put", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return withQueue(st, p, qopts, func(q *queue.Queue) error { return q.Put(ctx, data) })
		}},
		misuseCall{"Queue.PutAsync", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return withQueue(st, p, qopts, func(q *queue.Queue) error { return q.PutAsync(ctx, data, 0).Wait(ctx) })
		}},
		misuseCall{"Queue.PutBatch", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return withQueue(st, p, qopts, func(q *queue.Queue) error { return q.PutBatch(ctx, drawBatch(n, data)) })
		}},
		misuseCall{"Queue.TryTake", func(ctx context.Context, s *misuseSession, st store.Store) error {
			return withQueue(st, p, qopts, func(q *queue.Queue) error {
				it, ok, err := q.TryTake(ctx)
				if ok {
					s.items = append(s.items, it)
				}
				return err
			})
		}},
		misuseCall{"Queue.Take(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return withQueue(st, p, qopts, func(q *queue.Queue) error {
				_, err := q.Take(cancelled(ctx))
				return err
			})
		}},
		misuseCall{"Queue.Peek", func(ctx context.Context, s *misuseSession, st store.Store) error {
			return withQueue(st, p, qopts, func(q *queue.Queue) error {
				it, ok, err := q.Peek(ctx)
				if ok {
					s.items = append(s.items, it)
				}
				return err
			})
		}},
		misuseCall{"Queue.Settings", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return withQueue(st, p, qopts, func(q *queue.Queue) error {
				got, err := q.Settings(ctx)
				if err == nil && got.Delivery != q.Delivery() {
					return fmt.Errorf("Settings().Delivery %v, Delivery() %v: they disagree", got.Delivery, q.Delivery())
				}
				return err
			})
		}},
		misuseCall{"Queue.Len", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return withQueue(st, p, qopts, func(q *queue.Queue) error {
				_, err := q.Len(ctx)
				return err
			})
		}},
		misuseCall{"Queue.Consume(cancelled)", func(ctx context.Context, _ *misuseSession, st store.Store) error {
			return withQueue(st, p, qopts, func(q *queue.Queue) error {
				c := q.Consume(cancelled(ctx))
				for range c.Items() {
					return errors.New("a consumer with a cancelled ctx handed over an item")
				}
				return c.Err()
			})
		}},
		misuseCall{"Item.Ack", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			return s.popItem().Ack(ctx)
		}},
		misuseCall{"Item.Nack", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			return s.popItem().Nack(ctx)
		}},
		misuseCall{"Item.Extend", func(ctx context.Context, s *misuseSession, _ store.Store) error {
			return s.popItem().Extend(ctx)
		}},
	)
	calls = append(calls, newerCalls(t, dir, p, n)...)
	calls = append(calls, groupCalls(t, p, data)...)
	calls = append(calls, sharedCalls(t, p, n, data)...)
	calls = append(calls, storeCalls(t, p, data)...)
	return append(calls, optionCalls(p, data)...)
}

// drawQueueOptions draws the options of a Queue: good, bad, and ones that
// disagree with what an earlier call stored with the queue. A visibility
// timeout is long enough never to pass during a check.
func drawQueueOptions(t *rapid.T, dir string, n int) []queue.Option {
	var opts []queue.Option
	switch rapid.IntRange(0, 3).Draw(t, "delivery") {
	case 1:
		opts = append(opts, queue.WithDelivery(queue.AtMostOnce))
	case 2:
		opts = append(opts, queue.WithDelivery(queue.AtLeastOnce))
	case 3:
		opts = append(opts, queue.WithDelivery(queue.Delivery(7)))
	}
	switch rapid.IntRange(0, 3).Draw(t, "visibility") {
	case 1:
		opts = append(opts, queue.WithVisibilityTimeout(time.Hour))
	case 2:
		opts = append(opts, queue.WithVisibilityTimeout(-time.Second))
	case 3:
		opts = append(opts, nil)
	}
	if rapid.Bool().Draw(t, "dead letter") {
		opts = append(opts, queue.WithDeadLetter(drawPath(t, dir), n))
	}
	if rapid.Bool().Draw(t, "puts in flight") {
		opts = append(opts, queue.WithPutsInFlight(rapid.IntRange(-1, 3).Draw(t, "n")))
	}
	return opts
}

// withQueue runs f on the queue at p (which reports the bad input New was
// given).
func withQueue(st store.Store, p string, opts []queue.Option, f func(*queue.Queue) error) error {
	return f(queue.New(st, p, opts...))
}

// popItem returns the oldest item taken or peeked and not yet settled by a
// call, or a zero Item.
func (s *misuseSession) popItem() *queue.Item {
	if len(s.items) == 0 {
		return new(queue.Item)
	}
	it := s.items[0]
	s.items = s.items[1:]
	return it
}

// cancelled returns a ctx derived from ctx and cancelled with errCause.
func cancelled(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	cancel(errCause)
	return ctx
}

// The handles keep their state across calls, as a program's would; a nil
// or closed store gets handles of its own each time.
func (s *misuseSession) mutexAt(st store.Store, p string) *sync.Mutex {
	if st != s.live {
		return sync.NewMutex(st, p)
	}
	if s.mutex[p] == nil {
		s.mutex[p] = sync.NewMutex(st, p)
	}
	return s.mutex[p]
}

func (s *misuseSession) rwAt(st store.Store, p string) *sync.RWMutex {
	if st != s.live {
		return sync.NewRWMutex(st, p)
	}
	if s.rw[p] == nil {
		s.rw[p] = sync.NewRWMutex(st, p)
	}
	return s.rw[p]
}

func (s *misuseSession) doubleAt(st store.Store, p string, n int) *sync.DoubleBarrier {
	key := fmt.Sprint(p, n)
	if st != s.live {
		return sync.NewDoubleBarrier(st, p, n)
	}
	if s.double[key] == nil {
		s.double[key] = sync.NewDoubleBarrier(st, p, n)
	}
	return s.double[key]
}

// TestMisuseAcrossStores makes random sequences of calls of the public API,
// with good and bad input (paths of every invalid kind and size, data at
// and over the limit, limits under 1, cancelled contexts, closed and nil
// stores, other recipes on the same path, queue options that are bad or
// disagree with the settings stored, items settled twice, peeked or zero,
// multi-path and striped locks, the nil stripe of a TryLock that got none,
// two-phase transactions with bad participants and deadlines and their
// coordinators and participants, group memberships and watches, partition
// members with bad numbers of shards and ids, the shard assignment, zero
// options, inspect, and store.Store's
// own methods), on memstore, ZooKeeper and etcd in lockstep. No call may panic or outlive its ctx by more than the
// cleanup grace; every error must match a documented sentinel; the three
// stores must answer every call with the same sentinel; and after every
// call their trees must agree (treeShape).
func TestMisuseAcrossStores(t *testing.T) {
	var names []string
	for _, name := range backends.Names {
		if backends.Selected(name) {
			names = append(names, name)
		}
	}
	bs := map[string]storetest.Backend{}
	for _, name := range names {
		// Lockstep: a directory goes with its last node on every store.
		bs[name] = backends.Eager(t, name)
	}
	check := 0
	rapid.Check(t, func(rt *rapid.T) {
		check++
		scope := &checkScope{TB: t}
		defer scope.end()
		dir := fmt.Sprintf("/proptest/misuse/%d-%d", time.Now().UnixNano(), check)
		var sessions []*misuseSession
		for _, name := range names {
			closed := bs[name].Open(scope)
			closed.Close()
			sessions = append(sessions, &misuseSession{
				name: name, live: bs[name].Open(scope), closed: closed,
				mutex: map[string]*sync.Mutex{}, rw: map[string]*sync.RWMutex{}, double: map[string]*sync.DoubleBarrier{},
				multi: map[string]*sync.MultiMutex{}, shared: map[string]bool{},
			})
		}
		defer func() {
			for _, s := range sessions {
				ctx, cancel := context.WithTimeout(context.Background(), misuseCallTimeout)
				err := s.leaveAll(ctx)
				cancel()
				if err != nil {
					rt.Errorf("%s: leaving the groups and partitions at the end = %v", s.name, err)
				}
				s.live.Close()
			}
		}()
		for range rapid.IntRange(1, 10).Draw(rt, "calls") {
			c := drawCall(rt, dir)
			which := rapid.SampledFrom([]string{"live", "live", "live", "closed", "nil"}).Draw(rt, "store")
			got := map[string]string{}
			for _, s := range sessions {
				st := map[string]store.Store{"live": s.live, "closed": s.closed, "nil": nil}[which]
				ctx, cancel := context.WithTimeout(context.Background(), misuseCallTimeout)
				start := time.Now()
				err := call(c, ctx, s, st)
				took := time.Since(start)
				cancel()
				if took > misuseCallTimeout+misuseOverrun {
					rt.Fatalf("%s on %s (%s store) took %v", c.desc, s.name, which, took)
				}
				class := classify(err)
				if class == "" {
					rt.Fatalf("%s on %s (%s store) = %v: no documented sentinel", c.desc, s.name, which, err)
				}
				got[s.name] = class
			}
			for _, s := range sessions[1:] {
				if got[s.name] != got[sessions[0].name] {
					rt.Fatalf("%s (%s store): the stores disagree: %q", c.desc, which, got)
				}
			}
			if trees := treesDisagree(sessions, dir); trees != nil {
				rt.Fatalf("after %s (%s store): the stores' trees disagree: %q", c.desc, which, trees)
			}
		}
	})
}

// checkScope is the testing.TB the sessions of one check are opened with:
// the cleanups the backends register (each session's proxy and client) run
// when the check ends, not when the test does, so that a thousand checks do
// not hold a thousand checks' connections.
type checkScope struct {
	testing.TB
	cleanups []func()
}

func (s *checkScope) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *checkScope) end() {
	for _, f := range slices.Backward(s.cleanups) {
		f()
	}
}

// call makes c, turning a panic into a failure of its own.
func call(c misuseCall, ctx context.Context, s *misuseSession, st store.Store) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return c.run(ctx, s, st)
}

// reapWait bounds how long treesDisagree waits for ZooKeeper's reaper,
// which the test servers run every second.
const reapWait = 10 * time.Second

// treesDisagree returns the stores' trees (treeShape) when they disagree,
// nil when they agree. While they disagree it waits, at most reapWait, for
// a change on ZooKeeper's: the contract leaves the server's reaper a
// directory whose data was set (see Parents in package store), as
// Store.Set or a StripedMutex's limit sets the directory a lock made before
// it, and the directories above it that it empties.
func treesDisagree(sessions []*misuseSession, dir string) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), reapWait)
	defer cancel()
	for {
		trees := map[string]string{}
		agree := true
		for _, s := range sessions {
			trees[s.name] = treeShape(s.live, dir, s.shared)
			agree = agree && trees[s.name] == trees[sessions[0].name]
		}
		if agree {
			return nil
		}
		i := slices.IndexFunc(sessions, func(s *misuseSession) bool { return s.name == "zk" })
		if i < 0 || !treeChanged(ctx, sessions[i].live, dir) {
			return trees
		}
	}
}

// treeChanged waits for a change on st of dir or a good path below it, and
// reports whether one came before ctx ended.
func treeChanged(ctx context.Context, st store.Store, dir string) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg gosync.WaitGroup
	changed := make(chan bool, len(treePaths))
	for _, p := range treePaths {
		_, _, ev, err := st.ExistsW(wctx, dir+p)
		if err != nil {
			changed <- false
			break
		}
		wg.Go(func() { changed <- (<-ev).Err == nil })
	}
	ok := <-changed
	cancel() // the other watches fire with an error
	wg.Wait()
	return ok
}

// treePaths are dir and the good paths the calls draw, below dir.
var treePaths = []string{"", "/a", "/b", "/c", "/c/d"}

// treeShape is what a call left of the check's directory dir on st: for
// dir and each good path the calls draw, whether it is there and how many
// children it has (not counted below the paths in shared, whose children
// partition members change in the background). The stores must agree on
// it after every call: a node or directory that one store keeps and the
// others took away is left behind (the emptied directories go at once
// here, see backends.Eager), and a call that returns before its cleanup is
// done leaves the next call a different store.
func treeShape(st store.Store, dir string, shared map[string]bool) string {
	var b strings.Builder
	for _, q := range treePaths {
		p := dir + q
		ctx, cancel := context.WithTimeout(context.Background(), misuseCallTimeout)
		kids, err := st.Children(ctx, p)
		cancel()
		n := fmt.Sprint(len(kids))
		if shared[p] {
			n = "some"
		}
		fmt.Fprintf(&b, "%s: %s children, %s; ", p[len(dir):], n, classify(err))
	}
	return b.String()
}
