package proptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// electTimeout bounds every wait of the election state machine.
const electTimeout = 10 * time.Second

// electCandidates is the number of candidates the machine drives, each on a
// session of its own.
const electCandidates = 4

// electResult is what a background Campaign returns, with the other
// candidates whose leadership was still live at the moment it returned.
type electResult struct {
	l    *election.Leadership
	err  error
	live []int
}

// electCandidate is one session with at most one campaign.
type electCandidate struct {
	st *memstore.Store
	e  *election.Election
	// While waiting: the pending campaign's result and its cancel.
	result chan electResult
	cancel context.CancelFunc
	// While leading (and after, until the next campaign): the term.
	term atomic.Pointer[election.Leadership]
}

// electMachine drives candidates and an observer on memstore beside a
// model: the queue of candidates in the order they campaigned, whose first
// leads, and the leader's value.
type electMachine struct {
	srv  *memstore.Server
	path string
	cs   [electCandidates]*electCandidate
	ctx  context.Context

	observer *memstore.Store
	observed <-chan election.Leader
	seen     election.Leader // the observer's last report
	seenAny  bool

	// The model.
	queue     []int // candidates with a node, in order; queue[0] leads
	value     string
	lastToken int64
	tokenSet  bool
}

func newElectMachine(ctx context.Context) *electMachine {
	em := &electMachine{srv: newServer(), path: "/proptest/election", ctx: ctx}
	for i := range em.cs {
		em.cs[i] = &electCandidate{}
		em.open(i)
	}
	em.observer = em.srv.Open()
	em.observed = election.New(em.observer, em.path).Observe(ctx).Leaders()
	return em
}

func (em *electMachine) open(i int) {
	c := em.cs[i]
	c.st = em.srv.Open()
	c.e = election.New(c.st, em.path)
}

// close ends every session and collects the pending campaigns.
func (em *electMachine) close(t *rapid.T) {
	for _, c := range em.cs {
		_ = c.st.Close()
		if c.result != nil {
			em.collect(t, c)
		}
	}
	_ = em.observer.Close()
	for range em.observed {
	}
}

func (em *electMachine) leader() int {
	if len(em.queue) == 0 {
		return -1
	}
	return em.queue[0]
}

func pickCandidate(t *rapid.T) int {
	return rapid.IntRange(0, electCandidates-1).Draw(t, "candidate")
}

func (em *electMachine) campaign(t *rapid.T) {
	i := pickCandidate(t)
	c := em.cs[i]
	if slices.Contains(em.queue, i) {
		t.Skip("already a candidate")
	}
	value := fmt.Sprintf("c%d-%d", i, rapid.IntRange(0, 9).Draw(t, "value"))
	ctx, cancel := context.WithCancel(em.ctx)
	c.result, c.cancel = make(chan electResult, 1), cancel
	go func() {
		l, err := c.e.Campaign(ctx, []byte(value))
		r := electResult{l: l, err: err}
		if err == nil {
			// Who else still leads at the moment this one is told?
			for j, o := range em.cs {
				if o != c && o.term.Load() != nil && o.term.Load().Context().Err() == nil {
					r.live = append(r.live, j)
				}
			}
			c.term.Store(l)
		}
		c.result <- r
	}()
	em.queue = append(em.queue, i)
	if len(em.queue) == 1 {
		em.value = value
		em.elected(t, true)
	}
	em.waitNodes(t)
}

// elected collects the campaign of the model's new leader, which must win.
// When strict, the old leader must have known it lost before the new one was
// told; not when a third party deleted its node, since both learn that from
// the same change.
func (em *electMachine) elected(t *rapid.T, strict bool) {
	i := em.leader()
	r := em.collect(t, em.cs[i])
	if r.err != nil {
		t.Fatalf("candidate %d: Campaign = %v; want leadership", i, r.err)
	}
	if strict && len(r.live) > 0 {
		t.Fatalf("candidate %d told it leads while %v still lead", i, r.live)
	}
	if tok := r.l.Token(); em.tokenSet && tok <= em.lastToken {
		t.Fatalf("candidate %d elected with token %d after %d", i, tok, em.lastToken)
	}
	em.lastToken, em.tokenSet = r.l.Token(), true
	em.value = string(r.l.Value())
}

// next makes the first waiter lead after the leader left.
func (em *electMachine) next(t *rapid.T, strict bool) {
	em.queue = em.queue[1:]
	if len(em.queue) > 0 {
		em.elected(t, strict)
	}
}

// collect receives the result of c's pending campaign.
func (em *electMachine) collect(t *rapid.T, c *electCandidate) electResult {
	select {
	case r := <-c.result:
		c.cancel()
		c.result, c.cancel = nil, nil
		return r
	case <-time.After(electTimeout):
		t.Fatalf("pending Campaign did not return")
		return electResult{}
	}
}

func (em *electMachine) term(t *rapid.T) (int, *election.Leadership) {
	i := em.leader()
	if i < 0 {
		t.Skip("nobody leads")
	}
	return i, em.cs[i].term.Load()
}

// lost checks that the leadership l has ended with cause want.
func lost(t *rapid.T, what string, l *election.Leadership, want error) {
	select {
	case <-l.Done():
	case <-time.After(electTimeout):
		t.Fatalf("%s: Done still open", what)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, want) {
		t.Fatalf("%s: cause = %v; want %v", what, cause, want)
	}
}

func (em *electMachine) resign(t *rapid.T) {
	i, l := em.term(t)
	if err := l.Resign(em.ctx); err != nil {
		t.Fatalf("Resign by %d = %v", i, err)
	}
	lost(t, "resigned", l, election.ErrResigned)
	em.next(t, true)
}

