package shared_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
)

// propTimeout bounds every wait of the guarded-write machine.
const propTimeout = 10 * time.Second

// propSessions is the number of sessions the machine drives: each holds
// the lock in turn and writes, under its own hold or another's (a stale
// one), through its own session or another's.
const propSessions = 3

// propSession is one session of the machine and what it holds.
type propSession struct {
	st *memstore.Store
	// node is the guard of the hold this session's node makes, zero when
	// it holds nothing; last is the guard of its latest hold, held or not.
	node, last store.Guard
	frozen     bool
	// ended: the server ended the session (the client learns on Thaw).
	ended bool
	// pending is the result of a write blocked by the freeze, with what
	// it was meant to write.
	pending *pendingWrite
}

type pendingWrite struct {
	result chan error
	guard  store.Guard
	data   string
	cas    bool
	ver    int64
}

// guardMachine drives guarded writes of one value on memstore beside a
// model of which hold nodes exist at the server, with sessions expiring
// and frozen as paused processes are: a write must be applied exactly when
// its hold's node exists when the server applies it.
type guardMachine struct {
	srv      *memstore.Server
	ctx      context.Context
	ss       [propSessions]*propSession
	observer *memstore.Store
	writes   int

	// The model: the nodes that exist (by path), and the value.
	exists  map[store.Guard]bool
	data    string
	version int64
}

const (
	propLock  = "/prop/lock"
	propValue = "/prop/value"
)

func newGuardMachine(ctx context.Context) *guardMachine {
	m := &guardMachine{
		srv:     memstore.NewServer(memstore.WithExpiryMargin(0), memstore.WithSessionTimeout(time.Hour)),
		ctx:     ctx,
		exists:  map[store.Guard]bool{},
		version: shared.NoVersion,
	}
	m.observer = m.srv.Open()
	for i := range m.ss {
		m.ss[i] = &propSession{st: m.srv.Open()}
	}
	return m
}

func (m *guardMachine) close(t *rapid.T) {
	for _, s := range m.ss {
		_ = s.st.Close() // thaws it
		if s.pending != nil {
			select {
			case <-s.pending.result:
			case <-time.After(propTimeout):
				t.Errorf("a pending write did not return after its session closed")
			}
		}
	}
	_ = m.observer.Close()
}

// pick draws the index of a session for which ok holds, or skips.
func (m *guardMachine) pick(t *rapid.T, label string, ok func(*propSession) bool) int {
	var is []int
	for i, s := range m.ss {
		if ok(s) {
			is = append(is, i)
		}
	}
	if len(is) == 0 {
		t.Skip("no session for " + label)
	}
	return rapid.SampledFrom(is).Draw(t, label)
}

func (s *propSession) acts() bool { return !s.frozen && !s.ended }

// holder returns the index of the session whose hold node exists, or -1.
func (m *guardMachine) holder() int {
	for i, s := range m.ss {
		if !s.node.IsZero() && m.exists[s.node] {
			return i
		}
	}
	return -1
}

func (m *guardMachine) acquire(t *rapid.T) {
	if m.holder() >= 0 {
		t.Skip("held")
	}
	i := m.pick(t, "i", (*propSession).acts)
	s := m.ss[i]
	n, err := s.st.Create(m.ctx, propLock+"/lock-", nil, store.EphemeralSequential)
	if err != nil {
		t.Fatalf("acquire by %d: %v", i, err)
	}
	s.node = store.Guard{Path: n.Path, Seq: n.Seq}
	s.last = s.node
	m.exists[s.node] = true
}

func (m *guardMachine) release(t *rapid.T) {
	i := m.holder()
	s := m.ss[max(i, 0)]
	if i < 0 || !s.acts() {
		t.Skip("nothing to release")
	}
	if err := s.st.Delete(m.ctx, s.node.Path); err != nil {
		t.Fatalf("release by %d: %v", i, err)
	}
	m.exists[s.node] = false
	s.node = store.Guard{}
}

