package sync_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/countstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// member is the marker in the names of a double barrier's participants.
const member = "member-"

// dbParty is a double barrier's participants, one session each, started one
// at a time in the order of their nodes.
type dbParty struct {
	t     *testing.T
	b     storetest.Backend
	path  string
	n     int
	sts   []*countstore.Store
	obs   store.Store // watches the barrier's nodes
	bs    []*sync.DoubleBarrier
	enter []chan error
	leave []chan error
}

func newParty(t *testing.T, b storetest.Backend, n, size int) *dbParty {
	p := &dbParty{t: t, b: b, path: bpath(t), n: n, sts: bcount(t, b, size), obs: bopen(t, b, 1)[0]}
	for _, st := range p.sts {
		p.bs = append(p.bs, sync.NewDoubleBarrier(st, p.path, n))
		p.enter = append(p.enter, make(chan error, 1))
		p.leave = append(p.leave, make(chan error, 1))
	}
	return p
}

// startEnter starts participant i's Enter and waits until its node is
// there, so that participants' nodes are in the order they were started.
func (p *dbParty) startEnter(ctx context.Context, i int, check func() error) {
	p.t.Helper()
	before := len(bkids(p.t, p.obs, p.path, member))
	go func() {
		err := p.bs[i].Enter(ctx)
		if err == nil && check != nil {
			err = check()
		}
		p.enter[i] <- err
	}()
	bwaitKids(p.t, p.obs, p.path, member, func(n int) bool { return n > before })
}

func (p *dbParty) startLeave(ctx context.Context, i int, check func() error) {
	go func() {
		err := p.bs[i].Leave(ctx)
		if err == nil && check != nil {
			err = check()
		}
		p.leave[i] <- err
	}()
}

// want checks that the calls of the participants in idx returned want.
func (p *dbParty) want(what string, chs []chan error, want error, idx ...int) {
	p.t.Helper()
	for _, i := range idx {
		err := bresult(p.t, chs[i], fmt.Sprintf("%s #%d", what, i))
		if !errors.Is(err, want) {
			p.t.Errorf("%s #%d = %v; want %v", what, i, err, want)
		}
	}
}

func (p *dbParty) pending(what string, chs []chan error, idx ...int) {
	p.t.Helper()
	for _, i := range idx {
		bpending(p.t, chs[i], fmt.Sprintf("%s #%d", what, i))
	}
}

// expire expires participant i's session.
func (p *dbParty) expire(i int) { p.b.Expire(p.t, p.sts[i].Unwrap()) }

// watching waits until participant i, having made calls ExistsW calls
// before, has made one more: it is waiting on a node.
func (p *dbParty) watching(i, calls int) {
	p.t.Helper()
	err := p.sts[i].Wait(bctx(p.t), func(c countstore.Counts) bool { return c.NodeWatches() > calls })
	if err != nil {
		p.t.Fatalf("participant #%d does not wait: %v", i, err)
	}
}

// members waits until the barrier has n member nodes.
func (p *dbParty) members(n int) {
	p.t.Helper()
	bwaitKids(p.t, p.obs, p.path, member, func(have int) bool { return have == n })
}

func TestDoubleBarrierTogether(t *testing.T) {
	const n = 4
	tests := []struct {
		name    string
		holdout int // the participant that leaves last
		others  int // member nodes left while it holds out
	}{
		{"lowest leaves last", 0, 1},
		{"middle leaves last", 1, 2},
		{"highest leaves last", n - 1, 2},
	}
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx, p := bctx(t), newParty(t, b, n, n)
				var arrived, left atomic.Int32
				early := func(c *atomic.Int32, what string) func() error {
					return func() error {
						if got := c.Load(); got < n {
							return fmt.Errorf("passed %s with %d of %d", what, got, n)
						}
						return nil
					}
				}
				for i := range n {
					if i == n-1 {
						p.pending("Enter", p.enter, 0, 1, 2)
					}
					arrived.Add(1)
					p.startEnter(ctx, i, early(&arrived, "Enter"))
				}
				p.want("Enter", p.enter, nil, 0, 1, 2, 3)

				for i := range n {
					if i != tt.holdout {
						left.Add(1)
						p.startLeave(ctx, i, early(&left, "Leave"))
					}
				}
				p.members(tt.others)
				for i := range n {
					if i != tt.holdout {
						p.pending("Leave", p.leave, i)
					}
				}
				left.Add(1)
				p.startLeave(ctx, tt.holdout, nil)
				p.want("Leave", p.leave, nil, 0, 1, 2, 3)
				p.members(0)
			})
		}
	})
}

