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
//   - A granted lock is a context (Context, RContext) that is cancelled the
//     moment the lock is no longer held, with a cause saying why:
//     [ErrUnlocked], [ErrNodeDeleted], [ErrDisconnected], or the session's
//     end (store.ErrSessionExpired, store.ErrClosed). Do the critical work
//     under that context.
//   - Every grant has a fencing token (Token, RToken) that grows with each
//     successive grant of the same lock, for storage that must reject
//     writes from a stale holder.
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
// stops counting; see DoubleBarrier for the details. The barrier nodes stay
// in the store after use, as Curator's do.
package sync
