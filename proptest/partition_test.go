package proptest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
)

// partTimeout bounds every wait of the partition state machine.
const partTimeout = 10 * time.Second

// partSlots is the number of members the machine drives; slot i joins with
// id "m<i>", each time on a new session, so that a slot that joins again
// is a member restarting with the same id.
const partSlots = 4

// partResource is the model resource every shard's work writes to: it
// remembers the greatest token it has seen for each shard and the shards
// being worked on, and records a violation when a shard is taken up while
// another member works on it, or with a token not above the last one.
type partResource struct {
	mu         gosync.Mutex
	last       map[int]int64
	working    map[int]*partition.Shard
	violations []string
	tick       chan struct{} // cap 1: something changed
}

// begin is called by a member's worker when it receives shard s: its
// Context must be the only live one for that shard number.
func (r *partResource) begin(id string, s *partition.Shard) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := s.ID()
	if o := r.working[n]; o != nil && o.Context().Err() == nil {
		r.violations = append(r.violations, fmt.Sprintf("shard %d: %s takes it (token %d) while %v is live", n, id, s.Token(), o))
	}
	if last, ok := r.last[n]; ok && s.Token() <= last {
		r.violations = append(r.violations, fmt.Sprintf("shard %d: %s takes it with token %d, not above %d", n, id, s.Token(), last))
	}
	r.last[n], r.working[n] = s.Token(), s
	r.signal()
}

func (r *partResource) signal() {
	select {
	case r.tick <- struct{}{}:
	default:
	}
}

// partMember is one slot: a session and a member on it, and the shards its
// worker works on now.
type partMember struct {
	id   string
	st   *memstore.Store
	m    *partition.Member
	done chan struct{} // the worker exited

	mu    gosync.Mutex
	owned map[int]*partition.Shard
}

// partMachine drives partition members on memstore beside a model: which
// slots are members, and which are disconnected.
type partMachine struct {
	srv    *memstore.Server
	path   string
	shards int
	ctx    context.Context
	res    *partResource
	ms     [partSlots]*partMember
	// The model.
	disconnected [partSlots]bool
	ended        [partSlots]bool // the session ended: the member stops
}

func newPartMachine(ctx context.Context, t *rapid.T) *partMachine {
	return &partMachine{
		srv: newServer(), path: "/proptest/partition", ctx: ctx,
		shards: rapid.IntRange(1, 12).Draw(t, "shards"),
		res:    &partResource{last: map[int]int64{}, working: map[int]*partition.Shard{}, tick: make(chan struct{}, 1)},
	}
}

func pickSlot(t *rapid.T) int { return rapid.IntRange(0, partSlots-1).Draw(t, "slot") }

// live reports whether slot i has a member whose session lives.
func (pm *partMachine) live(i int) bool { return pm.ms[i] != nil && !pm.ended[i] }

func (pm *partMachine) join(t *rapid.T) {
	i := pickSlot(t)
	if pm.live(i) {
		t.Skip("already a member")
	}
	pm.reap(t, i)
	grace := []time.Duration{0, time.Millisecond, time.Hour}[rapid.IntRange(0, 2).Draw(t, "grace")]
	st := pm.srv.Open()
	m, err := partition.Join(pm.ctx, st, pm.path, pm.shards, fmt.Sprint("m", i), partition.WithGrace(grace))
	if err != nil {
		t.Fatalf("Join = %v", err)
	}
	pm.ms[i] = &partMember{id: m.ID(), st: st, m: m, done: make(chan struct{}), owned: map[int]*partition.Shard{}}
	pm.disconnected[i], pm.ended[i] = false, false
	go pm.work(pm.ms[i])
}

// work works on the shards of pm as a service would, in its Run: it takes
// each shard up at the resource and, once its Context ends, stops, which
// releases it.
func (pm *partMachine) work(m *partMember) {
	defer close(m.done)
	_ = m.m.Run(context.Background(), func(ctx context.Context, s *partition.Shard) error {
		pm.res.begin(m.id, s)
		m.mu.Lock()
		m.owned[s.ID()] = s
		m.mu.Unlock()
		pm.res.signal()
		<-ctx.Done()
		m.mu.Lock()
		if m.owned[s.ID()] == s {
			delete(m.owned, s.ID())
		}
		m.mu.Unlock()
		pm.res.signal()
		return nil
	})
}

// reap waits for the stopped member of slot i to finish and closes its
// session.
func (pm *partMachine) reap(t *rapid.T, i int) {
	m := pm.ms[i]
	if m == nil {
		return
	}
	ctx, cancel := context.WithCancel(pm.ctx)
	cancel() // cut any grace short
	// A member cut off cannot remove its node: its session will.
	if err := m.m.Leave(ctx); err != nil && !(pm.disconnected[i] && errors.Is(err, store.ErrDisconnected)) {
		t.Errorf("Leave(%s) = %v", m.id, err)
	}
	select {
	case <-m.done:
	case <-time.After(partTimeout):
		t.Fatalf("worker of %s still running %v after Leave", m.id, partTimeout)
	}
	_ = m.st.Close()
	pm.ms[i] = nil
}

func (pm *partMachine) pickLive(t *rapid.T) int {
	i := pickSlot(t)
	if !pm.live(i) {
		t.Skip("not a member")
	}
	return i
}