func TestDoubleBarrierSessionExpires(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		t.Run("before release", func(t *testing.T) {
			// The dead participant no longer counts: the barrier waits
			// for a live third one.
			ctx, p := bctx(t), newParty(t, b, 3, 4)
			p.startEnter(ctx, 0, nil)
			p.startEnter(ctx, 1, nil)
			p.expire(1)
			// The store may report the node's deletion before the
			// session's end.
			if err := bresult(t, p.enter[1], "Enter #1"); !errors.Is(err, store.ErrSessionExpired) && !errors.Is(err, sync.ErrNodeDeleted) {
				t.Errorf("Enter #1 = %v; want %v or %v", err, store.ErrSessionExpired, sync.ErrNodeDeleted)
			}
			p.members(1)
			p.startEnter(ctx, 2, nil)
			p.pending("Enter", p.enter, 0, 2)
			p.startEnter(ctx, 3, nil)
			p.want("Enter", p.enter, nil, 0, 2, 3)
		})
		t.Run("inside", func(t *testing.T) {
			// The dead participant counts as having left.
			ctx, p := bctx(t), newParty(t, b, 3, 3)
			for i := range 3 {
				p.startEnter(ctx, i, nil)
			}
			p.want("Enter", p.enter, nil, 0, 1, 2)
			p.expire(2)
			p.startLeave(ctx, 0, nil)
			p.startLeave(ctx, 1, nil)
			p.want("Leave", p.leave, nil, 0, 1)
			p.members(0)
		})
		t.Run("highest while leaving", func(t *testing.T) {
			ctx, p := bctx(t), newParty(t, b, 3, 3)
			for i := range 3 {
				p.startEnter(ctx, i, nil)
			}
			p.want("Enter", p.enter, nil, 0, 1, 2)
			p.startLeave(ctx, 0, nil)
			p.startLeave(ctx, 1, nil)
			p.members(2) // the lowest waits for the highest
			p.pending("Leave", p.leave, 0, 1)
			p.expire(2)
			p.want("Leave", p.leave, nil, 0, 1)
			p.members(0)
		})
		t.Run("lowest while leaving", func(t *testing.T) {
			ctx, p := bctx(t), newParty(t, b, 3, 3)
			for i := range 3 {
				p.startEnter(ctx, i, nil)
			}
			p.want("Enter", p.enter, nil, 0, 1, 2)
			p.startLeave(ctx, 1, nil)
			p.startLeave(ctx, 2, nil)
			p.members(1) // the others wait for the lowest
			p.pending("Leave", p.leave, 1, 2)
			p.expire(0)
			p.want("Leave", p.leave, nil, 1, 2)
			p.members(0)
		})
	})
}

func TestDoubleBarrierRounds(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx, p := bctx(t), newParty(t, b, 2, 5)
		p.startEnter(ctx, 0, nil)
		p.startEnter(ctx, 1, nil)
		p.want("Enter", p.enter, nil, 0, 1)
		// The next round fills only once this one has left.
		p.startEnter(ctx, 2, nil)
		p.startEnter(ctx, 3, nil)
		p.startEnter(ctx, 4, nil)
		p.pending("Enter", p.enter, 2, 3, 4)
		p.startLeave(ctx, 0, nil)
		p.startLeave(ctx, 1, nil)
		p.want("Leave", p.leave, nil, 0, 1)
		p.want("Enter", p.enter, nil, 2, 3)
		p.pending("Enter", p.enter, 4)
		// A participant may enter again, into a later round.
		p.startLeave(ctx, 2, nil)
		p.startLeave(ctx, 3, nil)
		p.want("Leave", p.leave, nil, 2, 3)
		p.startEnter(ctx, 0, nil)
		p.want("Enter", p.enter, nil, 0, 4)
		p.startLeave(ctx, 0, nil)
		p.startLeave(ctx, 4, nil)
		p.want("Leave", p.leave, nil, 0, 4)
		p.members(0)
	})
}

