// Package queue is a distributed FIFO and priority queue over a
// [store.Store]: producers Put items, consumers Take them one at a time or
// receive them from a channel, and nothing a Put acknowledged is lost.
//
// # Layout
//
// A Queue at path p keeps:
//
//   - p/config: the queue's settings (delivery, visibility timeout, dead
//     letters), written by the first Queue that takes from it or puts to
//     it with options; see Settings.
//   - p/items: the items, persistent sequential nodes. An item's name
//     carries its priority in an order-preserving fixed-width encoding and
//     its id, a 64-bit name for the item's whole life, unique to it (a
//     counter per process from a random start; see [Item.ID]). Names
//     under p/items that are not items are ignored.
//   - p/claims (at-least-once): one node per claimed item, named by its id:
//     ephemeral, or with a lease of its own under a visibility timeout on
//     etcd. It holds the consumer's identity record (host, process, when
//     it claimed; see the inspect package), which "corral locks" shows.
//   - p/deliveries (at-least-once): one node per item delivered at least
//     once, named by its id, holding how many times it was.
//
// The queue's node, p/config, and the directories p/items, p/claims and
// p/deliveries (made by the first Put of each Queue) stay for the queue's
// life, empty or not, until someone deletes them: items are ordered by the
// store's Seq and views count the directories' changes, which a directory
// made again would start anew. A claim and a count of deliveries go with
// their item.
//
// Items are delivered by priority (higher first) and, within a priority,
// in the order they were put (by the store's Seq, never by the raw name,
// whose suffix differs from store to store). Nothing else is stored: every
// node is readable with "corral ls", and a queue made by an earlier corral
// (items without ids, claims named by the item) is read as it is.
//
// # Settings
//
// A queue's delivery guarantee and, at-least-once, its visibility timeout
// and dead-letter queue are stored with it, in p/config. A setting is fixed
// by the first Queue that acts on it: a take (Take, TryTake, Consume) fixes
// every setting, with its options or, for those it was given none for, the
// defaults, since it takes by them; a Put fixes only the settings its Queue
// was given an option for, and a producer given none stores nothing, so
// at-least-once consumers that come after it are not refused.
// [Queue.Settings], Len and Peek only read them. Every Queue on p adopts the
// stored settings it was given no option for and refuses the queue, with
// [ErrMismatch], where an option it was given differs from a stored one:
// an at-most-once consumer on an at-least-once queue would take items other
// consumers hold claimed, delivering them twice. To change the settings,
// drain the queue and delete p/config. A config node that does not fix
// every setting yet marks the others "unset", and a corral that predates
// the mark refuses it (ErrKindMismatch) until a take has fixed them all.
// A path that holds another recipe's nodes (a lock's, a barrier's) is refused with [ErrKindMismatch].
// A visibility timeout is refused (every call of the Queue fails) unless
// WithDelivery(AtLeastOnce) is given too: it never makes a queue
// at-least-once by itself.
//
// # Delivery
//
// At-most-once ([AtMostOnce], the default): taking an item deletes its node,
// and whoever deletes it owns it. An item is never delivered twice. It can be
// lost only when the connection breaks while the delete is under way (the
// delete fails with [store.ErrDisconnected] after the server applied it),
// when the consumer crashes holding it, or when a stopping Consumer cannot
// put back the item it held within a grace of one second (an outage).
//
// At-least-once ([AtLeastOnce]): taking an item creates a claim for it and
// leaves the item in place; [Item.Ack] deletes the item and its claim,
// [Item.Nack] deletes only the claim, and so does the end of the claim
// (below). A claimed item is invisible to other consumers; an item whose
// claim goes away returns to its old place in the queue and is delivered
// again, with the same [Item.ID]. Consumers must therefore be idempotent.
//
// A claim lasts until Ack or Nack, the end of the consumer's session, or,
// with a visibility timeout ([WithVisibilityTimeout]), until the timeout
// passes without an [Item.Extend]: a consumer that is alive but stuck loses
// its item to another. [Item.Context] is cancelled the moment the claim is
// lost. On etcd the claim has a lease of its own, with the timeout as its
// TTL, so the server's clock times it (and a crashed consumer's claims end
// with their leases, not with its session); on ZooKeeper and memstore the
// claim is ephemeral and the consumer's own clock times it: at the deadline
// the Item's Context is cancelled and the claim deleted by the consumer, so
// another consumer can have the item only after its holder was told. (A
// frozen process cannot delete it, but its session then expires.)
// ZooKeeper's TTL nodes are not used: the server must be started with
// extendedTypesEnabled, it deletes expired nodes only on its container
// sweep (every minute by default), and a TTL node cannot be ephemeral, so a
// crashed consumer's item would wait out the timeout.
//
// Every item counts its deliveries ([Item.Deliveries], 1 the first time).
// With a dead-letter queue ([WithDeadLetter]), an item that has been
// delivered the maximum number of times is moved, with its id, priority and
// data, to the queue at the path given, instead of being delivered again.
// At-least-once the count is recorded before the item is handed over, so a
// message that crashes its consumer is counted; at-most-once an item is
// counted each time it is put back by Nack.
//
// Producers: a Put that fails with [store.ErrDisconnected] is retried, and
// the retry first looks for the item by its id, so a Put whose reply was
// lost adds its item once; a Put whose ctx ends first may or may not have
// added it.
//
// # Cost of a put
//
// A Put is one request: the create of its item (on a store with
// store.BatchCreator, a batch of one, which on etcd is a leaner
// transaction than a Create's). The queue's settings are read, or stored,
// once per Queue, and the items directory is made only by the first put
// that finds it missing. Puts of one Queue that overlap share requests, as
// a database commits a group: while two put requests are in flight
// (WithPutsInFlight sets how many), the Puts that come wait for one of them
// to return, then go together in one request (a ZooKeeper multi, an etcd
// transaction), all or none, each returning once that is acknowledged; so
// 8 producer goroutines on one session pay about a request per 2.5 items,
// and the server writes its log once per request. A server with cores to
// spare serves more requests in flight side by side: there a cap of as
// many as the producers can put faster.
// PutBatch puts up to store.MaxBatchNodes items in one request. PutAsync
// returns before its item is stored, with a Pending to wait on (as
// Curator's DistributedQueue puts in the background and flushPuts waits),
// so that one goroutine fills requests of up to store.MaxBatchNodes items
// as they go; what it gives up against Put is in its doc. docs/performance.md
// gives figures beside Curator's DistributedQueue and etcd's own queue puts.
//
// # Cost of a take
//
// A take costs the same whatever the backlog and, on etcd, whatever the
// queue's history (etcd keeps every deleted key until the next compaction,
// and a listing walks them all). A session lists a queue's directories once
// and then keeps what it knows up to date (see the store capabilities):
//
//   - etcd and memstore follow the directories (store.ChildrenFollower):
//     one listing, then every put, take and claim arrives as it happens.
//     Before each take the consumer syncs with the store (one small read
//     that walks nothing), so it knows every item whose Put returned before
//     the take began. An at-most-once take is then one request that
//     deletes the item and returns it (store.GetDeleter).
//   - ZooKeeper has no such follow: a consumer works through its listing,
//     asking before each take, in one small request (two at-least-once),
//     whether items were put (or claims released) since
//     (store.ChildCounter), and lists again only when they were, or when
//     its listing runs dry. An at-most-once take is then a read and a
//     delete; at-least-once, a read that checks the item is still there (a
//     listing goes stale as others ack its items), the claim, and the reads
//     and write of the delivery count. A steady stream of puts into a long
//     backlog therefore still costs a listing per put on ZooKeeper: it has
//     no way to learn the names of new children without listing them all.
//   - A store with neither lists the queue for every take.
//
// A session's view of a queue is shared by all its Queues on that path and
// kept until the session ends; on etcd and memstore it stops following a
// queue nobody in the session has taken from for a minute (each follow is
// one watch, and gathers every change), and follows anew on the next take.
//
// # Waiting and contention
//
// A consumer that finds no item it can take waits for a change to the
// queue; it never polls. Every waiting consumer wakes on a change, as in
// ZooKeeper's queue recipe.
//
// Consumers competing for the head do not stampede on it. A consumer that
// loses the race for an item (someone else deleted or claimed it first) does
// not list again: it moves on within what it knows. And a session that
// loses races spreads its attempts: it tries an item at random among the
// first few (from 1, doubling with each take that lost a race, shrinking by
// one with each that did not, at most 16) items of the head's priority.
// Uncontended the spread is 1 and items are taken strictly in order. Under
// contention an item can be taken before fewer than 16 items of its own
// priority that were put before it, never before an item of a higher
// priority put before the take began. So a single consumer receives items
// exactly in queue order, and competing consumers receive them in order up
// to that spread.
//
// When items trickle in one at a time to several idle consumers, each Put
// wakes them all and all but one lose the race for it: a wasted read (or a
// failed claim) per idle consumer per item, the price of not queueing the
// consumers themselves, which would cost writes on every take. The
// benchmarks report the wasted attempts per delivered item.
//
// # Never lost between store and user
//
// A take succeeds at its commit point (the delete, or the claim). A Take
// that reaches it returns the item even if ctx ends meanwhile; a Take whose
// ctx ends before it leaves the queue as it was. A [Consumer] hands each
// item over through an unbuffered channel and holds at most one item it has
// taken but not yet handed over (at-least-once, it extends that item's
// claim while it holds it); if its ctx ends first it puts that item back in
// its old place (at-most-once) or releases its claim (at-least-once),
// without counting it as delivered. An at-most-once consumer whose session
// ends while it holds such an item cannot put it back, and [Consumer.Err]
// reports it lost.
//
// # Outages
//
// Every call returns within its ctx, plus a grace of one second for the
// requests that must finish once begun (the commit point of a take,
// releasing a claim, putting an item back), plus the store's own bound on
// a request. A claim that cannot be deleted
// in time is handed to the session's cleaner, which deletes it as soon as
// the connection allows, checking first that the claim is still this
// session's (another consumer may hold the item's claim under the same
// name by then); on etcd a leased claim that cannot be revoked ends with
// its lease. So once the link heals, nothing a consumer gave up blocks an
// item for longer than a session timeout.
//
// # Metrics and logs
//
// A Queue counts, as OpenTelemetry metrics with corral.kind "queue" and
// corral.path (see [WithMeterProvider] and [WithPathLabel]), the items put
// (corral.queue.puts), delivered to the user by Take, TryTake or a
// Consumer (corral.queue.takes, of which corral.queue.redeliveries were
// delivered before), acked (corral.queue.acks) and nacked
// (corral.queue.nacks). An item a Consumer took but gave back unhanded is
// not counted. The metrics go to the global MeterProvider, which records
// nothing until the application installs one. [WithLogger] receives debug
// events; nothing is logged by default.
package queue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/corral-go/corral/internal/identity"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/runner"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Delivery is a delivery guarantee; see the package doc.
type Delivery int

