package proptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
)

// semTimeout bounds every wait of the semaphore state machine.
const semTimeout = 10 * time.Second

// semSessions is the number of participants the machine drives.
const semSessions = 5

// semParticipant is one session with one Semaphore, holding at most one
// lease.
type semParticipant struct {
	st    *memstore.Store
	s     *sync.Semaphore
	lease *sync.Lease // while it holds
	// While waiting: the pending Acquire's result and its cancel.
	result chan semOutcome
	cancel context.CancelFunc
}

type semOutcome struct {
	l   *sync.Lease
	err error
}

// semMachine drives Semaphore values on memstore beside a model: who holds
// a lease, and who waits, in order.
type semMachine struct {
	srv  *memstore.Server
	path string
	n    int
	ps   [semSessions]*semParticipant
	ctx  context.Context

	// The model.
	holders []int
	waiters []int // in the order they queued
}

func newSemMachine(ctx context.Context, n int) *semMachine {
	sm := &semMachine{srv: newServer(), path: "/proptest/semaphore", n: n, ctx: ctx}
	for i := range sm.ps {
		sm.open(i)
	}
	return sm
}

func (sm *semMachine) open(i int) {
	st := sm.srv.Open()
	sm.ps[i] = &semParticipant{st: st, s: sync.NewSemaphore(st, sm.path, sm.n)}
}

// close ends every session and collects the pending Acquires.
func (sm *semMachine) close(t *rapid.T) {
	for _, p := range sm.ps {
		_ = p.st.Close()
		if p.result != nil {
			select {
			case <-p.result:
			case <-time.After(semTimeout):
				t.Errorf("a pending Acquire did not return after its session closed")
			}
			p.cancel()
		}
	}
}

func pickParticipant(t *rapid.T) int { return rapid.IntRange(0, semSessions-1).Draw(t, "i") }

func (sm *semMachine) busy(i int) bool {
	return slices.Contains(sm.holders, i) || slices.Contains(sm.waiters, i)
}

func (sm *semMachine) acquire(t *rapid.T) {
	i := pickParticipant(t)
	if sm.busy(i) {
		t.Skip("one lease per participant")
	}
	p := sm.ps[i]
	if len(sm.holders) < sm.n {
		l, err := p.s.Acquire(sm.ctx)
		if err != nil {
			t.Fatalf("Acquire with %d of %d held = %v", len(sm.holders), sm.n, err)
		}
		sm.granted(i, l)
		return
	}
	ctx, cancel := context.WithCancel(sm.ctx)
	p.result, p.cancel = make(chan semOutcome, 1), cancel
	go func() {
		l, err := p.s.Acquire(ctx)
		p.result <- semOutcome{l, err}
	}()
	sm.waiters = append(sm.waiters, i)
	sm.waitNodes(t)
}

func (sm *semMachine) tryAcquire(t *rapid.T) {
	i := pickParticipant(t)
	if sm.busy(i) {
		t.Skip("one lease per participant")
	}
	l, ok, err := sm.ps[i].s.TryAcquire(sm.ctx)
	want := len(sm.holders) < sm.n // then nobody waits either
	if ok != want || err != nil || (l != nil) != ok {
		t.Fatalf("TryAcquire with holders %v of %d = %v, %v, %v; want %v", sm.holders, sm.n, l, ok, err, want)
	}
	if ok {
		sm.granted(i, l)
	}
	sm.waitNodes(t)
}

func (sm *semMachine) release(t *rapid.T) {
	if len(sm.holders) == 0 {
		t.Skip("nobody holds")
	}
	k := rapid.IntRange(0, len(sm.holders)-1).Draw(t, "holder")
	i := sm.holders[k]
	p := sm.ps[i]
	if err := p.lease.Release(sm.ctx); err != nil {
		t.Fatalf("Release by %d = %v", i, err)
	}
	if err := p.lease.Release(sm.ctx); !errors.Is(err, sync.ErrUnlocked) {
		t.Fatalf("second Release by %d = %v; want ErrUnlocked", i, err)
	}
	p.lease = nil
	sm.holders = slices.Delete(sm.holders, k, k+1)
	sm.next(t)
}

func (sm *semMachine) cancelWaiter(t *rapid.T) {
	if len(sm.waiters) == 0 {
		t.Skip("nobody waits")
	}
	k := rapid.IntRange(0, len(sm.waiters)-1).Draw(t, "waiter")
	i := sm.waiters[k]
	p := sm.ps[i]
	p.cancel()
	if o := sm.wait(t, p); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled Acquire of %d = %v, %v; want context.Canceled", i, o.l, o.err)
	}
	sm.waiters = slices.Delete(sm.waiters, k, k+1)
	sm.waitNodes(t)
}