// write writes under the latest hold of session h through session w: a
// set, or a compare-and-set at the version the model has (or a stale one).
func (m *guardMachine) write(t *rapid.T) {
	h := m.holder()
	if h < 0 || rapid.Bool().Draw(t, "stale") {
		h = m.pick(t, "holder", func(s *propSession) bool { return !s.last.IsZero() })
	}
	w := m.pick(t, "writer", func(s *propSession) bool { return s.pending == nil && (s.frozen || !s.ended) })
	g := m.ss[h].last
	ws := m.ss[w]
	m.writes++
	pw := &pendingWrite{result: make(chan error, 1), guard: g, data: fmt.Sprint("w", m.writes)}
	switch rapid.IntRange(0, 2).Draw(t, "kind") {
	case 1:
		pw.cas, pw.ver = true, m.version
	case 2:
		pw.cas, pw.ver = true, m.version+1 // a version not reached yet: moved
	}
	v := shared.NewValue(ws.st, propValue)
	go func() {
		var err error
		if pw.cas {
			_, err = v.CompareAndSetWhile(m.ctx, rawHold{g}, []byte(pw.data), pw.ver)
		} else {
			_, err = v.SetWhile(m.ctx, rawHold{g}, []byte(pw.data))
		}
		pw.result <- err
	}()
	if ws.frozen {
		ws.pending = pw // applied, or not, on Thaw
		return
	}
	m.judge(t, pw, m.wait(t, pw), ws.ended)
}

func (m *guardMachine) wait(t *rapid.T, pw *pendingWrite) error {
	select {
	case err := <-pw.result:
		return err
	case <-time.After(propTimeout):
		t.Fatalf("write %s did not return", pw.data)
	}
	return nil
}

// judge checks the outcome err of pw, applied (or not) now, against the
// model, and advances it: a write is applied exactly when its guard's
// node exists and its version matches.
func (m *guardMachine) judge(t *rapid.T, pw *pendingWrite, err error, writerEnded bool) {
	switch {
	case writerEnded:
		if !errors.Is(err, store.ErrSessionExpired) {
			t.Fatalf("write %s through an ended session = %v; want ErrSessionExpired", pw.data, err)
		}
	case !m.exists[pw.guard]:
		if !errors.Is(err, shared.ErrLost) {
			t.Fatalf("write %s under %v, whose node is gone = %v; want ErrLost", pw.data, pw.guard, err)
		}
	case pw.cas && pw.ver != m.version:
		if !errors.Is(err, shared.ErrVersionMoved) {
			t.Fatalf("write %s at version %d, the value at %d = %v; want ErrVersionMoved", pw.data, pw.ver, m.version, err)
		}
	case err != nil:
		t.Fatalf("write %s under %v, whose node exists = %v; want it applied", pw.data, pw.guard, err)
	default:
		m.data = pw.data
		m.version++
		if m.version == shared.NoVersion+1 {
			m.version = 0
		}
	}
}

func (m *guardMachine) freeze(t *rapid.T) {
	s := m.ss[m.pick(t, "i", (*propSession).acts)]
	s.st.Freeze()
	s.frozen = true
}

// expire expires a session at the server: a frozen one does not learn it
// until it is thawed.
func (m *guardMachine) expire(t *rapid.T) {
	s := m.ss[m.pick(t, "i", func(s *propSession) bool { return !s.ended })]
	s.st.Expire()
	s.ended = true
	if !s.node.IsZero() {
		m.exists[s.node] = false
	}
}

func (m *guardMachine) thaw(t *rapid.T) {
	s := m.ss[m.pick(t, "i", func(s *propSession) bool { return s.frozen })]
	s.st.Thaw()
	s.frozen = false
	if pw := s.pending; pw != nil {
		s.pending = nil
		m.judge(t, pw, m.wait(t, pw), s.ended)
	}
}

// reopen replaces an ended session with a new one, holding nothing.
func (m *guardMachine) reopen(t *rapid.T) {
	i := m.pick(t, "i", func(s *propSession) bool { return s.ended && !s.frozen })
	s := m.ss[i]
	_ = s.st.Close()
	m.ss[i] = &propSession{st: m.srv.Open(), last: s.last}
}

// check: the value holds what the model says, as another session reads it.
func (m *guardMachine) check(t *rapid.T) {
	got, err := shared.NewValue(m.observer, propValue).Get(m.ctx)
	if err != nil || string(got.Data) != m.data || got.Version != m.version {
		t.Fatalf("value = %q at version %d, %v; want %q at version %d", got.Data, got.Version, err, m.data, m.version)
	}
}

// TestGuardedWriteProperty: in every history of holds taken and released,
// sessions expired and processes frozen and thawed, a guarded write is
// applied exactly when its hold's node exists at the server when the
// server applies it, whoever sends it: the holder itself, frozen past its
// session and thawed, or another session with a stale hold.
func TestGuardedWriteProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newGuardMachine(t.Context())
		defer m.close(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"acquire": m.acquire,
			"release": m.release,
			"write":   m.write,
			"freeze":  m.freeze,
			"expire":  m.expire,
			"thaw":    m.thaw,
			"reopen":  m.reopen,
			"":        m.check,
		})
	})
}