const (
	// AtMostOnce deletes an item when it is taken.
	AtMostOnce Delivery = iota
	// AtLeastOnce claims an item when it is taken and deletes it on Ack.
	AtLeastOnce
)

func (d Delivery) String() string {
	switch d {
	case AtMostOnce:
		return "at-most-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Delivery(%d)", int(d))
}

// Option configures a Queue. An option given to New must agree with the
// settings stored with the queue; one not given adopts them (see Settings
// in the package doc).
type Option func(*options)

// WithDelivery sets the delivery guarantee; the default is AtMostOnce.
func WithDelivery(d Delivery) Option {
	return func(o *options) { o.delivery, o.set.delivery = d, true }
}

// WithVisibilityTimeout sets how long an at-least-once claim lasts unless
// its item is acked, nacked or extended ([Item.Extend]); see Delivery in
// the package doc. The default, 0, keeps a claim until the consumer's
// session ends. On etcd the timeout is a lease's TTL: whole seconds, at
// least the server's minimum (a few seconds). It requires
// WithDelivery(AtLeastOnce): without, the Queue's calls fail with
// store.ErrInvalidArgument.
func WithVisibilityTimeout(d time.Duration) Option {
	return func(o *options) { o.visibility, o.set.visibility = d, true }
}

// WithDeadLetter makes an item that has been delivered maxDeliveries times
// move to the queue at path, with its id, priority and data, instead of
// being delivered again; see Delivery in the package doc. maxDeliveries must
// be at least 1, and path a queue path other than the queue's own.
func WithDeadLetter(path string, maxDeliveries int) Option {
	return func(o *options) { o.deadLetter, o.maxDeliveries, o.set.deadLetter = path, maxDeliveries, true }
}

