package proptest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/twophase"
)

// tpTimeout bounds every wait of the two-phase commit state machine.
const tpTimeout = 10 * time.Second

// tpParticipants is the number of participants of the machine's
// transaction.
const tpParticipants = 3

// tpState is a participant's state in the model.
type tpState int

const (
	tpAbsent tpState = iota // not joined (or its session ended before it voted)
	tpJoined
	tpCommit
	tpAbort
)

// tpParticipant is one participant, with the session it joined through.
type tpParticipant struct {
	name string
	st   *memstore.Store
	p    *twophase.Participant // nil until joined through st
}

// tpMachine drives one transaction, with a coordinator waiting for the
// decision all along, beside a model: each participant's state and the
// decision, which must be the first rule that applied and never change.
type tpMachine struct {
	srv   *memstore.Server
	ctx   context.Context
	path  string
	coord *memstore.Store
	c     *twophase.Coordinator
	wait  chan error // the coordinator's Wait
	ps    [tpParticipants]*tpParticipant

	// The model.
	state   [tpParticipants]tpState
	decided bool
	outcome error // nil for commit, an *AbortError
}

func newTPMachine(t *rapid.T, ctx context.Context) *tpMachine {
	m := &tpMachine{srv: newServer(), ctx: ctx, path: "/proptest/tx"}
	m.coord = m.srv.Open()
	var names []string
	for i := range m.ps {
		m.ps[i] = &tpParticipant{name: fmt.Sprintf("p%d", i), st: m.srv.Open()}
		names = append(names, m.ps[i].name)
	}
	c, err := twophase.Begin(ctx, m.coord, m.path, names, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("Begin = %v", err)
	}
	m.c, m.wait = c, make(chan error, 1)
	go func() { m.wait <- c.Wait(ctx) }()
	return m
}

func (m *tpMachine) close() {
	for _, p := range m.ps {
		_ = p.st.Close()
	}
	_ = m.coord.Close()
	<-m.wait
}

func (m *tpMachine) pick(t *rapid.T) int { return rapid.IntRange(0, tpParticipants-1).Draw(t, "i") }

// decide records the model's decision, if there is none yet.
func (m *tpMachine) decide(outcome error) {
	if !m.decided {
		m.decided, m.outcome = true, outcome
	}
}

func (m *tpMachine) join(t *rapid.T) {
	i := m.pick(t)
	p := m.ps[i]
	if p.p != nil {
		t.Skip("joined through this session already")
	}
	pt, err := twophase.Join(m.ctx, p.st, m.path, p.name)
	if err != nil {
		t.Fatalf("Join(%q) = %v", p.name, err)
	}
	p.p = pt
	if m.state[i] == tpAbsent {
		m.state[i] = tpJoined
	}
}

func (m *tpMachine) vote(t *rapid.T) {
	i := m.pick(t)
	p := m.ps[i]
	if p.p == nil {
		t.Skip("not joined")
	}
	commit := rapid.Bool().Draw(t, "commit")
	err := p.p.Vote(m.ctx, commit)
	if m.state[i] == tpCommit || m.state[i] == tpAbort {
		if !errors.Is(err, twophase.ErrVoted) {
			t.Fatalf("second Vote of %q = %v; want ErrVoted", p.name, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Vote(%q, %v) = %v", p.name, commit, err)
	}
	if !commit {
		m.state[i] = tpAbort
		m.decide(&twophase.AbortError{Reason: twophase.ReasonVote, Participant: p.name})
		return
	}
	m.state[i] = tpCommit
	all := true
	for _, s := range m.state {
		all = all && s == tpCommit
	}
	if all {
		m.decide(nil)
	}
}

func (m *tpMachine) expire(t *rapid.T) {
	i := m.pick(t)
	p := m.ps[i]
	p.st.Expire()
	if m.state[i] == tpJoined && p.p != nil {
		// Lost before its vote: the coordinator aborts.
		m.decide(&twophase.AbortError{Reason: twophase.ReasonLost, Participant: p.name})
		m.state[i] = tpAbsent
	}
	p.st, p.p = m.srv.Open(), nil
}

func (m *tpMachine) abort(t *rapid.T) {
	err := m.c.Abort(m.ctx)
	if m.decided && m.outcome == nil {
		if !errors.Is(err, twophase.ErrCommitted) {
			t.Fatalf("Abort after the commit = %v; want ErrCommitted", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Abort = %v", err)
	}
	m.decide(&twophase.AbortError{Reason: twophase.ReasonCoordinator})
}

// check holds after every step: the store's decision is the model's (once
// the coordinator had the time to make it), or there is none.
func (m *tpMachine) check(t *rapid.T) {
	obs := m.srv.Open()
	defer obs.Close()
	if !m.decided {
		n, err := obs.Get(m.ctx, m.path)
		if err != nil || n.Version != 0 {
			t.Fatalf("transaction decided (version %d, %v) with states %v", n.Version, err, m.state)
		}
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, tpTimeout)
	defer cancel()
	got := twophase.Await(ctx, obs, m.path)
	if !sameOutcome(got, m.outcome) {
		t.Fatalf("outcome = %v; model: %v (states %v)", got, m.outcome, m.state)
	}
	select {
	case err := <-m.wait:
		if !sameOutcome(err, m.outcome) {
			t.Fatalf("coordinator's Wait = %v; model: %v", err, m.outcome)
		}
		m.wait <- err // for the next check and close
	case <-ctx.Done():
		t.Fatalf("coordinator's Wait did not return after the decision %v", m.outcome)
	}
	for _, p := range m.ps {
		if p.p == nil {
			continue
		}
		if err := p.p.Wait(ctx); !sameOutcome(err, m.outcome) {
			t.Fatalf("%q's Wait = %v; model: %v", p.name, err, m.outcome)
		}
	}
}

func sameOutcome(got, want error) bool {
	if want == nil || got == nil {
		return got == want
	}
	var g, w *twophase.AbortError
	return errors.As(got, &g) && errors.As(want, &w) && *g == *w
}

func TestTwoPhaseStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		m := newTPMachine(rt, ctx)
		defer m.close()
		rt.Repeat(map[string]func(*rapid.T){
			"Join":   m.join,
			"Vote":   m.vote,
			"Expire": m.expire,
			"Abort":  m.abort,
			"":       m.check,
		})
	})
}
