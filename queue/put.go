package queue

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	gosync "sync"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
)

// Puts coalesce, as a database commits a group: a Put that finds fewer
// than maxInFlight requests of its Queue's puts in flight sends its item at
// once, alone; Puts that arrive while that many are in flight wait for one
// to return and then go together, in one request (store.BatchCreator: a ZooKeeper multi, an etcd
// transaction), all or none, each returning once the request that holds
// its item is acknowledged. One producer pays one request per item, as
// before; many producers on one session pay a request per group, and the
// store's per-request cost (its log write, its commit) once per group.
// Order is kept: a Put that returned was acknowledged before any later
// Put was sent; Puts that overlap have no order between them.

// maxInFlight is how many requests of one Queue's puts may be in flight at
// once. Measured with 8 producers on one session (BenchmarkPutPeers, on a
// loaded 2-core machine): with 2, 1.02–1.34× the peers' rates in every
// run; with 1 (the most gathering), 1.1–1.4× on a saturated server but
// 0.85× on ZooKeeper once it had room to pipeline; with 4, 0.8× (more
// requests, each with fewer items). On a 16-core machine whose server has
// cores of its own the other way round: with 2, 0.80× (ZooKeeper) and
// 0.54× (etcd); with 8, 1.57× and 0.91× (CORRAL_PUT_INFLIGHT). The right
// number depends on the server's spare capacity; an adaptive cap is open.
var maxInFlight = 2 // a constant; a variable for BenchmarkPutPeers

// putter holds the coalescing state of one Queue.
type putter struct {
	mu       gosync.Mutex
	inFlight int         // requests of puts in flight
	pending  []*putGroup // the groups waiting for it, oldest first
	onJoin   func()      // tests: called by a Put that joined a group
}

// putGroup is the items of one request.
type putGroup struct {
	batch []store.BatchNode
	ids   []string
	base  uint64 // the first id
	size  int    // bytes, as store.ValidateBatch counts them
	// ctx bounds the request: it ends once every member has left.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	members int // still waiting; guarded by putter.mu
	done    chan struct{}
	err     error // set before done is closed
}

// put adds an item with data and priority to the queue: alone at once, or
// with the others waiting when a put is in flight.
func (q *Queue) put(ctx context.Context, data []byte, prio int64) error {
	bc, ok := store.Find[store.BatchCreator](q.st)
	if !ok || itemSize(q.items, data) > store.MaxBatchSize {
		// An item too large for a batch goes alone, by Create.
		id := newID()
		return q.create(ctx, q.items, names.ItemName(prio, id), data, id)
	}
	p := &q.puts
	p.mu.Lock()
	if p.inFlight < maxInFlight {
		p.inFlight++
		p.mu.Unlock()
		id := newID()
		err := q.send(ctx, bc, []store.BatchNode{{Name: names.ItemName(prio, id), Data: data}}, id)
		q.putDone(bc)
		return err
	}
	g := p.join(ctx, q.items, prio, data)
	joined := p.onJoin
	p.mu.Unlock()
	if joined != nil {
		joined()
	}
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		p.leave(g, context.Cause(ctx))
		select {
		case <-g.done: // the request's outcome won the race: keep it
			return g.err
		default:
			return ctx.Err()
		}
	}
}

// join adds the item to the last pending group, or to a new one when it
// would not fit a request. The ids of a group's items count up from a
// random start (see newIDs), so that items of one request that share a
// Seq (on etcd) keep the order of their Puts. p.mu is held.
func (p *putter) join(ctx context.Context, dir string, prio int64, data []byte) *putGroup {
	size := itemSize(dir, data)
	var g *putGroup
	if n := len(p.pending); n > 0 {
		last := p.pending[n-1]
		if len(last.batch) < store.MaxBatchNodes && last.size+size <= store.MaxBatchSize {
			g = last
		}
	}
	if g == nil {
		g = &putGroup{done: make(chan struct{}), base: rand.Uint64N(math.MaxUint64 - store.MaxBatchNodes + 1)}
		g.ctx, g.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
		p.pending = append(p.pending, g)
	}
	id := names.ID(g.base + uint64(len(g.ids)))
	// A copy: a member that leaves may reuse its buffer while the group
	// is sent.
	g.batch = append(g.batch, store.BatchNode{Name: names.ItemName(prio, id), Data: slices.Clone(data)})
	g.ids = append(g.ids, id)
	g.size += size
	g.members++
	return g
}

// itemSize is the size of an item with data in dir as store.ValidateBatch
// counts it: its path and its data.
func itemSize(dir string, data []byte) int {
	return len(dir) + 1 + len(names.ItemName(0, names.ID(0))) + len(data) // every item name has this length
}

// leave records that a member of g has gone: the request is called off
// once every member has.
func (p *putter) leave(g *putGroup, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g.members--; g.members == 0 {
		g.cancel(cause)
	}
}

// putDone is called when a request of puts has returned: it sends the next
// group, if any, on a goroutine that goes on through the groups pending
// and ends when none is left.
func (q *Queue) putDone(bc store.BatchCreator) {
	if g := q.puts.next(); g != nil {
		go q.flush(bc, g)
	}
}

// next returns the oldest pending group, which takes over the slot of a
// request that returned, or frees that slot.
func (p *putter) next() *putGroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) == 0 {
		p.inFlight--
		return nil
	}
	g := p.pending[0]
	p.pending[0] = nil
	p.pending = p.pending[1:]
	return g
}

// flush sends g, and the groups pending after it, one request each.
func (q *Queue) flush(bc store.BatchCreator, g *putGroup) {
	for ; g != nil; g = q.puts.next() {
		q.sendGroup(bc, g)
	}
}

// sendGroup sends g and tells its members the outcome.
func (q *Queue) sendGroup(bc store.BatchCreator, g *putGroup) {
	g.err = q.send(g.ctx, bc, g.batch, g.ids[0])
	g.cancel(nil)
	close(g.done)
}

// send creates the items of batch, the first of which has the id first, in
// one request, exactly once (see create). A single item goes as a batch
// too: etcd's transaction for it is leaner than a Create's, which keeps
// what it needs to undo an abandoned create (an item's put needs no undo:
// an abandoned Put may have added its item).
func (q *Queue) send(ctx context.Context, bc store.BatchCreator, batch []store.BatchNode, first string) error {
	return q.retryCreate(ctx, q.items, batch[0].Name, first, func() error {
		_, err := bc.CreateBatch(ctx, q.items, batch, store.Sequential)
		return err
	})
}
