package proptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
)

// mutexTimeout bounds every wait of the mutex state machine.
const mutexTimeout = 10 * time.Second

// mutexSessions is the number of contenders the machine drives.
const mutexSessions = 3

// mutexContender is one session with one Mutex on the machine's lock.
type mutexContender struct {
	st *memstore.Store
	m  *sync.Mutex
	// While waiting: the pending Lock's result and its cancel.
	result chan error
	cancel context.CancelFunc
}

// mutexMachine drives Mutex values on memstore beside a model: who holds
// the lock and who waits, in order.
type mutexMachine struct {
	srv  *memstore.Server
	path string
	cs   [mutexSessions]*mutexContender
	ctx  context.Context

	// The model.
	holder    int   // index of the holder, -1 when free
	waiters   []int // indexes of the waiters, in the order they queued
	lastToken int64
}

func newMutexMachine(ctx context.Context) *mutexMachine {
	mm := &mutexMachine{srv: newServer(), path: "/proptest/mutex", ctx: ctx, holder: -1, lastToken: -1}
	for i := range mm.cs {
		mm.open(i)
	}
	return mm
}

func (mm *mutexMachine) open(i int) {
	st := mm.srv.Open()
	mm.cs[i] = &mutexContender{st: st, m: sync.NewMutex(st, mm.path)}
}

// close ends every session and collects the pending Locks.
func (mm *mutexMachine) close(t *rapid.T) {
	for _, c := range mm.cs {
		_ = c.st.Close()
		if c.result != nil {
			select {
			case <-c.result:
			case <-time.After(mutexTimeout):
				t.Errorf("a pending Lock did not return after its session closed")
			}
			c.cancel()
		}
	}
}

func (mm *mutexMachine) waiting(i int) bool { return slices.Contains(mm.waiters, i) }

// pickContender draws the index of a mutexContender.
func pickContender(t *rapid.T) int { return rapid.IntRange(0, mutexSessions-1).Draw(t, "i") }

func (mm *mutexMachine) lock(t *rapid.T) {
	i := pickContender(t)
	c := mm.cs[i]
	if mm.holder == i || mm.waiting(i) {
		t.Skip("Lock would wait for itself")
	}
	if mm.holder < 0 {
		if err := c.m.Lock(mm.ctx); err != nil {
			t.Fatalf("Lock(free) = %v", err)
		}
		mm.granted(t, i)
		return
	}
	ctx, cancel := context.WithCancel(mm.ctx)
	c.result, c.cancel = make(chan error, 1), cancel
	go func() { c.result <- c.m.Lock(ctx) }()
	mm.waiters = append(mm.waiters, i)
	mm.waitNodes(t)
}

func (mm *mutexMachine) tryLock(t *rapid.T) {
	i := pickContender(t)
	ok, err := mm.cs[i].m.TryLock(mm.ctx)
	want := mm.holder < 0 // then nobody waits either
	if ok != want || err != nil {
		t.Fatalf("TryLock by %d (holder %d, waiters %v) = %v, %v; want %v, nil", i, mm.holder, mm.waiters, ok, err, want)
	}
	if ok {
		mm.granted(t, i)
	}
}

