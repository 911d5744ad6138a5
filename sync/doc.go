// Package sync provides distributed synchronization primitives that look
// and feel like the standard library's sync package: a [Mutex], an
// [RWMutex], a [MultiMutex] over several paths, a [StripedMutex] of k
// stripes, a [Barrier], a [DoubleBarrier] and a [Semaphore]. Each is
// written once against a store.Store and runs unchanged on ZooKeeper
// (zkstore), etcd (etcdstore) and in memory (memstore).
//
// A value is a handle for one session (one store.Store) on a lock or
// barrier named by a path; processes, or goroutines, that name the same path
// on the same tree synchronize with each other. Its own files import the
// standard library's sync package as gosync, and so can callers that need
// both.
//
// # Locks
//
// Mutex and RWMutex are the ZooKeeper lock recipes: a contender creates an
// ephemeral sequential node under the lock's path, the lowest one holds the
// lock, and every waiter watches only the node that blocks it, so a release
// wakes only the waiters it unblocks. Beyond the older libraries they add:
//
//   - Lock takes a ctx and can be cancelled; a waiter that gives up, for
//     whatever reason, removes its node before it returns.
//   - A granted lock is a context (Context, [ReadHold.Context]) that is
//     cancelled the moment the lock is no longer held, with a cause saying
//     why: [ErrUnlocked], [ErrNodeDeleted], [ErrDisconnected], or the
//     session's end (store.ErrSessionExpired, store.ErrClosed). Do the
//     critical work under that context.
//   - Every grant has a fencing token (Token, [ReadHold.Token]) that grows
//     with each successive grant of the same lock, for storage that must
//     reject writes from a stale holder.
//   - Misuse and lost locks are errors ([ErrNotLocked], [ErrLockLost]),
//     never panics and never silent.
//
// The node names interoperate with other clients of the same tree. On
// ZooKeeper they are those of Curator's InterProcessMutex ("lock-") and
// InterProcessReadWriteLock ("__READ__", "__WRIT__"), and Curator's,
// go-zookeeper's and kazoo's contenders count as normal contenders. On etcd
// the contenders are ordered by create revision, as etcd's own
// concurrency.Mutex orders its keys, so a corral Mutex and a
// concurrency.Mutex on the same prefix exclude each other.
//
// # Several locks at once, and striped locks
//
// MultiMutex holds a set of locks all together or not at all, as Curator's
// InterProcessMultiLock does. Each member is an ordinary Mutex contender on
// its path, so it excludes with a Mutex there; Lock takes the members in
// sorted order, so overlapping sets never deadlock each other. Its one hold
// context ends when any member is lost, with a [*MemberError] naming it, and
// each member keeps its own fencing token.
//
// StripedMutex splits a hot resource into k stripes and grants any one that
// is free: k holders at once, each on its own segment (a flash sale's stock
// split into k segments sells k units at a time). A caller tries the free
// stripes first, from an offset of its own, then waits in the shortest
// line; a release wakes the next in that line, or, when the line is empty,
// hands the stripe to one waiter elsewhere, so a release never wakes more
// than one waiter. Each [Stripe] has its own hold context and token.
//
// # Semaphore and barriers
//
// Semaphore is the lock recipe with n holders: the n lowest "lease-" nodes
// hold a Lease, which is a context and a token like a lock's, and a release
// wakes one waiter. n is stored in the semaphore's node, and a participant
// that disagrees gets a *LimitError.
//
// Barrier is a node: Set creates it, Remove deletes it, and Wait blocks until
// it is gone. DoubleBarrier gathers n participants at Enter and lets them go
// at Leave only once all have left; n is a limit (each round admits exactly
// the first n), not Curator's threshold. A participant whose session ends
// stops counting; see DoubleBarrier for the details.
//
// # What stays in the store
//
// Nothing a lock leaves behind: the directory of a Mutex, RWMutex,
// MultiMutex member or election, and the directories above it that the
// store made on the way, go with the last contender node in them (see
// Parents in the store package), so a lock per entity ("/locks/order-123")
// costs the store nothing once unlocked. A contender arriving as its
// directory goes makes it again and lines up as usual, and its token still
// exceeds every earlier one at the same path. A Barrier's node stays while
// the barrier is set; Remove takes it and the directories above it.
//
// A Semaphore, StripedMutex or DoubleBarrier records its limit in the
// names of its lease, stripe and member nodes ("lease-n3-…"), so the limit
// lives as long as they do, and its directories go with the last of them,
// as a lock's do. A DoubleBarrier's "ready" node, the record of its round,
// goes with the last member to leave (a round whose last members crashed
// keeps it until the next round replaces it). A Semaphore or DoubleBarrier
// that finds another kind of recipe's nodes there (a lock's directory)
// refuses with ErrKindMismatch and stores nothing.
//
// # Outages
//
// Every call that blocks returns within its ctx, plus at most one second:
// a call that gave up (a Lock whose ctx ended, say) or that releases (Unlock,
// ReadHold.Unlock, Lease.Release, Leave) removes its node before it returns, and
// keeps trying to for up to a second after its ctx has ended, so that a
// release with a cancelled ctx still releases on a working connection. A
// node still there then (the connection is down) is not forgotten: the
// session removes it as soon as the connection allows, for as long as it
// lives, and the session's end takes it anyway. The call says so with an
// error wrapping store.ErrDisconnected. Until then the node is this
// session's: an Unlock (or Release) called again waits for its
// removal instead of reporting ErrNotLocked, and the next Lock from the same
// session removes it before it lines up. Nothing decides by a fixed bound
// whether a node is abandoned.
//
// A lost connection does not fail a blocking acquisition (Lock, RLock,
// Acquire): its wait rides it out, and a create or a read that fails
// with it gives its place up (its node removed, or left to the session)
// and tries again after a pause, 10 ms doubling to 500 ms, while ctx and the
// session live. This is the one rule of every corral primitive that waits
// (an election's campaign, a group's join, a partition's shards). The Try
// forms wait for nobody: they return the lost connection as their error.
//
// The store's own bounds add to this (see zkstore and etcdstore: a call
// attempt on etcd is given up after one second by default, and a create
// abandoned on ZooKeeper is waited for at most a second).
//
// # Who holds what
//
// Every contender node (a lock's, a reader's or writer's, a lease's, a
// double barrier member's) holds an identity record by default: a small
// JSON object with the host name, the process ID, the time the attempt
// began and the label given with [WithLabel], for instance
//
//	{"host":"web-1","pid":4242,"start":"2026-08-03T10:15:30.123Z","label":"deploy"}
//
// Any client of the store can read it (the WithLabel example reads one);
// the inspect package and "corral locks" show it with the holders and
// waiters in order. [WithData] replaces it with the caller's own data
// (Curator stores the host address there).
//
// # Metrics and logs
//
// The primitives record OpenTelemetry metrics through the global
// MeterProvider, which records nothing until the application installs one,
// or through the one given with [WithMeterProvider]: the time acquisitions
// wait (corral.acquire.duration, by outcome: granted, busy, canceled,
// failed), the time holds last (corral.hold.duration, released or lost), the
// acquisitions under way and the holds not ended (corral.waiters,
// corral.holders), the grants (corral.grants) and the holds lost, by cause
// (corral.lost: session_expired, session_closed, disconnected, node_deleted).
// Every measurement carries corral.kind (mutex, rwmutex.read, rwmutex.write,
// semaphore, striped_mutex, double_barrier; a MultiMutex records each member
// as a mutex) and corral.path, which [WithPathLabel] can map to fewer values. A loss is recorded when the hold notices it: at once
// while someone watches its Context, else at the Unlock or Release.
//
// Nothing is logged unless a *slog.Logger is given with [WithLogger], which
// then receives debug events: grants, releases, lost holds, and node
// removals retried or left to the session's cleaner.
//
// # Misuse
//
// Bad input is a typed error, never a panic: a nil store, a nil or zero
// value of any type here, a hold a Try call did not grant (the nil *Stripe
// or *Lease of a TryLock or TryAcquire that got none) fail with
// store.ErrInvalidArgument, a path no lock can have (the root included) with
// store.ErrInvalidPath. A nil ctx panics, as Go's convention is for a nil
// Context (pass context.TODO when unsure).
package sync
