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

// dbTimeout bounds every wait of the double barrier state machine.
const dbTimeout = 10 * time.Second

// dbParticipants is the number of participants the machine drives.
const dbParticipants = 5

// dbParticipant is one session with one DoubleBarrier participant.
type dbParticipant struct {
	st *memstore.Store
	b  *sync.DoubleBarrier
	// While Enter or Leave is pending: its name, result and cancel.
	call   string
	result chan error
	cancel context.CancelFunc
}

// dbMachine drives DoubleBarrier participants on memstore beside a model
// of rounds: who waits to enter, in order; the members of the released
// round; who of them is inside, leaving, or gone; and whose node exists.
type dbMachine struct {
	srv  *memstore.Server
	path string
	n    int
	ps   [dbParticipants]*dbParticipant
	ctx  context.Context

	// The model.
	queue   []int // waiting in Enter, in the order they arrived
	round   []int // the released round's members, in order (-1: gone); nil when none
	inside  map[int]bool
	leaving map[int]bool
	present map[int]bool // the participant's node exists
}

func newDBMachine(ctx context.Context, n int) *dbMachine {
	dm := &dbMachine{
		srv: newServer(), path: "/proptest/doublebarrier", n: n, ctx: ctx,
		inside: map[int]bool{}, leaving: map[int]bool{}, present: map[int]bool{},
	}
	for i := range dm.ps {
		dm.open(i)
	}
	return dm
}

func (dm *dbMachine) open(i int) {
	st := dm.srv.Open()
	dm.ps[i] = &dbParticipant{st: st, b: sync.NewDoubleBarrier(st, dm.path, dm.n)}
}

// close ends every session and collects the pending calls.
func (dm *dbMachine) close(t *rapid.T) {
	for _, p := range dm.ps {
		_ = p.st.Close()
		if p.result != nil {
			select {
			case <-p.result:
			case <-time.After(dbTimeout):
				t.Errorf("a pending %s did not return after its session closed", p.call)
			}
			p.cancel()
		}
	}
}

func pickDB(t *rapid.T) int { return rapid.IntRange(0, dbParticipants-1).Draw(t, "i") }

func (dm *dbMachine) idle(i int) bool {
	return dm.ps[i].result == nil && !dm.inside[i]
}

// start runs call of participant i in the background.
func (dm *dbMachine) start(i int, call string, fn func(context.Context) error) {
	p := dm.ps[i]
	ctx, cancel := context.WithCancel(dm.ctx)
	p.call, p.result, p.cancel = call, make(chan error, 1), cancel
	go func() { p.result <- fn(ctx) }()
}

func (dm *dbMachine) enter(t *rapid.T) {
	i := pickDB(t)
	if !dm.idle(i) {
		t.Skip("busy")
	}
	dm.start(i, "Enter", dm.ps[i].b.Enter)
	dm.queue = append(dm.queue, i)
	dm.present[i] = true
	// The arrival order is the order of the nodes: wait for this one.
	dm.waitNodes(t)
	dm.settle(t)
}

func (dm *dbMachine) leave(t *rapid.T) {
	i := pickDB(t)
	if !dm.inside[i] || dm.ps[i].result != nil {
		t.Skip("not inside")
	}
	// The lowest present member keeps its node while it waits; any other
	// deletes its node first.
	lowest := -1
	for _, m := range dm.round {
		if dm.present[m] {
			lowest = m
			break
		}
	}
	dm.start(i, "Leave", dm.ps[i].b.Leave)
	delete(dm.inside, i)
	dm.leaving[i] = true
	if lowest != i {
		delete(dm.present, i)
	}
	dm.settle(t)
}

func (dm *dbMachine) cancelCall(t *rapid.T) {
	var pending []int
	for i, p := range dm.ps {
		if p.result != nil {
			pending = append(pending, i)
		}
	}
	if len(pending) == 0 {
		t.Skip("no call pending")
	}
	i := rapid.SampledFrom(pending).Draw(t, "pending")
	p := dm.ps[i]
	call := p.call
	p.cancel()
	if err := dm.wait(t, i); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled %s of %d = %v; want context.Canceled", call, i, err)
	}
	dm.gone(i)
	dm.settle(t)
}

func (dm *dbMachine) expire(t *rapid.T) {
	i := pickDB(t)
	p := dm.ps[i]
	p.st.Expire()
	if p.result != nil {
		call := p.call
		if err := dm.wait(t, i); !errors.Is(err, store.ErrSessionExpired) {
			t.Fatalf("pending %s of %d after expiry = %v; want ErrSessionExpired", call, i, err)
		}
	}
	dm.gone(i)
	dm.open(i)
	dm.settle(t)
}

