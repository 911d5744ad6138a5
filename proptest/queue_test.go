package proptest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
)

// queueSessions is how many sessions (consumers) share the queue.
const queueSessions = 3

// queueMaxDeliveries is the dead-letter threshold of the machine's queue.
const queueMaxDeliveries = 3

// modelItem is an item of the model queue.
type modelItem struct {
	data  string
	prio  int
	order int // the order of its Put; kept when it is put back
	count int // times delivered so far
}

// queueMachine drives one queue through several sessions on memstore beside
// a model: a list of items, some of them claimed by a session, delivered by
// (priority desc, order asc), each delivered at most queueMaxDeliveries
// times before it moves to the dead-letter queue.
//
// The store's view of the queue is kept the way the view selects: followed
// (memstore as it is), counted (children counts and guarded claims, as on
// ZooKeeper) or listed for every take (the portable fallback).
type queueMachine struct {
	delivery queue.Delivery
	view     string
	srv      *memstore.Server
	sess     [queueSessions]*memstore.Store
	q        [queueSessions]*queue.Queue
	puts     int

	items   []modelItem               // in the store, claimed or not
	dead    []modelItem               // moved to the dead-letter queue
	claimed map[string]int            // data -> session, at-least-once
	held    [queueSessions][]heldItem // taken and neither acked nor nacked
	ids     map[string]string         // data -> the id it was delivered with
}

type heldItem struct {
	it *queue.Item
	m  modelItem
}

// countedStore (ZooKeeper's capabilities) and plainStore hide a store's
// capabilities; see view.
type countedStore struct {
	store.Store
	store.ChildCounter
	store.GuardedCreator
}

type plainStore struct {
	store.Store
}

func (m *queueMachine) open(t *rapid.T, i int) {
	s := m.srv.Open()
	m.sess[i] = s
	var st store.Store = s
	switch m.view {
	case "counted":
		st = &countedStore{s, s, s}
	case "plain":
		st = &plainStore{s}
	}
	m.q[i] = queue.New(st, "/q", queue.WithDelivery(m.delivery), queue.WithDeadLetter("/dead", queueMaxDeliveries))
}

// next returns the index in m.items of the item a take delivers next, or
// -1: the head of the queue, spent items left out.
func (m *queueMachine) next() int {
	best := -1
	for i, it := range m.items {
		if _, ok := m.claimed[it.data]; ok || m.spent(it) {
			continue
		}
		if best < 0 || cmp.Or(cmp.Compare(m.items[best].prio, it.prio), cmp.Compare(it.order, m.items[best].order)) < 0 {
			best = i
		}
	}
	return best
}

// spent reports whether the at-least-once item it has been delivered the
// maximum number of times: a take moves it to the dead-letter queue
// instead, and may have done so already, unseen by the model, while a
// Consumer looked for its next item.
func (m *queueMachine) spent(it modelItem) bool {
	return m.delivery == queue.AtLeastOnce && it.count >= queueMaxDeliveries
}

// spentCount returns the number of spent items: each is in the store or
// in the dead-letter queue.
func (m *queueMachine) spentCount() int {
	n := 0
	for _, it := range m.items {
		if m.spent(it) {
			n++
		}
	}
	return n
}

// took records that session i received the item the model says is next.
// A counted view learns of others' claims only by trying them, and a
// session that lost a race spreads its next takes over the first few items
// of the head's priority (see the queue package doc), so there the item
// may be any of those.
func (m *queueMachine) took(t *rapid.T, i int, it *queue.Item) {
	n := m.next()
	if n < 0 {
		t.Fatalf("session %d got %q; want an empty queue", i, it.Data)
	}
	if m.view == "counted" && string(it.Data) != m.items[n].data {
		if k := m.withinSpread(n, string(it.Data)); k >= 0 {
			n = k
		}
	}
	want := m.items[n]
	want.count++
	if string(it.Data) != want.data || it.Priority != want.prio || it.Deliveries != want.count {
		t.Fatalf("session %d got %q (priority %d, delivered %d); want %q (priority %d, delivered %d)",
			i, it.Data, it.Priority, it.Deliveries, want.data, want.prio, want.count)
	}
	if id, ok := m.ids[want.data]; ok && id != it.ID {
		t.Fatalf("%q delivered with id %s; want %s as before", want.data, it.ID, id)
	}
	m.ids[want.data] = it.ID
	if m.delivery == queue.AtLeastOnce {
		m.items[n] = want
		m.claimed[want.data] = i
	} else {
		m.items = slices.Delete(m.items, n, n+1)
	}
	m.held[i] = append(m.held[i], heldItem{it, want})
}