// WithPutsInFlight sets how many requests of this Queue's Puts may be in
// flight at once; the Puts that come while that many are wait and go
// together in the next request (see Cost of a put in the package doc). The
// default, 2, suits a server with no cores to spare; on one with room, as
// many as the producers that share the Queue can do better (see
// docs/performance.md). n must be at least 1: otherwise every call of the
// Queue fails with store.ErrInvalidArgument. It is the Queue's own, not
// stored with the queue.
func WithPutsInFlight(n int) Option {
	return func(o *options) { o.putsInFlight, o.set.putsInFlight = n, true }
}

type options struct {
	config
	set          struct{ delivery, visibility, deadLetter, putsInFlight bool }
	putsInFlight int // 0 for defaultPutsInFlight
	tel          telemetry.Config
}

// maxPuts is how many requests of the Queue's puts may be in flight.
func (o *options) maxPuts() int {
	if o.putsInFlight > 0 {
		return o.putsInFlight
	}
	return defaultPutsInFlight
}

// The errors of this package, matched with errors.Is. Errors of the store
// (store.ErrTooLarge, store.ErrSessionExpired, store.ErrDisconnected, ...)
// are wrapped and matched the same way; misuse (a nil store, a zero Queue,
// Item or Consumer, a bad option) wraps store.ErrInvalidArgument, a bad path
// store.ErrInvalidPath. A nil ctx panics, as Go's convention is for a nil
// Context (pass context.TODO when unsure); it leaves no store locked.
var (
	// ErrInvalidDelivery: an unknown Delivery was given to New (every
	// call of that Queue fails with it).
	ErrInvalidDelivery = errors.New("queue: invalid delivery")
	// ErrSettled: Ack or Nack of an item already acked or nacked.
	ErrSettled = errors.New("queue: item already acked or nacked")
	// ErrConsumerClosed is the cause reported by a Consumer stopped by
	// Close. It is the same error as every other Close's in corral.
	ErrConsumerClosed = runner.ErrClosed
	// ErrMismatch: the settings stored with the queue differ from the
	// options the Queue was given. It is the same error as
	// sync.ErrMismatch and partition.ErrMismatch.
	ErrMismatch = recipe.ErrMismatch
	// ErrKindMismatch: the path holds another kind of recipe's nodes.
	ErrKindMismatch = recipe.ErrKindMismatch
	// ErrClaimLost: the item's claim ended (its visibility timeout
	// passed, its session ended, or someone deleted it) before Ack, Nack
	// or Extend; the item is, or will be, delivered again. It is also the
	// cause of the item's Context then.
	ErrClaimLost = errors.New("queue: claim lost")
	// ErrNoClaim: Extend of an at-most-once item, which holds no claim.
	ErrNoClaim = errors.New("queue: item holds no claim")
	// ErrPeeked: Ack, Nack or Extend of an item returned by Peek, which
	// was not taken.
	ErrPeeked = errors.New("queue: item was peeked, not taken")
	// ErrNoBatch: PutBatch on a store that does not implement
	// store.BatchCreator, which cannot add items all or none.
	ErrNoBatch = errors.New("queue: store cannot create a batch")
)