// gone takes participant i out of the model: a waiter no longer counts, a
// member counts as having left.
func (dm *dbMachine) gone(i int) {
	dm.queue = slices.DeleteFunc(dm.queue, func(q int) bool { return q == i })
	for k, m := range dm.round {
		if m == i {
			dm.round[k] = -1 // a later session of i is another participant
		}
	}
	delete(dm.inside, i)
	delete(dm.leaving, i)
	delete(dm.present, i)
}

// settle makes the model's releases: a round whose members have all left
// or are leaving ends, and lets its leaving members go; then, with no
// round inside, the first n waiters enter together. It checks the real
// calls return as the model says.
func (dm *dbMachine) settle(t *rapid.T) {
	for {
		switch {
		case dm.round != nil && len(dm.inside) == 0:
			for _, m := range dm.round {
				if dm.leaving[m] {
					if err := dm.wait(t, m); err != nil {
						t.Fatalf("Leave of %d when all have left = %v; want nil", m, err)
					}
					delete(dm.leaving, m)
					delete(dm.present, m)
				}
			}
			dm.round = nil
		case dm.round == nil && len(dm.queue) >= dm.n:
			dm.round = slices.Clone(dm.queue[:dm.n])
			dm.queue = dm.queue[dm.n:]
			for _, m := range dm.round {
				if err := dm.wait(t, m); err != nil {
					t.Fatalf("Enter of %d with %d arrived = %v; want nil", m, dm.n, err)
				}
				dm.inside[m] = true
			}
		default:
			dm.waitNodes(t)
			return
		}
	}
}

// wait collects the result of participant i's pending call.
func (dm *dbMachine) wait(t *rapid.T, i int) error {
	p := dm.ps[i]
	select {
	case err := <-p.result:
		p.cancel()
		p.call, p.result, p.cancel = "", nil, nil
		return err
	case <-time.After(dbTimeout):
		t.Fatalf("pending %s of %d did not return; model: queue %v, round %v, inside %v, leaving %v",
			p.call, i, dm.queue, dm.round, dm.inside, dm.leaving)
		return nil
	}
}

// returned collects, for a failure message, the pending calls that have
// returned.
func (dm *dbMachine) returned() string {
	var out []string
	for i, p := range dm.ps {
		if p.result == nil {
			continue
		}
		select {
		case err := <-p.result:
			out = append(out, fmt.Sprintf("%s of %d = %v", p.call, i, err))
		default:
		}
	}
	return strings.Join(out, "; ")
}

func dbMembers(kids []store.Child) int {
	n := 0
	for _, k := range kids {
		if strings.Contains(k.Name, "member-") {
			n++
		}
	}
	return n
}

// waitNodes waits until the store holds exactly the model's member nodes.
func (dm *dbMachine) waitNodes(t *rapid.T) {
	waitChildren(t, dm.ctx, dm.srv, dm.path, dbTimeout,
		func(kids []store.Child) bool { return dbMembers(kids) == len(dm.present) },
		func() string { return fmt.Sprintf("present %v; returned calls: %s", dm.present, dm.returned()) })
}

// check holds after every step: no pending Enter or Leave has returned
// that the model says must still block (nobody passes Enter before n have
// arrived, nor Leave before all have left), and the store holds exactly
// the model's member nodes.
func (dm *dbMachine) check(t *rapid.T) {
	for i, p := range dm.ps {
		if p.result == nil {
			continue
		}
		select {
		case err := <-p.result:
			t.Fatalf("%s of %d returned %v; model: queue %v, round %v, inside %v, leaving %v",
				p.call, i, err, dm.queue, dm.round, dm.inside, dm.leaving)
		default:
		}
	}
	st := dm.srv.Open()
	defer st.Close()
	kids, err := st.Children(dm.ctx, dm.path)
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		t.Fatal(err)
	}
	if dbMembers(kids) != len(dm.present) {
		t.Fatalf("store has %s; model has present %v", fmt.Sprint(kids), dm.present)
	}
}

func TestDoubleBarrierStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		dm := newDBMachine(ctx, rapid.IntRange(1, 4).Draw(rt, "n"))
		defer dm.close(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"Enter":  dm.enter,
			"Leave":  dm.leave,
			"Cancel": dm.cancelCall,
			"Expire": dm.expire,
			"":       dm.check,
		})
	})
}