// withinSpread returns the index of the item holding data if it is among
// the first queue.MaxSpread available items of the head's priority (head
// is the index of the head), or -1.
func (m *queueMachine) withinSpread(head int, data string) int {
	var avail []int
	for i, it := range m.items {
		if _, ok := m.claimed[it.data]; !ok && it.prio == m.items[head].prio && !m.spent(it) {
			avail = append(avail, i)
		}
	}
	slices.SortFunc(avail, func(a, b int) int { return cmp.Compare(m.items[a].order, m.items[b].order) })
	for _, i := range avail[:min(len(avail), maxSpread)] {
		if m.items[i].data == data {
			return i
		}
	}
	return -1
}

// maxSpread is the queue's bound on how far competing takes spread.
const maxSpread = 16

func (m *queueMachine) remove(data string) {
	m.items = slices.DeleteFunc(m.items, func(it modelItem) bool { return it.data == data })
	delete(m.claimed, data)
}

func (m *queueMachine) put(t *rapid.T) {
	i := rapid.IntRange(0, queueSessions-1).Draw(t, "session")
	prio := rapid.OneOf(
		rapid.IntRange(-2, 2),
		rapid.SampledFrom([]int{math.MinInt, math.MinInt + 1, -1 << 40, 1 << 40, math.MaxInt - 1, math.MaxInt}),
	).Draw(t, "priority")
	m.puts++
	data := fmt.Sprintf("item-%d", m.puts)
	if err := m.q[i].PutPriority(context.Background(), []byte(data), prio); err != nil {
		t.Fatalf("PutPriority(%q, %d) = %v", data, prio, err)
	}
	m.items = append(m.items, modelItem{data: data, prio: prio, order: m.puts})
}

func (m *queueMachine) tryTake(t *rapid.T) {
	i := rapid.IntRange(0, queueSessions-1).Draw(t, "session")
	it, ok, err := m.q[i].TryTake(context.Background())
	if err != nil {
		t.Fatalf("TryTake() = %v", err)
	}
	if !ok {
		if n := m.next(); n >= 0 {
			t.Fatalf("TryTake() on session %d = false; want %q", i, m.items[n].data)
		}
		return
	}
	m.took(t, i, it)
}

// settle acks or nacks an item a session holds.
func (m *queueMachine) settle(t *rapid.T) {
	i := rapid.IntRange(0, queueSessions-1).Draw(t, "session")
	if len(m.held[i]) == 0 {
		t.Skip("nothing held")
	}
	k := rapid.IntRange(0, len(m.held[i])-1).Draw(t, "held")
	h := m.held[i][k]
	m.held[i] = slices.Delete(m.held[i], k, k+1)
	ack := rapid.Bool().Draw(t, "ack")
	ctx := context.Background()
	switch {
	case ack:
		if err := h.it.Ack(ctx); err != nil {
			t.Fatalf("Ack(%q) = %v", h.m.data, err)
		}
		m.remove(h.m.data)
	default:
		if err := h.it.Nack(ctx); err != nil {
			t.Fatalf("Nack(%q) = %v", h.m.data, err)
		}
		switch {
		case m.delivery == queue.AtLeastOnce:
			delete(m.claimed, h.m.data)
		case h.m.count >= queueMaxDeliveries:
			m.dead = append(m.dead, h.m)
		default:
			m.items = append(m.items, h.m)
		}
	}
	if err := h.it.Ack(ctx); !errors.Is(err, queue.ErrSettled) {
		t.Fatalf("second Ack(%q) = %v; want %v", h.m.data, err, queue.ErrSettled)
	}
}

// expire ends a session: at-least-once its claims return to the queue;
// at-most-once what it held is gone with it.
func (m *queueMachine) expire(t *rapid.T) {
	i := rapid.IntRange(0, queueSessions-1).Draw(t, "session")
	m.sess[i].Expire()
	for _, h := range m.held[i] {
		if err := h.it.Ack(context.Background()); m.delivery == queue.AtLeastOnce && !errors.Is(err, queue.ErrClaimLost) {
			t.Fatalf("Ack(%q) after expiry = %v; want %v", h.m.data, err, queue.ErrClaimLost)
		}
		if !errors.Is(h.it.Context().Err(), context.Canceled) && m.delivery == queue.AtLeastOnce {
			t.Fatalf("Context() of %q after expiry not cancelled", h.m.data)
		}
		delete(m.claimed, h.m.data)
	}
	m.held[i] = nil
	m.open(t, i)
}

