package proptest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
)

// multiTimeout bounds every wait of the multi-lock state machine.
const multiTimeout = 10 * time.Second

// multiPaths are the locks the machine's contenders share.
var multiPaths = []string{"/proptest/multi/a", "/proptest/multi/b", "/proptest/multi/c", "/proptest/multi/d"}

// multiContender is one session locking a fixed set of the paths: with a
// MultiMutex, or with a plain Mutex when the set has one path.
type multiContender struct {
	set   []int // indexes into multiPaths, as the caller asked them
	st    *memstore.Store
	lock  func(context.Context) error
	try   func(context.Context) (bool, error)
	unl   func(context.Context) error
	held  func() context.Context
	token func(path string) int64
	// While waiting: the pending Lock's result and its cancel.
	result chan error
	cancel context.CancelFunc
}

// multiMachine drives MultiMutexes whose sets overlap, and a Mutex, beside a
// model of who holds and who waits. Which waiter gets the locks after a
// release is the recipe's business; the model checks what must hold
// whatever the order: no path has two holders, a holder holds all its paths
// or none, a cancelled or expired contender leaves no node, tokens grow, and
// waiters are never all stuck with nobody holding (no deadlock).
type multiMachine struct {
	srv *memstore.Server
	ctx context.Context
	cs  []*multiContender

	// The model.
	holding   map[int]bool
	waiting   map[int]bool
	lastToken map[string]int64
}

func newMultiMachine(t *rapid.T, ctx context.Context) *multiMachine {
	mm := &multiMachine{srv: newServer(), ctx: ctx, holding: map[int]bool{}, waiting: map[int]bool{}, lastToken: map[string]int64{}}
	n := rapid.IntRange(2, 4).Draw(t, "contenders")
	for i := range n {
		// Sets of one to three paths, asked in any order.
		set := rapid.SliceOfNDistinct(rapid.IntRange(0, len(multiPaths)-1), 1, 3, rapid.ID[int]).Draw(t, fmt.Sprintf("set%d", i))
		mm.cs = append(mm.cs, &multiContender{set: set})
		mm.open(i)
	}
	return mm
}

func (mm *multiMachine) open(i int) {
	c := mm.cs[i]
	c.st = mm.srv.Open()
	if len(c.set) == 1 {
		m := sync.NewMutex(c.st, multiPaths[c.set[0]])
		c.lock, c.try, c.unl, c.held = m.Lock, m.TryLock, m.Unlock, m.Context
		c.token = func(string) int64 { return m.Token() }
		return
	}
	var ps []string
	for _, j := range c.set {
		ps = append(ps, multiPaths[j])
	}
	m := sync.NewMultiMutex(c.st, ps)
	c.lock, c.try, c.unl, c.held, c.token = m.Lock, m.TryLock, m.Unlock, m.Context, m.Token
}

func (mm *multiMachine) pick(t *rapid.T) int { return rapid.IntRange(0, len(mm.cs)-1).Draw(t, "i") }

func (mm *multiMachine) idle(i int) bool { return !mm.holding[i] && !mm.waiting[i] }

// overlaps reports whether contender i's set shares a path with any of the
// contenders that satisfy who.
func (mm *multiMachine) overlaps(i int, who func(j int) bool) bool {
	for j, c := range mm.cs {
		if j != i && who(j) && slices.ContainsFunc(c.set, func(p int) bool { return slices.Contains(mm.cs[i].set, p) }) {
			return true
		}
	}
	return false
}

func (mm *multiMachine) lock(t *rapid.T) {
	i := mm.pick(t)
	if !mm.idle(i) {
		t.Skip("Lock would wait for itself")
	}
	c := mm.cs[i]
	ctx, cancel := context.WithCancel(mm.ctx)
	c.result, c.cancel = make(chan error, 1), cancel
	go func() { c.result <- c.lock(ctx) }()
	mm.waiting[i] = true
}

func (mm *multiMachine) tryLock(t *rapid.T) {
	i := mm.pick(t)
	if !mm.idle(i) {
		t.Skip("busy")
	}
	ok, err := mm.cs[i].try(mm.ctx)
	if err != nil {
		t.Fatalf("TryLock by %d = %v", i, err)
	}
	holders := func(j int) bool { return mm.holding[j] }
	anyone := func(j int) bool { return mm.holding[j] || mm.waiting[j] }
	switch {
	case ok && mm.overlaps(i, holders):
		t.Fatalf("TryLock by %d %v succeeded over a holder", i, mm.cs[i].set)
	case !ok && !mm.overlaps(i, anyone):
		t.Fatalf("TryLock by %d %v failed with nobody in its way", i, mm.cs[i].set)
	}
	if ok {
		mm.granted(t, i)
	}
}