func (sm *semMachine) expire(t *rapid.T) {
	i := pickParticipant(t)
	p := sm.ps[i]
	p.st.Expire()
	switch {
	case slices.Contains(sm.holders, i):
		held := p.lease.Context()
		select {
		case <-held.Done():
		case <-time.After(semTimeout):
			t.Fatalf("holder %d's lease not lost on expiry", i)
		}
		if cause := context.Cause(held); !errors.Is(cause, store.ErrSessionExpired) {
			t.Fatalf("holder %d's cause = %v; want ErrSessionExpired", i, cause)
		}
		if err := p.lease.Release(sm.ctx); !errors.Is(err, sync.ErrLockLost) {
			t.Fatalf("Release after expiry = %v; want ErrLockLost", err)
		}
		sm.holders = slices.DeleteFunc(sm.holders, func(h int) bool { return h == i })
		sm.next(t)
	case slices.Contains(sm.waiters, i):
		if o := sm.wait(t, p); !errors.Is(o.err, store.ErrSessionExpired) {
			t.Fatalf("waiting Acquire of %d after expiry = %v, %v; want ErrSessionExpired", i, o.l, o.err)
		}
		sm.waiters = slices.DeleteFunc(sm.waiters, func(w int) bool { return w == i })
	}
	sm.open(i)
	sm.waitNodes(t)
}

// next hands a free lease to the first waiter, as the real one must.
func (sm *semMachine) next(t *rapid.T) {
	if len(sm.waiters) == 0 || len(sm.holders) >= sm.n {
		sm.waitNodes(t)
		return
	}
	i := sm.waiters[0]
	sm.waiters = sm.waiters[1:]
	o := sm.wait(t, sm.ps[i])
	if o.err != nil {
		t.Fatalf("first waiter %d: Acquire = %v; want a lease", i, o.err)
	}
	sm.granted(i, o.l)
	sm.waitNodes(t)
}

func (sm *semMachine) granted(i int, l *sync.Lease) {
	sm.ps[i].lease = l
	sm.holders = append(sm.holders, i)
}

// wait collects the result of p's pending Acquire.
func (sm *semMachine) wait(t *rapid.T, p *semParticipant) semOutcome {
	select {
	case o := <-p.result:
		p.cancel()
		p.result, p.cancel = nil, nil
		return o
	case <-time.After(semTimeout):
		t.Fatalf("pending Acquire did not return")
		return semOutcome{}
	}
}

// leases returns the lease nodes in the store.
func (sm *semMachine) leases(kids []store.Child) int {
	n := 0
	for _, k := range kids {
		if strings.Contains(k.Name, "lease-") {
			n++
		}
	}
	return n
}

// waitNodes waits until the store holds exactly the model's lease nodes.
func (sm *semMachine) waitNodes(t *rapid.T) {
	want := len(sm.holders) + len(sm.waiters)
	waitChildren(t, sm.ctx, sm.srv, sm.path, semTimeout,
		func(kids []store.Child) bool { return sm.leases(kids) == want },
		func() string { return fmt.Sprintf("holders %v and waiters %v", sm.holders, sm.waiters) })
}

// check holds after every step: never more than n holders, every model
// holder's lease live, no waiter returned early, and exactly the model's
// nodes in the store.
func (sm *semMachine) check(t *rapid.T) {
	if len(sm.holders) > sm.n {
		t.Fatalf("model has %d holders of %d", len(sm.holders), sm.n)
	}
	for i, p := range sm.ps {
		holds := slices.Contains(sm.holders, i)
		if holds && p.lease.Context().Err() != nil {
			t.Fatalf("holder %d's lease ended: %v", i, context.Cause(p.lease.Context()))
		}
		if p.result != nil {
			select {
			case o := <-p.result:
				t.Fatalf("waiter %d's Acquire returned %v, %v; the model has holders %v and waiters %v", i, o.l, o.err, sm.holders, sm.waiters)
			default:
			}
		}
	}
	st := sm.srv.Open()
	defer st.Close()
	kids, err := st.Children(sm.ctx, sm.path)
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		t.Fatal(err)
	}
	if got, want := sm.leases(kids), len(sm.holders)+len(sm.waiters); got != want {
		t.Fatalf("store has %s; model has holders %v and waiters %v", fmt.Sprint(kids), sm.holders, sm.waiters)
	}
}

func TestSemaphoreStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		sm := newSemMachine(ctx, rapid.IntRange(1, 3).Draw(rt, "n"))
		defer sm.close(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"Acquire":    sm.acquire,
			"TryAcquire": sm.tryAcquire,
			"Release":    sm.release,
			"Cancel":     sm.cancelWaiter,
			"Expire":     sm.expire,
			"":           sm.check,
		})
	})
}