// consume receives a few items through a Consumer and cancels it: the
// consumer delivers exactly the next items, in order, and whatever it took
// but did not deliver is back in the queue, uncounted.
func (m *queueMachine) consume(t *rapid.T) {
	i := rapid.IntRange(0, queueSessions-1).Draw(t, "session")
	avail := 0
	for _, it := range m.items {
		if _, ok := m.claimed[it.data]; !ok && !m.spent(it) {
			avail++
		}
	}
	n := rapid.IntRange(0, min(avail, 3)).Draw(t, "receive")
	ctx, cancel := context.WithCancel(context.Background())
	c := m.q[i].Consume(ctx)
	for range n {
		select {
		case it := <-c.Items():
			m.took(t, i, it)
		case <-time.After(10 * time.Second):
			t.Fatalf("consumer delivered nothing in 10s; want %d items", n)
		}
	}
	cancel()
	for it := range c.Items() {
		m.took(t, i, it)
	}
	if err := c.Err(); !errors.Is(err, context.Canceled) || err.Error() != context.Canceled.Error() {
		t.Fatalf("Consumer.Err() = %v; want %v alone", err, context.Canceled)
	}
}

// peek checks that Peek shows the head of the queue, or a spent item.
func (m *queueMachine) peek(t *rapid.T) {
	i := rapid.IntRange(0, queueSessions-1).Draw(t, "session")
	it, ok, err := m.q[i].Peek(context.Background())
	if err != nil {
		t.Fatalf("Peek() = %v", err)
	}
	if ok && slices.ContainsFunc(m.items, func(mi modelItem) bool { return mi.data == string(it.Data) && m.spent(mi) }) {
		return // not moved yet
	}
	n := m.next()
	switch {
	case n < 0 && ok:
		t.Fatalf("Peek() = %q; want an empty queue", it.Data)
	case n >= 0 && (!ok || string(it.Data) != m.items[n].data || it.Deliveries != m.items[n].count):
		t.Fatalf("Peek() = %v, %v; want %q, delivered %d", it, ok, m.items[n].data, m.items[n].count)
	}
}

// check compares the store with the model: Len and the item nodes, here
// and in the dead-letter queue, and the claim nodes.
func (m *queueMachine) check(t *rapid.T) {
	ctx := context.Background()
	count := func(p string) int {
		kids, err := m.sess[0].Children(ctx, p)
		if err != nil && !errors.Is(err, store.ErrNoNode) {
			t.Fatalf("Children(%q) = %v", p, err)
		}
		return len(kids)
	}
	items, dead := count("/q/items"), count("/dead/items")
	if items+dead != len(m.items)+len(m.dead) || items > len(m.items) || items < len(m.items)-m.spentCount() {
		t.Fatalf("%d item nodes, %d dead letters; want %d (%d of them may be dead letters) and %d",
			items, dead, len(m.items), m.spentCount(), len(m.dead))
	}
	if got := count("/q/claims"); got != len(m.claimed) {
		t.Fatalf("%d claim nodes; want %d", got, len(m.claimed))
	}
	n, err := m.q[0].Len(ctx)
	if err != nil || n != items {
		t.Fatalf("Len() = %d, %v; want %d", n, err, items)
	}
}

func TestQueueModel(t *testing.T) {
	for _, view := range []string{"follow", "counted", "plain"} {
		for _, d := range []queue.Delivery{queue.AtMostOnce, queue.AtLeastOnce} {
			t.Run(view+"/"+d.String(), func(t *testing.T) {
				rapid.Check(t, func(t *rapid.T) {
					m := &queueMachine{delivery: d, view: view, srv: newServer(), claimed: map[string]int{}, ids: map[string]string{}}
					for i := range queueSessions {
						m.open(t, i)
					}
					defer func() {
						for _, s := range m.sess {
							s.Close()
						}
					}()
					t.Repeat(map[string]func(*rapid.T){
						"put":     m.put,
						"tryTake": m.tryTake,
						"settle":  m.settle,
						"expire":  m.expire,
						"consume": m.consume,
						"peek":    m.peek,
						"":        m.check,
					})
				})
			})
		}
	}
}