func TestDoubleBarrierCancel(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		t.Run("Enter", func(t *testing.T) {
			ctx, p := bctx(t), newParty(t, b, 3, 4)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			p.startEnter(cctx, 0, nil)
			p.startEnter(ctx, 1, nil)
			cancel()
			p.want("cancelled Enter", p.enter, context.Canceled, 0)
			p.members(1) // no node left behind
			p.startEnter(ctx, 2, nil)
			p.pending("Enter", p.enter, 1, 2)
			p.startEnter(ctx, 3, nil)
			p.want("Enter", p.enter, nil, 1, 2, 3)
		})
		t.Run("Leave", func(t *testing.T) {
			ctx, p := bctx(t), newParty(t, b, 2, 2)
			p.startEnter(ctx, 0, nil)
			p.startEnter(ctx, 1, nil)
			p.want("Enter", p.enter, nil, 0, 1)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			calls := p.sts[0].Counts().NodeWatches()
			p.startLeave(cctx, 0, nil)
			p.watching(0, calls) // the lowest waits for the highest
			cancel()
			p.want("cancelled Leave", p.leave, context.Canceled, 0)
			p.members(1) // it counts as having left
			p.startLeave(ctx, 1, nil)
			p.want("Leave", p.leave, nil, 1)
			p.members(0)
		})
	})
}

// TestDoubleBarrierLimit: a limit under 1 is refused; a member with
// another limit than a member there is refused with ErrMismatch and leaves
// nothing; once every member has left, the limit goes with them and a new
// one is welcome.
func TestDoubleBarrierLimit(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := bopen(t, b, 1)[0]
		ctx := bctx(t)
		for _, n := range []int{0, -1} {
			if err := sync.NewDoubleBarrier(st, bpath(t), n).Enter(ctx); !errors.Is(err, sync.ErrInvalidLimit) {
				t.Errorf("Enter(n=%d) = %v; want %v", n, err, sync.ErrInvalidLimit)
			}
		}
		path := bpath(t)
		// Two members of a barrier of 2 are released together; a third
		// waits for the next round, and one with n=3 is refused.
		first, second := sync.NewDoubleBarrier(st, path, 2), sync.NewDoubleBarrier(st, path, 2)
		entered := backends.Async(func() error { return first.Enter(ctx) })
		if err := second.Enter(ctx); err != nil {
			t.Fatalf("Enter(n=2) = %v", err)
		}
		if err := <-entered; err != nil {
			t.Fatalf("Enter(n=2) = %v", err)
		}
		if err := sync.NewDoubleBarrier(st, path, 3).Enter(ctx); !errors.Is(err, sync.ErrMismatch) {
			t.Fatalf("Enter(n=3) beside members of 2 = %v; want %v", err, sync.ErrMismatch)
		}
		if kids := bkids(t, st, path, member); len(kids) != 2 {
			t.Errorf("after the refused Enter the barrier holds %q; want the two members", kids)
		}
		left := backends.Async(func() error { return first.Leave(ctx) })
		if err := second.Leave(ctx); err != nil {
			t.Fatalf("Leave = %v", err)
		}
		if err := <-left; err != nil {
			t.Fatalf("Leave = %v", err)
		}
		one := sync.NewDoubleBarrier(st, path, 1)
		if err := one.Enter(ctx); err != nil {
			t.Fatalf("Enter(n=1) once every member of 2 left = %v; want nil", err)
		}
		if err := one.Leave(ctx); err != nil {
			t.Fatalf("Leave = %v", err)
		}
	})
}