func (mm *multiMachine) unlock(t *rapid.T) {
	i := mm.pick(t)
	if mm.waiting[i] {
		t.Skip("Unlock while its Lock is pending")
	}
	err := mm.cs[i].unl(mm.ctx)
	if !mm.holding[i] {
		if !errors.Is(err, sync.ErrNotLocked) {
			t.Fatalf("Unlock by non-holder %d = %v; want ErrNotLocked", i, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Unlock by holder %d = %v", i, err)
	}
	delete(mm.holding, i)
}

func (mm *multiMachine) cancelWaiter(t *rapid.T) {
	var ws []int
	for i := range mm.cs {
		if mm.waiting[i] {
			ws = append(ws, i)
		}
	}
	if len(ws) == 0 {
		t.Skip("nobody waits")
	}
	i := rapid.SampledFrom(ws).Draw(t, "waiter")
	c := mm.cs[i]
	c.cancel()
	err := mm.collect(t, i)
	switch {
	case err == nil:
		mm.granted(t, i) // granted just before the cancel
	case errors.Is(err, context.Canceled):
	default:
		t.Fatalf("cancelled Lock of %d = %v; want context.Canceled", i, err)
	}
}

func (mm *multiMachine) expire(t *rapid.T) {
	i := mm.pick(t)
	c := mm.cs[i]
	held := c.held()
	c.st.Expire()
	switch {
	case mm.holding[i]:
		select {
		case <-held.Done():
		case <-time.After(multiTimeout):
			t.Fatalf("holder %d's context not cancelled by expiry", i)
		}
		if cause := context.Cause(held); !errors.Is(cause, store.ErrSessionExpired) {
			t.Fatalf("holder %d's cause = %v; want ErrSessionExpired", i, cause)
		}
		if err := c.unl(mm.ctx); !errors.Is(err, sync.ErrLockLost) {
			t.Fatalf("Unlock after expiry = %v; want ErrLockLost", err)
		}
		delete(mm.holding, i)
	case mm.waiting[i]:
		if err := mm.collect(t, i); err == nil {
			t.Fatalf("Lock of %d succeeded after its session expired", i)
		} else if !errors.Is(err, store.ErrSessionExpired) {
			t.Fatalf("waiting Lock of %d after expiry = %v; want ErrSessionExpired", i, err)
		}
	}
	mm.open(i)
}

// collect waits for the result of c's pending Lock.
func (mm *multiMachine) collect(t *rapid.T, i int) error {
	c := mm.cs[i]
	select {
	case err := <-c.result:
		c.cancel()
		c.result, c.cancel = nil, nil
		delete(mm.waiting, i)
		return err
	case <-time.After(multiTimeout):
		t.Fatalf("pending Lock of %d did not return", i)
		return nil
	}
}

func (mm *multiMachine) granted(t *rapid.T, i int) {
	mm.holding[i] = true
	for _, j := range mm.cs[i].set {
		p := multiPaths[j]
		tok := mm.cs[i].token(p)
		if last, ok := mm.lastToken[p]; ok && tok <= last {
			t.Fatalf("token of %q granted to %d = %d; want > %d", p, i, tok, last)
		}
		mm.lastToken[p] = tok
	}
}

// settle waits until the system is at rest: every pending Lock has either
// returned (a grant, in the model) or is blocked behind a node in one of its
// directories. It returns the owners of the nodes of each directory, in
// order.
func (mm *multiMachine) settle(t *rapid.T) map[string][]int64 {
	obs := mm.srv.Open()
	defer obs.Close()
	deadline := time.NewTimer(multiTimeout)
	defer deadline.Stop()
	for {
		owners, cases, stop := mm.snapshot(t, obs)
		if cases == nil {
			stop()
			continue // changed while read: again
		}
		var who []int // the contender of each result case
		for i, c := range mm.cs {
			if mm.waiting[i] && !mm.blocked(i, owners) {
				who = append(who, i)
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.result)})
			}
		}
		if len(who) == 0 {
			stop()
			return owners
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)})
		chosen, v, _ := reflect.Select(cases)
		stop()
		switch k := chosen - (len(cases) - 1 - len(who)); {
		case chosen == len(cases)-1:
			t.Fatalf("no rest: holders %v, waiters %v, nodes %v", mm.holding, mm.waiting, owners)
		case k >= 0:
			i := who[k]
			mm.cs[i].cancel()
			mm.cs[i].result, mm.cs[i].cancel = nil, nil
			delete(mm.waiting, i)
			if !v.IsNil() {
				t.Fatalf("Lock of %d = %v", i, v.Interface())
			}
			mm.granted(t, i)
		}
	}
}

