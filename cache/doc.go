// Package cache keeps shared state current in a process: one node ([Node])
// or a subtree ([Tree]) of a store, followed as it changes and handed out
// on channels, on every store corral runs on.
//
// It is what services ask of a coordination store after locks and
// leaders: their configuration, feature flags, the endpoints and
// assignments other processes publish. Curator's caches (NodeCache,
// PathChildrenCache, TreeCache, CuratorCache) do this for ZooKeeper; their
// bug tracker is the list of what a cache must not do, and this package's
// tests pin each down: no growth on a path that does not exist (a watch
// per path, however long the wait), no cache that outlives its session
// (it stops with the session's cause, see Sessions), every watch and
// goroutine released on Close, and no change lost, however fast they come
// (changes may merge, as said below, but the last state of every node
// always arrives).
//
// # A node
//
// [NewNode] follows one node: its Values channel delivers the node now,
// at once (Exists false while it is missing), and after every change: its
// creation, data, deletion, re-creation. A value not yet received when a
// newer one is read is replaced by it, as election.Observe does: a slow
// receiver sees fewer values, never an old one, and never holds up the
// store. It costs one watch (a ZooKeeper exists watch, an etcd watch) and
// a read per change.
//
// # A tree
//
// [NewTree] follows a subtree, to a depth ([WithDepth]; 1: a node and its
// children), as a map of path to node, delivered two ways:
//
//   - Snapshots: the whole map, first once the subtree is read, then after
//     every change, replaced by a newer one while not received, as Values
//     are. A Snapshot is immutable and costs nothing to hand out (the map
//     is persistent: a change copies a few small parts of it).
//   - Events: every change, path by path: created, changed, deleted. The
//     events of one path come in the order of its changes, and those of a
//     path that the receiver has not taken yet merge into one, from what
//     it last received of the path to what the path holds when it takes
//     the event: a node made and deleted between two receives is never
//     seen; one changed twice is seen changed once, to its latest state; a
//     node deleted and made again is seen changed, with Old and Node of
//     different Seqs (or, on ZooKeeper, where a node that is not
//     sequential has Seq 0, different Created times). Paths come in the
//     order of their first change not taken. So a receiver that applies
//     every event holds the tree; it never holds a state a path did not
//     have, and once the store is quiet it holds the store's.
//
// Read either or both: what one receiver does not take costs the other
// nothing, and the events not taken hold one node per path at most.
//
// After the store is quiet the snapshot equals the store: every node Get
// finds at or below the path, down to the depth, as Get returns it (on
// etcd, a key below a path that is no key, such as the prefix of etcd's
// own lock recipes, is a node whose parent is missing). While changes come,
// on etcd and memstore each snapshot is the subtree at one revision of the
// store; on ZooKeeper, where a change is learnt by a notification and then
// a read of the node, each node's state is one it had, in order, but two
// nodes may be seen at moments a few reads apart.
//
// # Lost connections and staleness
//
// A cache rides out a lost connection. It says when its view may be out
// of date: Snapshot.Stale, and the events [Stale] and [Current], in order
// with the others; after Current, every change made before it has been
// delivered. On etcd the watch resumes from its revision, and the changes
// made meanwhile come after the reconnection, with no read of the
// subtree. On ZooKeeper a lost connection takes the watch, and the cache
// reads the subtree again once connected and delivers the differences; so
// does a compaction of etcd's history, on etcd. A node's Value carries
// Stale likewise.
//
// # Sessions
//
// A store.Store is one session, and a cache lives on one: when the session
// ends (expired, closed), the cache stops, with the session's cause in
// Err (store.ErrSessionExpired, store.ErrClosed), its channels closed and
// nothing of it left. Nothing carries over to a later session unless the
// caller says so: to keep a tree's view across sessions, open a new
// session and a new Tree on it with [WithBase] and the old Tree's last
// snapshot; the new Tree's first events are then the changes from that
// snapshot to the store as the new session reads it, not a creation of
// every node. A node cache needs nothing of the kind: its first value is
// the node now.
//
// # Costs and bounds
//
// One watch per tree where the store has one (store.TreeFollower): an
// etcd prefix watch, a ZooKeeper 3.6+ persistent recursive watch, and on
// memstore no watch at all; elsewhere a one-shot watch per node (see
// store.FollowTree). The memory of a tree is its nodes, and the events not
// taken, at most one per path; a tree that would hold more than its limit
// ([WithMaxNodes], [DefaultMaxNodes]) stops with [ErrTooManyNodes], so that
// a cache started on the wrong path (the root of a large store) fails
// instead of exhausting memory. Nothing grows with the number of changes.
//
// # Telemetry
//
// [WithMeterProvider] and [WithLogger] route what the caches record
// (internal/telemetry): corral.cache.changes, corral.cache.nodes,
// corral.cache.reads (corral.cause = start, gap) and corral.cache.stale,
// with corral.kind cache.node or cache.tree and corral.path; and debug
// logs of the reads and the changes of staleness.
package cache
