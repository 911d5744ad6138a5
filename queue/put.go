package queue

import (
	"context"
	"fmt"
	"slices"
	gosync "sync"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Puts coalesce, as a database commits a group: a Put that finds fewer
// requests of its Queue's puts in flight than its cap (WithPutsInFlight)
// sends its item at once, alone; Puts that arrive while that many are in
// flight wait for one to return and then go together, in one request
// (store.BatchCreator: a ZooKeeper multi, an etcd transaction), all or
// none, each returning once the request that holds its item is
// acknowledged. One producer pays one request per item; many
// producers on one session pay a request per group, and the store's
// per-request cost (its log write, its commit) once per group. Order is
// kept: a Put that returned was acknowledged before any later Put was
// sent; Puts that overlap have no order between them.

// defaultPutsInFlight is the cap where WithPutsInFlight is not given.
// Measured with 8 producers on one session (BenchmarkPutPeers, which runs
// other caps beside it with CORRAL_PUT_INFLIGHT): on 2 cores that the
// server shares with the clients, 1 and 2 did best (etcd: 1.01× and 0.96× the
// peer, 4 in flight 0.74×, 8 0.62×: more requests with fewer items each,
// on a server with no room for them); on 16 cores, with 4 of them the
// server's own, 8 did (ZooKeeper 1.57×, etcd 0.91×, against 0.80×
// and 0.54× with 2). Beside Curator's own DistributedQueue on 2 cores
// (BenchmarkCurator), ZooKeeper's answer was the same: 1 and 2
// level (1.09–1.34× and 0.99–1.08× its background puts), 3 to 8 below
// (0.69–0.87×), the server's CPU per item growing as requests carry fewer
// items. The default is the answer for a server with no cores to spare,
// which costs one with room some throughput (WithPutsInFlight is its knob)
// but never loads a busy server with more requests.
//
// A cap that follows the server's round trips (as TCP Vegas does: more in
// flight while they stay as short as a lone request's, fewer once they
// grow) does not work here: on 2 cores an etcd
// request's round trip did not grow with more of them in flight (the
// server gathers them into its own raft batches), while each costs the
// shared cores CPU; a busy server's signal is its CPU, which the client
// does not see.
const defaultPutsInFlight = 2

// putter holds the coalescing state of one Queue.
type putter struct {
	mu       gosync.Mutex
	inFlight int           // requests of puts in flight
	pending  []*putGroup   // the groups waiting for it, oldest first
	room     chan struct{} // closed when a group leaves pending; nil when no PutAsync waits
	alone    chan struct{} // a semaphore: PutAsyncs sent alone, in flight (see putAlone)
	// tests: called by a Put that joined a group, by a member that left
	// its group, and by a PutAsync that waits for room.
	onJoin, onLeave, onHold func()
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
	// async counts the members that came by PutAsync, whose Pendings
	// read the outcome in public; stops ends their ctx's watch.
	async int
	stops []func() bool
	done  chan struct{}
	err   error // set before done is closed
	// public is err as PutAsync reports it, set with err.
	public error
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
		if last := p.pending[n-1]; last.fits(size) {
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
	if g.members--; g.members == 0 {
		g.cancel(cause)
	}
	left := p.onLeave
	p.mu.Unlock()
	if left != nil {
		left()
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
	return p.pop()
}

// pop takes the oldest pending group out and tells a PutAsync that waits
// for room. p.mu is held.
func (p *putter) pop() *putGroup {
	g := p.pending[0]
	p.pending[0] = nil
	p.pending = p.pending[1:]
	if p.room != nil {
		close(p.room)
		p.room = nil
	}
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
	q.settle(g, q.send(g.ctx, bc, g.batch, g.ids[0]))
}

// settle records err, the outcome of g's request, and tells g's members.
// A Put records its own item (see PutPriority); the PutAsyncs' are
// recorded here, as no caller of theirs returns with the outcome.
func (q *Queue) settle(g *putGroup, err error) {
	g.err = err
	if err != nil {
		g.public = fmt.Errorf("queue: put %q: %w", store.ShortPath(q.path), recipe.CtxErr(g.ctx, err))
	} else {
		for range g.async {
			q.rec.Put(g.ctx)
		}
	}
	g.cancel(nil)
	close(g.done)
	for _, stop := range g.stops {
		stop()
	}
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

// putAsync adds an item with data and priority to the next request of the
// Queue's puts, and sends that request at once, on a goroutine, when fewer
// than the cap are in flight; it waits first while the cap's worth of full
// requests waits to be sent. It returns the group of the item's request.
func (q *Queue) putAsync(ctx context.Context, data []byte, prio int64) (*putGroup, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // as Put's request would fail
	}
	bc, ok := store.Find[store.BatchCreator](q.st)
	if !ok || itemSize(q.items, data) > store.MaxBatchSize {
		return q.putAlone(ctx, data, prio)
	}
	p, limit := &q.puts, q.opts.maxPuts()
	p.mu.Lock()
	for p.backlogged(limit, itemSize(q.items, data)) {
		if p.room == nil {
			p.room = make(chan struct{})
		}
		room, held := p.room, p.onHold
		p.mu.Unlock()
		if held != nil {
			held()
		}
		select {
		case <-room:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
	g := p.join(ctx, q.items, prio, data)
	g.async++
	if ctx.Done() != nil {
		g.stops = append(g.stops, context.AfterFunc(ctx, func() { p.leave(g, context.Cause(ctx)) }))
	}
	var send *putGroup
	if p.inFlight < limit {
		// Nothing else is pending while a slot is free: g goes now.
		p.inFlight++
		send = p.pop()
	}
	p.mu.Unlock()
	if send != nil {
		go q.flush(bc, send)
	}
	return g, nil
}

// backlogged reports whether an item of size would need a new group while
// as many groups as may be in flight wait already, each full. p.mu is held.
func (p *putter) backlogged(limit, size int) bool {
	n := len(p.pending)
	if n < limit {
		return false
	}
	return !p.pending[n-1].fits(size)
}

// fits reports whether an item of size fits g's request.
func (g *putGroup) fits(size int) bool {
	return len(g.batch) < store.MaxBatchNodes && g.size+size <= store.MaxBatchSize
}

// putAlone creates an item that goes in a request of its own (one too large
// for a batch, or a store without store.BatchCreator), on a goroutine, as
// the one member of a group of its own. Such requests take slots of their
// own, as many as the cap: it waits for one while they are all taken.
func (q *Queue) putAlone(ctx context.Context, data []byte, prio int64) (*putGroup, error) {
	slots := q.puts.aloneSlots(q.opts.maxPuts())
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	g := &putGroup{done: make(chan struct{}), members: 1, async: 1}
	g.ctx, g.cancel = context.WithCancelCause(ctx)
	id := newID()
	data = slices.Clone(data) // the caller may reuse its buffer once PutAsync returns
	go func() {
		defer func() { <-slots }()
		q.settle(g, q.create(g.ctx, q.items, names.ItemName(prio, id), data, id))
	}()
	return g, nil
}

// aloneSlots returns the semaphore of the PutAsyncs that go alone.
func (p *putter) aloneSlots(n int) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alone == nil {
		p.alone = make(chan struct{}, n)
	}
	return p.alone
}

// Pending is a put started by [Queue.PutAsync]: it reports the put's
// outcome once the request that holds the item has returned. Its methods
// are safe for concurrent use and never block but Wait. The zero Pending
// is done, and its Err reports store.ErrInvalidArgument.
type Pending struct {
	g   *putGroup // the item's request; nil when err is known at the start
	err error
}

// errNotStarted is the Err of a Pending not made by PutAsync.
var errNotStarted = fmt.Errorf("queue: pending put: %w: not made by PutAsync", store.ErrInvalidArgument)

// closed is the Done channel of a Pending whose outcome was known at the
// start.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Done returns a channel that is closed once the put's outcome is known:
// the request that holds the item has returned, or the put failed before
// it was sent. It is closed at most once, and never sent on.
func (p *Pending) Done() <-chan struct{} {
	if p == nil || p.g == nil {
		return closed
	}
	return p.g.done
}

// Err returns nil while Done is not closed. Once it is, it returns nil when
// the item was stored, and otherwise the reason it may not have been, as
// Put would return it: an error of the store (store.ErrSessionExpired,
// store.ErrClosed, ...), bad input (store.ErrInvalidArgument,
// store.ErrTooLarge, ErrMismatch, ...) or, when the request was called off
// because the ctx of every PutAsync in it had ended, the error of the last
// of them with its cause (the item may then have been stored or not).
// Every Pending of one request reports the same outcome.
func (p *Pending) Err() error {
	switch {
	case p == nil || p.g == nil && p.err == nil:
		return errNotStarted
	case p.g == nil:
		return p.err
	}
	select {
	case <-p.g.done:
		return p.g.public
	default:
		return nil
	}
}

// Wait blocks until the put's outcome is known, and returns Err. When ctx
// ends first it returns ctx's error, wrapped, with its cause: it stops
// waiting, and the put goes on (to call the put off, end the ctx given to
// PutAsync).
func (p *Pending) Wait(ctx context.Context) error {
	select {
	case <-p.Done():
		return p.Err()
	default:
	}
	select {
	case <-p.Done():
		return p.Err()
	case <-ctx.Done():
		return fmt.Errorf("queue: wait for put: %w", recipe.CtxErr(ctx, nil))
	}
}

// failed returns a Pending whose put failed with err, not nil, before it
// was sent.
func failed(err error) *Pending { return &Pending{err: err} }
