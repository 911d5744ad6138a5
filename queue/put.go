package queue

import (
	"context"
	"slices"
	gosync "sync"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
)

// Puts coalesce, as a database commits a group: a Put that finds fewer
// requests of its Queue's puts in flight than its cap (WithPutsInFlight)
// sends its item at once, alone; Puts that arrive while that many are in
// flight wait for one to return and then go together, in one request
// (store.BatchCreator: a ZooKeeper multi, an etcd transaction), all or
// none, each returning once the request that holds its item is
// acknowledged. One producer pays one request per item, as before; many
// producers on one session pay a request per group, and the store's
// per-request cost (its log write, its commit) once per group. Order is
// kept: a Put that returned was acknowledged before any later Put was
// sent; Puts that overlap have no order between them.

// defaultPutsInFlight is the cap where WithPutsInFlight is not given.
// Measured with 8 producers on one session (BenchmarkPutPeers, which runs
// other caps beside it with CORRAL_PUT_INFLIGHT): on a 2-core machine whose
// server shares the cores, 1 and 2 did best (etcd: 1.01× and 0.96× the
// peer, 4 in flight 0.74×, 8 0.62×: more requests with fewer items each,
// on a server with no room for them); on a 16-core machine whose server
// has cores of its own, 8 did (ZooKeeper 1.57×, etcd 0.91×, against 0.80×
// and 0.54× with 2). The default is the small machine's answer, which
// costs the large one throughput but never loads a busy server with more
// requests.
//
// A cap that follows the server's round trips (as TCP Vegas does: more in
// flight while they stay as short as a lone request's, fewer once they
// grow) was tried and does not work here: on the 2-core machine an etcd
// request's round trip did not grow with more of them in flight (the
// server gathers them into its own raft batches), while each costs the
// shared cores CPU; a busy server's signal is its CPU, which the client
// does not see.
const defaultPutsInFlight = 2

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
	if p.inFlight < q.opts.maxPuts() {
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
// would not fit a request. The ids of a group's items count up from the
// first of the block it takes (see newIDs), so that items of one request
// that share a Seq (on etcd) keep the order of their Puts. p.mu is held.
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
		g = &putGroup{done: make(chan struct{}), base: itemIDs.take(store.MaxBatchNodes)}
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
	return len(dir) + 1 + itemNameLen + len(data)
}

// itemNameLen is the length of every item's name, made once: a Put needs
// only the length.
var itemNameLen = len(names.ItemName(0, names.ID(0)))

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