// Queue is a queue at one path of a store, used through one session. It is
// safe for concurrent use; any number of Queues, in any number of
// processes, may share the path. It holds no resource of its own: the
// session's view of the queue lives as long as the session. The zero value
// is not usable (its methods fail with store.ErrInvalidArgument); call New.
type Queue struct {
	st     store.Store
	path   string
	bad    error // what New was given that no queue can use
	items  string
	claims string
	counts string
	config string
	opts   options

	cfg   settings
	puts  putter
	rec   *telemetry.Recorder
	ident *identity.Encoder // of the claims

	taken  atomic.Int64 // items taken
	wasted atomic.Int64 // take attempts lost to another consumer
	spread atomic.Int32 // see spreadOrder
	// dirsKept: the queue's directories were made explicitly (see
	// keepDirs).
	dirsKept atomic.Bool
}

// New returns the queue at path, used through the session st. It does no
// I/O. Bad input is reported by every method that could use the queue (the
// first Put, take, Len, Peek, Settings or Consume) with an error wrapping
// store.ErrInvalidArgument for a nil st or a bad option,
// store.ErrInvalidPath for a path no queue can have (see the recipe rules:
// not the root, room for the names below it), or ErrInvalidDelivery.
func New(st store.Store, path string, opts ...Option) *Queue {
	var o options
	bad := checkNew(st, path)
	for _, opt := range opts {
		if opt == nil {
			if bad == nil {
				bad = fmt.Errorf("%w: nil option", store.ErrInvalidArgument)
			}
			continue
		}
		opt(&o)
	}
	if bad == nil {
		bad = o.validate(path)
	}
	return &Queue{
		st:     st,
		path:   path,
		bad:    bad,
		items:  store.Join(path, names.Items),
		claims: store.Join(path, names.Claims),
		counts: store.Join(path, names.Deliveries),
		config: store.Join(path, names.Config),
		opts:   o,
		rec:    telemetry.New(o.tel, telemetry.KindQueue, path, nil),
		ident:  identity.NewEncoder(""),
	}
}