func (pm *partMachine) leave(t *rapid.T) { pm.reap(t, pm.pickLive(t)) }

func (pm *partMachine) expire(t *rapid.T) {
	i := pm.pickLive(t)
	pm.ms[i].st.Expire()
	pm.ended[i] = true
}

// kill ends the session as a process killed with -9 would, once the
// server notices: no Leave, no Release.
func (pm *partMachine) kill(t *rapid.T) {
	i := pm.pickLive(t)
	_ = pm.ms[i].st.Close()
	pm.ended[i] = true
}

func (pm *partMachine) disconnect(t *rapid.T) {
	i := pm.pickLive(t)
	if pm.disconnected[i] {
		pm.ms[i].st.Reconnect()
	} else {
		pm.ms[i].st.Disconnect()
	}
	pm.disconnected[i] = !pm.disconnected[i]
}

// quiesce reconnects every member and waits until every live member works
// on exactly the shards Assign gives it over the live members' ids.
func (pm *partMachine) quiesce(t *rapid.T) {
	var ids []string
	for i := range pm.ms {
		if pm.live(i) {
			if pm.disconnected[i] {
				pm.ms[i].st.Reconnect()
				pm.disconnected[i] = false
			}
			ids = append(ids, pm.ms[i].id)
		}
	}
	owners, err := partition.Assign(ids, pm.shards)
	if err != nil {
		t.Fatalf("Assign(%q, %d) = %v", ids, pm.shards, err)
	}
	timer := time.NewTimer(partTimeout)
	defer timer.Stop()
	for {
		diff := pm.diff(owners)
		if diff == "" {
			return
		}
		select {
		case <-pm.res.tick:
		case <-timer.C:
			t.Fatalf("not balanced after %v: %s\n%s", partTimeout, diff, pm.dump())
		}
	}
}

// dump describes the members and the shards' lock nodes, for a failure.
func (pm *partMachine) dump() string {
	var b strings.Builder
	for i, m := range pm.ms {
		if m != nil {
			fmt.Fprintf(&b, "slot %d: %s session %#x ended %v disconnected %v err %v\n",
				i, m.id, m.st.SessionID(), pm.ended[i], pm.disconnected[i], m.m.Err())
		}
	}
	st := pm.srv.Open()
	defer st.Close()
	for s := range pm.shards {
		dir := store.Join(partition.ShardsDir(pm.path), fmt.Sprint(s))
		kids, _ := st.Children(pm.ctx, dir)
		fmt.Fprintf(&b, "shard %d:", s)
		for _, k := range kids {
			n, err := st.Get(pm.ctx, store.Join(dir, k.Name))
			fmt.Fprintf(&b, " %s(%s owner %#x %v)", k.Name, n.Data, n.Owner, err)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// diff says how the live members' shards differ from owners, "" if not.
func (pm *partMachine) diff(owners []string) string {
	for i := range pm.ms {
		if !pm.live(i) {
			continue
		}
		m := pm.ms[i]
		var want []int
		for s, o := range owners {
			if o == m.id {
				want = append(want, s)
			}
		}
		m.mu.Lock()
		var got []int
		for s, sh := range m.owned {
			if sh.Context().Err() == nil {
				got = append(got, s)
			}
		}
		m.mu.Unlock()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Sprintf("%s works on %v, Assign gives it %v", m.id, got, want)
		}
	}
	return ""
}

// check is the invariant after every step: no violation at the resource,
// and no shard with two live holds.
func (pm *partMachine) check(t *rapid.T) {
	pm.res.mu.Lock()
	v := slices.Clone(pm.res.violations)
	pm.res.mu.Unlock()
	if len(v) > 0 {
		t.Fatalf("double ownership: %v", v)
	}
	// Members are looked at one after another: a shard found live at one
	// may have moved on to the next before it is looked at. Two live
	// holds are a violation only if the first is still live once the
	// second was seen (an ended context stays ended, so it was live then).
	type seen struct {
		id string
		sh *partition.Shard
	}
	live := map[int]seen{}
	for i := range pm.ms {
		m := pm.ms[i]
		if m == nil {
			continue
		}
		m.mu.Lock()
		owned := maps.Clone(m.owned)
		m.mu.Unlock()
		for s, sh := range owned {
			if sh.Context().Err() != nil {
				continue
			}
			if o, ok := live[s]; ok && o.sh.Context().Err() == nil {
				t.Fatalf("shard %d live at %s and %s", s, o.id, m.id)
			}
			live[s] = seen{m.id, sh}
		}
	}
}

func (pm *partMachine) close(t *rapid.T) {
	for i := range pm.ms {
		pm.reap(t, i)
	}
}

// TestPartitionStateMachine: members join, leave, expire, are killed and
// lose their connection in any order; no shard is ever live at two members
// (each new owner's token is above every earlier one's), and once the
// faults are over every live member works on exactly what Assign gives it.
func TestPartitionStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		pm := newPartMachine(ctx, rt)
		defer pm.close(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"Join":       pm.join,
			"Leave":      pm.leave,
			"Expire":     pm.expire,
			"Kill":       pm.kill,
			"Disconnect": pm.disconnect,
			"Quiesce":    pm.quiesce,
			"":           pm.check,
		})
		pm.quiesce(rt)
	})
}