func (mm *mutexMachine) unlock(t *rapid.T) {
	i := pickContender(t)
	err := mm.cs[i].m.Unlock(mm.ctx)
	if mm.holder != i {
		if !errors.Is(err, sync.ErrNotLocked) {
			t.Fatalf("Unlock by non-holder %d = %v; want ErrNotLocked", i, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Unlock by holder %d = %v", i, err)
	}
	mm.holder = -1
	mm.next(t)
}

func (mm *mutexMachine) cancelWaiter(t *rapid.T) {
	if len(mm.waiters) == 0 {
		t.Skip("nobody waits")
	}
	k := rapid.IntRange(0, len(mm.waiters)-1).Draw(t, "waiter")
	i := mm.waiters[k]
	c := mm.cs[i]
	c.cancel()
	if err := mm.wait(t, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock of %d = %v; want context.Canceled", i, err)
	}
	mm.waiters = slices.Delete(mm.waiters, k, k+1)
	mm.waitNodes(t)
}

func (mm *mutexMachine) expire(t *rapid.T) {
	i := pickContender(t)
	c := mm.cs[i]
	held := c.m.Context()
	c.st.Expire()
	switch {
	case mm.holder == i:
		select {
		case <-held.Done():
		case <-time.After(mutexTimeout):
			t.Fatalf("holder %d's context not cancelled by expiry", i)
		}
		if cause := context.Cause(held); !errors.Is(cause, store.ErrSessionExpired) {
			t.Fatalf("holder %d's cause = %v; want ErrSessionExpired", i, cause)
		}
		if err := c.m.Unlock(mm.ctx); !errors.Is(err, sync.ErrLockLost) {
			t.Fatalf("Unlock after expiry = %v; want ErrLockLost", err)
		}
		mm.holder = -1
		mm.next(t)
	case mm.waiting(i):
		if err := mm.wait(t, c); !errors.Is(err, store.ErrSessionExpired) {
			t.Fatalf("waiting Lock of %d after expiry = %v; want ErrSessionExpired", i, err)
		}
		mm.waiters = slices.DeleteFunc(mm.waiters, func(w int) bool { return w == i })
	}
	mm.open(i)
	mm.waitNodes(t)
}

// next hands the free lock to the first waiter, as the real one must.
func (mm *mutexMachine) next(t *rapid.T) {
	if len(mm.waiters) == 0 {
		return
	}
	i := mm.waiters[0]
	mm.waiters = mm.waiters[1:]
	if err := mm.wait(t, mm.cs[i]); err != nil {
		t.Fatalf("first waiter %d: Lock = %v; want nil", i, err)
	}
	mm.granted(t, i)
}

func (mm *mutexMachine) granted(t *rapid.T, i int) {
	mm.holder = i
	tok := mm.cs[i].m.Token()
	if tok <= mm.lastToken {
		t.Fatalf("token of grant to %d = %d; want > %d", i, tok, mm.lastToken)
	}
	mm.lastToken = tok
}

// wait collects the result of c's pending Lock.
func (mm *mutexMachine) wait(t *rapid.T, c *mutexContender) error {
	select {
	case err := <-c.result:
		c.cancel()
		c.result, c.cancel = nil, nil
		return err
	case <-time.After(mutexTimeout):
		t.Fatalf("pending Lock did not return")
		return nil
	}
}

// nodes returns the number of mutexContender nodes the model expects.
func (mm *mutexMachine) nodes() int {
	n := len(mm.waiters)
	if mm.holder >= 0 {
		n++
	}
	return n
}

// waitNodes waits until the store holds exactly the model's nodes.
func (mm *mutexMachine) waitNodes(t *rapid.T) {
	waitChildren(t, mm.ctx, mm.srv, mm.path, mutexTimeout,
		func(kids []store.Child) bool { return len(kids) == mm.nodes() },
		func() string { return fmt.Sprintf("holder %d and waiters %v", mm.holder, mm.waiters) })
}

// check holds after every step: exactly the model's holder holds, and the
// store has exactly the model's nodes.
func (mm *mutexMachine) check(t *rapid.T) {
	for i, c := range mm.cs {
		held := c.m.Context().Err() == nil
		if held != (mm.holder == i) {
			t.Fatalf("mutexContender %d holds: %v; model holder: %d", i, held, mm.holder)
		}
	}
	st := mm.srv.Open()
	defer st.Close()
	kids, err := st.Children(mm.ctx, mm.path)
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		t.Fatal(err)
	}
	if len(kids) != mm.nodes() {
		t.Fatalf("store has %s; model has holder %d and waiters %v", fmt.Sprint(kids), mm.holder, mm.waiters)
	}
}

func TestMutexStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		mm := newMutexMachine(ctx)
		defer mm.close(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"Lock":    mm.lock,
			"TryLock": mm.tryLock,
			"Unlock":  mm.unlock,
			"Cancel":  mm.cancelWaiter,
			"Expire":  mm.expire,
			"":        mm.check,
		})
	})
}