// checkNew reports a store and a path no Queue can use.
func checkNew(st store.Store, path string) error {
	if st == nil {
		return fmt.Errorf("%w: nil store", store.ErrInvalidArgument)
	}
	return recipe.ValidateDir(path)
}

// usable returns an error for a Queue not made by New, or made by New with
// bad input.
func (q *Queue) usable(op string) error {
	switch {
	case q == nil || q.st == nil && q.bad == nil:
		return fmt.Errorf("queue: %s: %w: queue not made by New", op, store.ErrInvalidArgument)
	case q.bad != nil:
		return fmt.Errorf("queue: %s %q: %w", op, store.ShortPath(q.path), q.bad)
	}
	return nil
}

// Path returns the path of the queue.
func (q *Queue) Path() string {
	if q == nil {
		return ""
	}
	return q.path
}

// Delivery returns the delivery guarantee of the settings stored with the
// queue once this Queue has read them (by Settings, a Put, a take, Len or
// Peek), and until then the one it was given, or the default: it agrees
// with Settings. It does no I/O.
func (q *Queue) Delivery() Delivery {
	if q == nil {
		return AtMostOnce
	}
	return q.delivery()
}

// Put adds data to the queue with priority 0. See PutPriority.
func (q *Queue) Put(ctx context.Context, data []byte) error {
	return q.PutPriority(ctx, data, 0)
}