// snapshot lists the owners of the nodes of every directory, with a watch
// on each; cases is nil when a node went while it read them.
func (mm *multiMachine) snapshot(t *rapid.T, obs *memstore.Store) (map[string][]int64, []reflect.SelectCase, context.CancelFunc) {
	wctx, stop := context.WithCancel(mm.ctx)
	owners := map[string][]int64{}
	var cases []reflect.SelectCase
	for _, p := range multiPaths {
		kids, ev, err := obs.ChildrenW(wctx, p)
		if errors.Is(err, store.ErrNoNode) {
			var exists bool
			if exists, _, ev, err = obs.ExistsW(wctx, p); err == nil && exists {
				return nil, nil, stop
			}
		}
		if err != nil {
			stop()
			t.Fatalf("watching %q: %v", p, err)
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ev)})
		for _, k := range kids {
			n, err := obs.Get(mm.ctx, p+"/"+k.Name)
			if err != nil {
				return nil, nil, stop
			}
			owners[p] = append(owners[p], n.Owner)
		}
	}
	return owners, cases, stop
}

// blocked reports whether contender i has a node behind another in one of
// its directories: it waits there until something changes.
func (mm *multiMachine) blocked(i int, owners map[string][]int64) bool {
	id := mm.cs[i].st.SessionID()
	for _, j := range mm.cs[i].set {
		if k := slices.Index(owners[multiPaths[j]], id); k > 0 {
			return true
		}
	}
	return false
}

// check holds after every step.
func (mm *multiMachine) check(t *rapid.T) {
	owners := mm.settle(t)
	// Exclusion, all or nothing: a holder is first in each of its
	// directories, and holds its context.
	for i, c := range mm.cs {
		held := c.held().Err() == nil
		if held != mm.holding[i] {
			t.Fatalf("contender %d holds: %v; model: %v", i, held, mm.holding[i])
		}
		for _, j := range c.set {
			os := owners[multiPaths[j]]
			id := c.st.SessionID()
			switch {
			case mm.holding[i] && (len(os) == 0 || os[0] != id):
				t.Fatalf("holder %d is not first in %q: %v", i, multiPaths[j], os)
			case !mm.holding[i] && !mm.waiting[i] && slices.Contains(os, id):
				t.Fatalf("idle contender %d left a node in %q", i, multiPaths[j])
			}
		}
		for j := i + 1; j < len(mm.cs); j++ {
			if mm.holding[i] && mm.holding[j] && slices.ContainsFunc(c.set, func(p int) bool { return slices.Contains(mm.cs[j].set, p) }) {
				t.Fatalf("contenders %d %v and %d %v hold a path at once", i, c.set, j, mm.cs[j].set)
			}
		}
	}
	// No deadlock: at rest, someone waits only if someone holds.
	if len(mm.waiting) > 0 && len(mm.holding) == 0 {
		t.Fatalf("deadlock: waiters %v and no holder; nodes %v", mm.waiting, owners)
	}
}

// drain releases the holders until every waiter has been granted and
// released: liveness.
func (mm *multiMachine) drain(t *rapid.T) {
	for range 4 * len(mm.cs) {
		mm.settle(t)
		if len(mm.waiting) == 0 && len(mm.holding) == 0 {
			return
		}
		for i := range mm.cs {
			if mm.holding[i] {
				if err := mm.cs[i].unl(mm.ctx); err != nil {
					t.Fatalf("Unlock by %d = %v", i, err)
				}
				delete(mm.holding, i)
			}
		}
	}
	t.Fatalf("waiters %v never granted", mm.waiting)
}

func (mm *multiMachine) close() {
	for _, c := range mm.cs {
		_ = c.st.Close()
		if c.result != nil {
			<-c.result
			c.cancel()
		}
	}
}

func TestMultiMutexStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		mm := newMultiMachine(rt, ctx)
		defer mm.close()
		rt.Repeat(map[string]func(*rapid.T){
			"Lock":    mm.lock,
			"TryLock": mm.tryLock,
			"Unlock":  mm.unlock,
			"Cancel":  mm.cancelWaiter,
			"Expire":  mm.expire,
			"":        mm.check,
		})
		mm.drain(rt)
	})
}
