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

// modelItem is an item of the model queue.
type modelItem struct {
	data  string
	prio  int
	order int // the order of its Put; kept when it is put back
}

// queueMachine drives one queue through several sessions on memstore beside
// a model: a list of items, some of them claimed by a session, delivered by
// (priority desc, order asc).
type queueMachine struct {
	delivery queue.Delivery
	srv      *memstore.Server
	sess     [queueSessions]*memstore.Store
	q        [queueSessions]*queue.Queue
	puts     int

	items   []modelItem               // in the store, claimed or not
	claimed map[string]int            // data -> session, at-least-once
	held    [queueSessions][]heldItem // taken and neither acked nor nacked
}

type heldItem struct {
	it *queue.Item
	m  modelItem
}

func (m *queueMachine) open(t *rapid.T, i int) {
	m.sess[i] = m.srv.Open()
	q, err := queue.New(m.sess[i], "/q", queue.WithDelivery(m.delivery))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	m.q[i] = q
}

// next returns the index in m.items of the item the queue must deliver
// next, or -1.
func (m *queueMachine) next() int {
	best := -1
	for i, it := range m.items {
		if _, ok := m.claimed[it.data]; ok {
			continue
		}
		if best < 0 || cmp.Or(cmp.Compare(m.items[best].prio, it.prio), cmp.Compare(it.order, m.items[best].order)) < 0 {
			best = i
		}
	}
	return best
}

// took records that session i received the item the model says is next.
func (m *queueMachine) took(t *rapid.T, i int, it *queue.Item) {
	n := m.next()
	if n < 0 {
		t.Fatalf("session %d got %q; want an empty queue", i, it.Data)
	}
	want := m.items[n]
	if string(it.Data) != want.data || it.Priority != want.prio {
		t.Fatalf("session %d got %q (priority %d); want %q (priority %d)", i, it.Data, it.Priority, want.data, want.prio)
	}
	if m.delivery == queue.AtLeastOnce {
		m.claimed[want.data] = i
	} else {
		m.items = slices.Delete(m.items, n, n+1)
	}
	m.held[i] = append(m.held[i], heldItem{it, want})
}

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
	m.items = append(m.items, modelItem{data, prio, m.puts})
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
	if ack {
		if err := h.it.Ack(ctx); err != nil {
			t.Fatalf("Ack(%q) = %v", h.m.data, err)
		}
		m.remove(h.m.data)
	} else {
		if err := h.it.Nack(ctx); err != nil {
			t.Fatalf("Nack(%q) = %v", h.m.data, err)
		}
		if m.delivery == queue.AtLeastOnce {
			delete(m.claimed, h.m.data)
		} else {
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
		if err := h.it.Ack(context.Background()); !errors.Is(err, store.ErrSessionExpired) && m.delivery == queue.AtLeastOnce {
			t.Fatalf("Ack(%q) after expiry = %v; want %v", h.m.data, err, store.ErrSessionExpired)
		}
		delete(m.claimed, h.m.data)
	}
	m.held[i] = nil
	m.open(t, i)
}

// consume receives a few items through a Consumer and cancels it: the
// consumer delivers exactly the next items, in order, and whatever it took
// but did not deliver is back in the queue.
func (m *queueMachine) consume(t *rapid.T) {
	i := rapid.IntRange(0, queueSessions-1).Draw(t, "session")
	avail := 0
	for _, it := range m.items {
		if _, ok := m.claimed[it.data]; !ok {
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
	if err := c.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Consumer.Err() = %v; want %v", err, context.Canceled)
	}
}

// check compares the store with the model: as many item nodes as items, as
// many claim nodes as claims.
func (m *queueMachine) check(t *rapid.T) {
	ctx := context.Background()
	count := func(p string) int {
		kids, err := m.sess[0].Children(ctx, p)
		if err != nil && !errors.Is(err, store.ErrNoNode) {
			t.Fatalf("Children(%q) = %v", p, err)
		}
		return len(kids)
	}
	if got := count("/q/items"); got != len(m.items) {
		t.Fatalf("%d item nodes; want %d", got, len(m.items))
	}
	if got := count("/q/claims"); got != len(m.claimed) {
		t.Fatalf("%d claim nodes; want %d", got, len(m.claimed))
	}
}

func TestQueueModel(t *testing.T) {
	for _, d := range []queue.Delivery{queue.AtMostOnce, queue.AtLeastOnce} {
		t.Run(d.String(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				m := &queueMachine{delivery: d, srv: memstore.NewServer(), claimed: map[string]int{}}
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
					"":        m.check,
				})
			})
		})
	}
}