// PutPriority adds data to the queue with the given priority: items of a
// higher priority are delivered first, items of one priority in the order
// their Puts returned. Every int is a valid priority.
//
// It blocks for one request, and for a first check of the queue's path
// (one or two requests, once per Queue). Puts of one Queue that overlap
// share requests: one that starts while two are in flight waits for one of
// them, then goes in one request with the others that waited meanwhile
// (all or none, on a store.BatchCreator), and returns once that is
// acknowledged; see "Cost of a put" in the package doc. Data over store.MaxDataSize fails
// with an error matching store.ErrTooLarge, before any I/O. A request that
// fails with store.ErrDisconnected is retried, after looking for the item
// by its id, until ctx ends: a lost reply never adds the item twice. When
// ctx ends first it returns ctx's error (wrapped, with its cause); the item
// may then have been added or not. After the session ended it fails with
// store.ErrSessionExpired or store.ErrClosed.
func (q *Queue) PutPriority(ctx context.Context, data []byte, priority int) error {
	if err := q.usable("put"); err != nil {
		return err
	}
	if err := store.ValidateData(data); err != nil {
		return fmt.Errorf("queue: put %q: %w", store.ShortPath(q.path), err)
	}
	// The first Put fixes the settings the producer was given options
	// for, and leaves the others to the consumers.
	if _, err := q.settings(ctx, usePut); err != nil {
		return fmt.Errorf("queue: put %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	if err := q.put(ctx, data, int64(priority)); err != nil {
		return fmt.Errorf("queue: put %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	q.rec.Put(ctx)
	return nil
}

// PutAsync starts a put of data with the given priority and returns at
// once, before the item is stored: the Pending it returns tells when the
// put's outcome is known and what it is. It is how one goroutine keeps
// many puts in flight, as Curator's DistributedQueue puts in the
// background and flushPuts waits: PutAsyncs of one Queue go together in
// requests, as overlapping Puts do (see "Cost of a put" in the package
// doc), so a lone producer pays about a request per store.MaxBatchNodes
// items. The item is stored as PutPriority stores it, and the same lost
// replies are retried; data is copied, so the caller may reuse it.
//
// What a caller gives up against Put: a PutAsync that returned has not
// stored its item, and a failed one is known only from its Pending (check
// every Pending, or the items whose put failed are lost unnoticed); and
// items of PutAsyncs whose requests overlap have no order between them,
// like overlapping Puts, also when one goroutine made them (a request
// retried after a lost connection may land after a later one). With
// WithPutsInFlight(1) one request is in flight at a time, and the items of
// one goroutine's PutAsyncs are stored in the order of the calls.
//
// It blocks only for the Queue's first check of its path (once per Queue,
// as Put does), and while the Queue's puts are so far behind the store
// that as many full requests (store.MaxBatchNodes items each) wait to be
// sent as may be in flight: then until one of them is sent, so that a
// producer faster than the store is held back rather than filling memory.
// (An item that goes in a request of its own, too large for a batch or on
// a store without store.BatchCreator, waits while as many such requests
// are in flight.) When ctx ends before the item joined a request, the
// Pending fails with ctx's error; when it ends later, the item leaves its
// request, which is called off once all of its items have left, and the
// Pending reports the request's outcome: nil if it stored the items, else
// the error of the ctx that ended last (the item may then have been
// stored or not). Misuse (a nil or zero Queue, a bad option) and data over
// store.MaxDataSize fail the Pending before any I/O, ErrMismatch and
// ErrKindMismatch at the first check. After the session ended the Pending
// fails with store.ErrSessionExpired or store.ErrClosed. PutAsync never
// returns nil and is safe for concurrent use; no goroutine of its outlives
// the requests in flight.
func (q *Queue) PutAsync(ctx context.Context, data []byte, priority int) *Pending {
	if err := q.usable("put"); err != nil {
		return failed(err)
	}
	if err := store.ValidateData(data); err != nil {
		return failed(fmt.Errorf("queue: put %q: %w", store.ShortPath(q.path), err))
	}
	if _, err := q.settings(ctx, usePut); err != nil {
		return failed(fmt.Errorf("queue: put %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err)))
	}
	g, err := q.putAsync(ctx, data, int64(priority))
	if err != nil {
		return failed(fmt.Errorf("queue: put %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err)))
	}
	return &Pending{g: g}
}

// PutBatch adds items to the queue with priority 0, in one request (one
// ZooKeeper multi, one etcd transaction): all of them or none. The items
// are delivered in the order of the slice, after every item of their
// priority whose Put returned before PutBatch began; a consumer never
// sees some of them without the others having been added.
//
// It blocks for one request, and for a first check of the queue's path
// (once per Queue), as Put does, and retries a lost connection the same
// way: a lost reply never adds the items twice. Before any I/O it fails
// with store.ErrInvalidArgument for an empty batch, with store.ErrTooLarge
// for an item over store.MaxDataSize or a batch that does not fit one
// request (over store.MaxBatchNodes items, or store.MaxBatchSize bytes of
// data and names: split it), and with ErrNoBatch when the store cannot
// create nodes all or none (every store of this module can). When ctx ends
// first it returns ctx's error (wrapped, with its cause); the items may
// then have been added (all of them) or not.
func (q *Queue) PutBatch(ctx context.Context, items [][]byte) error {
	if err := q.usable("put batch"); err != nil {
		return err
	}
	bc, ok := store.Find[store.BatchCreator](q.st)
	if !ok {
		return fmt.Errorf("queue: put batch %q: %w", store.ShortPath(q.path), ErrNoBatch)
	}
	ids := newIDs(len(items))
	batch := make([]store.BatchNode, len(items))
	for i, data := range items {
		batch[i] = store.BatchNode{Name: names.ItemName(0, ids[i]), Data: data}
	}
	if err := store.ValidateBatch(q.items, batch, store.Sequential); err != nil {
		return fmt.Errorf("queue: put batch %q: %w", store.ShortPath(q.path), err)
	}
	if _, err := q.settings(ctx, usePut); err != nil {
		return fmt.Errorf("queue: put batch %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	// All or none: finding the first item after a lost reply finds them all.
	err := q.retryCreate(ctx, q.items, batch[0].Name, ids[0], func() error {
		_, err := bc.CreateBatch(ctx, q.items, batch, store.Sequential)
		return err
	})
	if err != nil {
		return fmt.Errorf("queue: put batch %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	for range items {
		q.rec.Put(ctx)
	}
	return nil
}

// Take removes the next item from the queue (at-most-once) or claims it
// (at-least-once) and returns it, waiting while the queue has no item it can
// take. The next item is the head of the queue, or one close to it while
// consumers compete (see "Waiting and contention" in the package doc).
//
// It blocks until it has an item, ctx ends or the session ends. When ctx
// ends before an item was taken, Take returns ctx's error (wrapped, with
// its cause) and the queue is as it was; an item taken just as ctx ends is
// returned. Lost connections (store.ErrDisconnected) are retried until ctx
// ends. After the session ended it fails with store.ErrSessionExpired or
// store.ErrClosed. It fails with ErrMismatch or ErrKindMismatch when the
// queue's path refuses this Queue (see Settings). It is safe for concurrent
// use.
func (q *Queue) Take(ctx context.Context) (*Item, error) {
	if err := q.usable("take"); err != nil {
		return nil, err
	}
	it, err := q.take(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("queue: take %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	q.delivered(ctx, it)
	return it, nil
}

// delivered records the delivery of it to the user.
func (q *Queue) delivered(ctx context.Context, it *Item) {
	q.rec.Take(ctx)
	if it.Deliveries > 1 {
		q.rec.Redelivery(ctx)
	}
}

// TryTake is Take without the wait: it reports false, with a nil error,
// when no item can be taken now (no item put before TryTake began is
// available). It blocks for a few requests and does not retry: a lost
// connection fails it with store.ErrDisconnected.
func (q *Queue) TryTake(ctx context.Context) (*Item, bool, error) {
	if err := q.usable("take"); err != nil {
		return nil, false, err
	}
	it, err := q.take(ctx, false)
	if err != nil {
		return nil, false, fmt.Errorf("queue: take %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	if it != nil {
		q.delivered(ctx, it)
	}
	return it, it != nil, nil
}

// Len returns the number of items in the queue, claimed ones included, as
// of a moment during the call. On etcd and memstore it reads what the
// session's view of the queue already holds (a sync, one small read); on
// ZooKeeper it lists the items directory. It blocks for those requests and
// does not retry.
func (q *Queue) Len(ctx context.Context) (int, error) {
	if err := q.usable("len"); err != nil {
		return 0, err
	}
	cfg, err := q.settings(ctx, useRead)
	if err != nil {
		return 0, fmt.Errorf("queue: len %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	n, err := q.view(cfg.delivery == AtLeastOnce).size(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue: len %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	return n, nil
}

// Peek returns the item a Take would take now, without taking it, and
// reports false when there is none. The item is a copy: its Ack, Nack and
// Extend fail with ErrPeeked, its Context is never cancelled, and its
// Deliveries is how many times it was delivered so far. It blocks for a
// few requests and does not retry.
func (q *Queue) Peek(ctx context.Context) (*Item, bool, error) {
	if err := q.usable("peek"); err != nil {
		return nil, false, err
	}
	it, err := q.peek(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("queue: peek %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	return it, it != nil, nil
}

// Settings returns the settings stored with the queue and, for those not
// stored yet, the ones this Queue would store at its first take (its
// options, or the defaults). It only reads: it never stores them. It fails
// with ErrMismatch when the stored settings differ from the options the
// Queue was given, ErrKindMismatch when the path holds another recipe's
// nodes. It blocks for a request or two (none once the Queue has read
// every setting stored).
func (q *Queue) Settings(ctx context.Context) (Settings, error) {
	if err := q.usable("settings"); err != nil {
		return Settings{}, err
	}
	cfg, err := q.settings(ctx, useRead)
	if err != nil {
		return Settings{}, fmt.Errorf("queue: settings %q: %w", store.ShortPath(q.path), recipe.CtxErr(ctx, err))
	}
	return cfg.public(), nil
}