func (em *electMachine) proclaim(t *rapid.T) {
	i, l := em.term(t)
	value := fmt.Sprintf("c%d-p%d", i, rapid.IntRange(0, 9).Draw(t, "value"))
	if err := l.Proclaim(em.ctx, []byte(value)); err != nil {
		t.Fatalf("Proclaim by %d = %v", i, err)
	}
	em.value = value
}

func (em *electMachine) cancelWaiter(t *rapid.T) {
	if len(em.queue) < 2 {
		t.Skip("nobody waits")
	}
	k := rapid.IntRange(1, len(em.queue)-1).Draw(t, "waiter")
	c := em.cs[em.queue[k]]
	c.cancel()
	if r := em.collect(t, c); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Campaign of %d = %v, %v; want context.Canceled", em.queue[k], r.l, r.err)
	}
	em.queue = slices.Delete(em.queue, k, k+1)
	em.waitNodes(t)
}

func (em *electMachine) expire(t *rapid.T) {
	i := pickCandidate(t)
	c := em.cs[i]
	k := slices.Index(em.queue, i)
	c.st.Expire()
	switch {
	case k == 0:
		lost(t, "expired leader", c.term.Load(), store.ErrSessionExpired)
		em.next(t, true)
	case k > 0:
		if r := em.collect(t, c); !errors.Is(r.err, store.ErrSessionExpired) {
			t.Fatalf("Campaign of %d after expiry = %v, %v; want ErrSessionExpired", i, r.l, r.err)
		}
		em.queue = slices.Delete(em.queue, k, k+1)
	}
	em.open(i)
	em.waitNodes(t)
}

// deleteNode has someone else delete the leader's node.
func (em *electMachine) deleteNode(t *rapid.T) {
	i, l := em.term(t)
	st := em.srv.Open()
	defer st.Close()
	if err := st.Delete(em.ctx, l.Path()); err != nil {
		t.Fatalf("Delete(%q) = %v", l.Path(), err)
	}
	lost(t, fmt.Sprintf("leader %d whose node was deleted", i), l, election.ErrNodeDeleted)
	if err := l.Resign(em.ctx); err != nil {
		t.Fatalf("Resign after deletion = %v; want nil", err)
	}
	em.next(t, false)
}

// disconnect cuts the leader's connection: it stops leading at once, but
// nobody else leads until it is back and resigns.
func (em *electMachine) disconnect(t *rapid.T) {
	i, l := em.term(t)
	c := em.cs[i]
	c.st.Disconnect()
	lost(t, "disconnected leader", l, election.ErrDisconnected)
	for _, w := range em.queue[1:] {
		select {
		case r := <-em.cs[w].result:
			t.Fatalf("candidate %d: Campaign = %v, %v while the old leader's node is still there", w, r.l, r.err)
		default:
		}
	}
	c.st.Reconnect()
	if err := l.Resign(em.ctx); err != nil {
		t.Fatalf("Resign after reconnection = %v", err)
	}
	em.next(t, true)
}

// waitNodes waits until the store holds exactly the model's nodes.
func (em *electMachine) waitNodes(t *rapid.T) {
	waitChildren(t, em.ctx, em.srv, em.path, electTimeout,
		func(kids []store.Child) bool { return len(kids) == len(em.queue) },
		func() string { return fmt.Sprint(em.queue) })
}

// check holds after every step: exactly the model's leader leads, the store
// has the model's nodes and leader, and the observer reports it, having
// seen the leaders in order.
func (em *electMachine) check(t *rapid.T) {
	lead := em.leader()
	for i, c := range em.cs {
		l := c.term.Load()
		live := l != nil && l.Context().Err() == nil
		if live != (i == lead) {
			t.Fatalf("candidate %d leads: %v; model leader: %d", i, live, lead)
		}
	}
	st := em.srv.Open()
	defer st.Close()
	kids, err := st.Children(em.ctx, em.path)
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		t.Fatal(err)
	}
	if len(kids) != len(em.queue) {
		t.Fatalf("store has %v; model has %v", kids, em.queue)
	}
	want := election.Leader{}
	if lead >= 0 {
		l := em.cs[lead].term.Load()
		want = election.Leader{Path: l.Path(), Token: l.Token(), Value: []byte(em.value)}
	}
	got, err := election.New(st, em.path).Leader(em.ctx)
	if lead < 0 && !errors.Is(err, election.ErrNoLeader) || lead >= 0 && (err != nil || !sameLeader(got, want)) {
		t.Fatalf("Leader() = %v, %v; want %v", got, err, want)
	}
	em.observe(t, want)
}

// observe receives the observer's reports until it reports want. Reports
// come in order: a token never goes back, and a leader once replaced never
// comes back.
func (em *electMachine) observe(t *rapid.T, want election.Leader) {
	deadline := time.After(electTimeout)
	for !em.seenAny || !sameLeader(em.seen, want) {
		select {
		case l, ok := <-em.observed:
			if !ok {
				t.Fatalf("observer stopped")
			}
			if em.seenAny && !l.IsZero() && !em.seen.IsZero() && l.Token < em.seen.Token {
				t.Fatalf("observer saw %v after %v", l, em.seen)
			}
			em.seen, em.seenAny = l, true
		case <-deadline:
			t.Fatalf("observer reports %v; want %v", em.seen, want)
		}
	}
}

func sameLeader(a, b election.Leader) bool {
	return a.Path == b.Path && a.Token == b.Token && string(a.Value) == string(b.Value)
}

func TestElectionStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		em := newElectMachine(ctx)
		defer em.close(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"Campaign":   em.campaign,
			"Resign":     em.resign,
			"Proclaim":   em.proclaim,
			"Cancel":     em.cancelWaiter,
			"Expire":     em.expire,
			"DeleteNode": em.deleteNode,
			"Disconnect": em.disconnect,
			"":           em.check,
		})
	})
}