func TestDoubleBarrierMisuse(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := bopen(t, b, 1)[0]
		ctx := bctx(t)
		db := sync.NewDoubleBarrier(st, bpath(t), 1)
		steps := []struct {
			name string
			call func(context.Context) error
			want error
		}{
			{"Leave", db.Leave, sync.ErrNotEntered},
			{"Enter", db.Enter, nil},
			{"Enter", db.Enter, sync.ErrEntered},
			{"Leave", db.Leave, nil},
			{"Leave", db.Leave, sync.ErrNotEntered},
			{"Enter", db.Enter, nil},
			{"Leave", db.Leave, nil},
		}
		for i, s := range steps {
			if err := s.call(ctx); !errors.Is(err, s.want) || (err != nil) != (s.want != nil) {
				t.Fatalf("step %d: %s() = %v; want %v", i, s.name, err, s.want)
			}
		}
	})
}

// TestDoubleBarrierLeaveWakesOne checks the recipe's lowest/highest
// scheme: while members leave, each departure wakes at most one process
// (the lowest, when the highest goes), until the lowest itself goes last.
func TestDoubleBarrierLeaveWakesOne(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const n = 5
		ctx, p := bctx(t), newParty(t, b, n, n)
		for i := range n {
			p.startEnter(ctx, i, nil)
		}
		p.want("Enter", p.enter, nil, 0, 1, 2, 3, 4)
		// Members 1 and 2 leave and wait for the lowest; the lowest leaves
		// and waits for the highest.
		for _, i := range []int{1, 2} {
			calls := p.sts[i].Counts().NodeWatches()
			p.startLeave(ctx, i, nil)
			p.watching(i, calls)
		}
		calls := p.sts[0].Counts().NodeWatches()
		p.startLeave(ctx, 0, nil)
		p.watching(0, calls)
		p.members(3)
		for _, st := range p.sts {
			st.Reset()
		}
		// The highest goes: only the lowest wakes, and waits for the next
		// highest.
		p.startLeave(ctx, 4, nil)
		p.watching(0, 0)
		p.pending("Leave", p.leave, 0, 1, 2, 4)
		for i, st := range p.sts {
			if err := st.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// The lowest wakes once, or not at all when its watch on the
			// highest was set only after the highest had gone; nobody
			// else wakes.
			want := 0
			if i == 0 {
				want = 1
			}
			if got := st.Counts().Wakeups; got > want {
				t.Errorf("participant %d woken %d times by the highest's departure; want at most %d", i, got, want)
			}
		}
		p.startLeave(ctx, 3, nil)
		p.want("Leave", p.leave, nil, 0, 1, 2, 3, 4)
		p.members(0)
	})
}

// TestDoubleBarrierDisconnect checks that Enter and Leave ride out a lost
// connection while the session lives.
func TestDoubleBarrierDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d, ok := b.(storetest.Disconnector)
		if !ok {
			t.Skip("the backend cannot cut a connection")
		}
		ctx, p := bctx(t), newParty(t, b, 2, 2)
		calls := p.sts[0].Counts().NodeWatches()
		p.startEnter(ctx, 0, nil)
		p.watching(0, calls)
		d.Disconnect(t, p.sts[0].Unwrap())
		p.startEnter(ctx, 1, nil)
		d.Reconnect(t, p.sts[0].Unwrap())
		p.want("Enter", p.enter, nil, 0, 1)
		calls = p.sts[1].Counts().NodeWatches()
		p.startLeave(ctx, 1, nil)
		p.watching(1, calls) // waits for the lowest
		d.Disconnect(t, p.sts[1].Unwrap())
		p.startLeave(ctx, 0, nil)
		d.Reconnect(t, p.sts[1].Unwrap())
		p.want("Leave", p.leave, nil, 0, 1)
		p.members(0)
	})
}
